#!/usr/bin/env bash
# SpMV auto's latency rule and the Blocked-ELL i8 baseline: tests, conformance, corpus SpMV, intbench.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rD1; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-blocked-ell 60 $B/test-magicube --test-threads=1 cusparse_
step test-spmv_auto 60 $B/test-spmv_auto --test-threads=1
step conformance-spmv 150 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32
step spmv-corpus 240 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20 --out $O/spmv-corpus
step intbench 150 $B/intbench $O/intbench --corpus $M
cd $OUT && tar czf rD1.tgz rD1 && rm -rf rD1
