#!/bin/bash
mkdir -p $OUT/hx1; cd devrun/hx
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/hx1/gpu.txt
nvcc -O3 -std=c++17 -arch=sm_90 hubx.cu -lcusparse -o hubx 2>&1 | tail -20
for m in "rmat 21 16" "rmat 19 26" "rmat 22 20" "uniform 21 16" "rmat 20 16"; do
  set -- $m; ( time ./hubx $1 $2 $3 ) > $OUT/hx1/$1-$2-$3.txt 2>&1
  cat $OUT/hx1/$1-$2-$3.txt
done
