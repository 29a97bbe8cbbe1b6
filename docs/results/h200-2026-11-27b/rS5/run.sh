#!/usr/bin/env bash
# The final auto rules: SpMV auto on the corpus (f16) and R-MAT, attention auto at wide heads; tests and memcheck.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rS5; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_auto 60 $B/test-spmv_auto --test-threads=1
step test-attention-auto 120 $B/test-attention --test-threads=1 auto_in_f32
step memcheck-attention-auto 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 auto_in_f32
step spmv-corpus-f16 120 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f16 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20 --out $O/spmv-corpus-f16
step spmv-rmat 150 $B/spbench --backend cuda --no-corpus --large 256 --generators rmat --ops spmv --precisions f64,f32,f16 --formats csr,coo --warmup-ms 20 --time-limit-s 2 --runs 10 --out $O/spmv-rmat
step attention-auto 150 $B/spbench --backend cuda --no-corpus --large 8 --generators rmat --ops attention --k 256,512 --precisions f32 --algorithms auto,fused,unfused --warmup-ms 20 --time-limit-s 1 --runs 10 --out $O/attention-auto
rm -f $O/*/*.svg
cd $OUT && tar czf rS5.tgz rS5 && rm -rf rS5
