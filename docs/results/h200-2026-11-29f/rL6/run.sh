#!/usr/bin/env bash
# SpMM (N = 32, 128) and SDDMM (K = 32) on large generated matrices of several kinds (9b600d7): every CUDA kernel, `auto` and cuSPARSE, f32 and f64.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL6; mkdir -p $B $O
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for g in poisson3d block-poisson3d poisson2d uniform rmat; do
  step spmm-$g 150 $B/spbench --backend cuda --no-corpus --large 64 --generators $g --ops spmm,sddmm --n 32,128 --k 32 --precisions f32,f64 --warmup-ms 20 --time-limit-s 1 --runs 5 --out $O/spmm-$g
done
rm -f $O/*/*.svg
cd $OUT && tar czf rL6.tgz rL6 && rm -rf rL6
