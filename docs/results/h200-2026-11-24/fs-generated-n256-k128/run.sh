#!/usr/bin/env bash
# FlashSparse and the CSR kernels on the generated matrices at SpMM N=256 and SDDMM K=128 (the
# part of the N=256 / K=128 run that the earlier call's time limit cut).
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
timeout 560 $B/spbench-v1 --backend cuda --no-corpus --large 64 --generators poisson3d,rmat --ops spmm,sddmm --precisions f32,f16,tf32 --n 256 --k 128 --warmup-ms 30 --runs 20 --time-limit-s 1 --out $W/gen > $W/gen.log 2> $W/gen.err; echo rc=$?; tail -2 $W/gen.err
cp $W/gen/results.csv $OUT/results.csv; cp $W/gen/summary.md $OUT/summary.md
