#!/usr/bin/env bash
# vector-split in one launch: tests, conformance, memcheck, corpus SpMV against cuSPARSE.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rS1; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_formats 150 $B/test-spmv_formats --test-threads=1
step test-spmv_auto 60 $B/test-spmv_auto --test-threads=1
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step conformance-spmv 200 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step spmv-corpus 200 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20 --out $O/spmv-corpus
step memcheck-split 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-spmv_formats --test-threads=1 csr_kernels
rm -f $O/*/*.svg
cd $OUT && tar czf rS1.tgz rS1 && rm -rf rS1
