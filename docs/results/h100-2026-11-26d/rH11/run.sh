#!/usr/bin/env bash
# The attention backward's row pass unrolled 8 deep for heads of up to 128 columns (rH10's V1):
# attention conformance on the generators; forward and backward at d = 64 and 128 with one head
# and at d = 128 with four, R-MAT of 5.3M edges, f32, `fused`, against the build of rH9 (base).
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH11; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
step conformance-attention 120 $B/conformance --backend cuda --quick --no-corpus --op attention --markdown $O/conformance-attention.md
A="--backend cuda --no-corpus --large 40 --generators rmat --ops attention --precisions f32 --algorithms fused --runs 20"
step forward-h1 60 $B/spbench $A --k 64,128 --out $O/forward-h1
step forward-h4 90 $B/spbench $A --k 128 --heads 4 --out $O/forward-h4
step backward-h1 60 $B/spbench $A --k 64,128 --backward --out $O/backward-h1
step backward-h4 90 $B/spbench $A --k 128 --heads 4 --backward --out $O/backward-h4
SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base step backward-h1-base 60 $B/spbench-base $A --k 64,128 --backward --out $O/backward-h1-base
cd $OUT && tar czf rH11.tgz rH11 && rm -rf rH11
