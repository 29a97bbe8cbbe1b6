#!/bin/bash
mkdir -p $OUT/fa2; cd devrun/fa
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/fa2/gpu.txt
nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v fa.cu -o fa > $OUT/fa2/build.txt 2>&1; grep -E "registers|error" $OUT/fa2/build.txt | head -30
./fa 20 20 2>&1 | tee $OUT/fa2/e20.txt
./fa 20 16 2>&1 | tee $OUT/fa2/e16.txt
