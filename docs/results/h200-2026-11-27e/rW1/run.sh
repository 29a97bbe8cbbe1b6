#!/usr/bin/env bash
# SpMV auto rule: cuSPARSE's CSR SpMV for large skewed f64, scalar for large short-row matrices. Tests, conformance, corpus and an R-MAT size sweep.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rW1; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_auto 90 $B/test-spmv_auto --test-threads=1
step conformance-spmv 200 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step spmv-corpus 200 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32,f16 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20 --out $O/spmv-corpus
for mb in 12 32 96 256 600; do
  step rmat-$mb 150 $B/spbench --backend cuda --formats csr,coo --no-corpus --large $mb --generators rmat --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/rmat-$mb
done
rm -f $O/*/*.svg
cd $OUT && tar czf rW1.tgz rW1 && rm -rf rW1
