#!/usr/bin/env bash
# R-MAT 2^21 with its columns renumbered by descending degree (SPBENCH_SORT_COLUMNS) against the plain one: every CSR/COO kernel and cuSPARSE, f64 and f32; ncu of vector-split on both.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH2; mkdir -p $B $O
for f in devrun/bin/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
L="--backend cuda --no-corpus --large 256 --generators rmat,uniform --ops spmv --precisions f64,f32 --formats csr,coo --warmup-ms 20 --time-limit-s 2 --runs 10"
step plain 120 $B/spbench $L --out $O/plain
SPBENCH_SORT_COLUMNS=1 step sorted 120 $B/spbench $L --out $O/sorted
NCU="/usr/local/cuda/bin/ncu --cache-control all --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis"
R="--backend cuda --no-corpus --large 256 --generators rmat --ops spmv --precisions f64 --runs 1 --warmup-ms 1 --batch-ms 0.01 --time-limit-s 1 --algorithms vector-split --formats csr"
SPBENCH_SORT_COLUMNS=1 step ncu-sorted 120 $NCU -k "regex:^spmv_" --launch-count 1 $B/spbench $R --out $O/ncu-sorted
rm -f $O/*/*.svg
cd $OUT && tar czf rH2.tgz rH2 && rm -rf rH2
