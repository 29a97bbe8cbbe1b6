#!/usr/bin/env bash
# The committed kernels on the two generated matrices (Poisson 3D, R-MAT; 64 MB of f32 SpMV
# each), SpMM N = 128: every CUDA CSR kernel and cuSPARSE algorithm (f32, f16), FlashSparse and
# its 16x1 ablation (f16, tf32), one process.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
timeout 400 $B/spbench --backend cuda --no-corpus --large 64 --generators poisson3d,rmat --ops spmm --precisions f32,f16,tf32 --algorithms vector,rode,rode-deterministic,flashsparse,flashsparse-16x1,vendor-default,vendor-alg1,vendor-alg2,vendor-alg3 --n 128 --warmup-ms 30 --runs 20 --time-limit-s 1 --out $W/g > $W/g.log 2> $W/g.err; echo "rc=$?"; tail -2 $W/g.err
cp $W/g/results.csv $OUT/results.csv; cp $W/g/summary.md $OUT/summary.md
