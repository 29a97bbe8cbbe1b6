#!/usr/bin/env bash
# ncu: RoDe SpMM against cuSPARSE on R-MAT 2^20 (17M entries), f32, N=128.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc PATH=$PATH:/usr/local/cuda/bin
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
timeout 400 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
  --kernel-name regex:"rode_spmm_f32|cusparse|csrmm|Csrmm|CsrMM|SpMM|spmm_kernel" --launch-count 6 \
  $B/spbench-v1 --backend cuda --no-corpus --large 128 --generators rmat --ops spmm --precisions f32 --n 128 --warmup-ms 1 --runs 1 --time-limit-s 0.2 --out $W/ncu > $OUT/ncu-rmat-n128.txt 2>&1; echo rc=$?
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|L2 Hit Rate|L1/TEX Hit|Memory Throughput|Registers Per|Achieved Occupancy" $OUT/ncu-rmat-n128.txt | head -80
