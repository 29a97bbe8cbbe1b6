#!/usr/bin/env bash
# Device run 2: the SpMV work on the GPU. Correctness first (GPU tests, conformance), then the
# benchmark (large generated matrices, then the corpus). Each step has its own time limit.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/r2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for t in spmv_auto spmv_formats tilespmv; do step test-$t 30 $B/test-$t --test-threads 4; done
step conf-cuda-gen 30 $B/conformance --backend cuda --quick --no-corpus --op spmv
step conf-cuda-corpus 50 $B/conformance --backend cuda --quick --corpus devrun/matrices --op spmv
step conf-cusparse 15 $B/conformance --backend cusparse --quick --no-corpus --op spmv --precision f64,f32
step bench-large 65 $B/spbench --backend cuda --formats csr,coo --no-corpus --large 256 --generators poisson3d,rmat,uniform,poisson2d --ops spmv --precisions f32,f64 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-large
step bench-corpus 40 $B/spbench --backend cuda --corpus devrun/matrices --large 0 --ops spmv --precisions f32,f64 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-corpus
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
