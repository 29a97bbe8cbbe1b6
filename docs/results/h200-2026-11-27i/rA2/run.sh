#!/usr/bin/env bash
# Grouped loads only where whole warps walk a row (vector<32>, split segments), loads clamped to the row: tests, conformance, corpus and large set against the previous kernel, groups of 1, 2, 4, 8.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rA2; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
C="--backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32 --warmup-ms 20 --time-limit-s 1 --runs 20"
L="--backend cuda --no-corpus --large 256 --ops spmv --precisions f64,f32 --formats csr,coo --warmup-ms 20 --time-limit-s 2 --runs 10"
step test-spmv_formats 120 $B/test-spmv_formats --test-threads=1
step test-spmv_auto 60 $B/test-spmv_auto --test-threads=1
step conformance-spmv 120 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step corpus-base 100 $B/spbench-base $C --formats csr,coo --out $O/corpus-base
step corpus-g4 100 $B/spbench $C --formats csr,coo --out $O/corpus-g4
for g in 1 2 8; do
  SPARSE_EXPERIMENT_DEFINES=-DLONG_ROW_GROUP=$g step corpus-g$g 60 $B/spbench $C --formats csr --algorithms scalar,vector,vector-split --out $O/corpus-g$g
done
step large-base 70 $B/spbench-base $L --out $O/large-base
step large-g4 70 $B/spbench $L --out $O/large-g4
rm -f $O/*/*.svg
cd $OUT && tar czf rA2.tgz rA2 && rm -rf rA2
