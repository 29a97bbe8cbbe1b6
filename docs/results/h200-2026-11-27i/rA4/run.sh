#!/usr/bin/env bash
# The committed rule (f16 also counts a long walk as skewed): the rule's GPU test and the corpus in three precisions.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rA4; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_auto 60 $B/test-spmv_auto --test-threads=1
step corpus 150 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32,f16 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20 --out $O/corpus
rm -f $O/*/*.svg
cd $OUT && tar czf rA4.tgz rA4 && rm -rf rA4
