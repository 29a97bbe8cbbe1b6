#!/bin/bash
mkdir -p $OUT/hub1; cd devrun/hub
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/hub1/gpu.txt
nvcc -O3 -std=c++17 -arch=sm_90 hub.cu -lcusparse -o hub 2>&1 | tail -20
./hub 21 16 2>&1 | tee $OUT/hub1/hub-21-16.txt
