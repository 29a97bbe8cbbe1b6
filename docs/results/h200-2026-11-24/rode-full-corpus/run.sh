#!/usr/bin/env bash
# The whole corpus and two generated matrices, f32 SpMM N=32,128 and SDDMM K=32: our CUDA
# kernels against every cuSPARSE algorithm, for the `auto` rule and the RoDe targets.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
timeout 570 $B/spbench-v1 --backend cuda --corpus devrun/corpus --large 128 --generators poisson3d,rmat --ops spmm,sddmm --precisions f32 --n 32,128 --k 32 --warmup-ms 30 --runs 20 --time-limit-s 1 --out $W/full > $W/full.log 2> $W/full.err; echo rc=$?; tail -2 $W/full.err
cp $W/full/results.csv $OUT/results.csv; cp $W/full/summary.md $OUT/summary.md
