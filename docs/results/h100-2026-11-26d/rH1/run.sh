#!/usr/bin/env bash
# The attention backward's row pass with one gather of each K row (issue 18's backward target):
# conformance of attention on the generators, then forward and forward + backward on the R-MAT
# graph of docs/attention.md, and the previous build's forward + backward in the same call.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
A="--backend cuda --no-corpus --large 147 --generators rmat --ops attention --precisions f32 --algorithms fused --k 64,128 --runs 20"
step conformance-attention 120 $B/conformance --backend cuda --quick --no-corpus --op attention --markdown $O/conformance-attention.md
step forward 150 $B/spbench $A --out $O/forward
step backward 150 $B/spbench $A --backward --out $O/backward
SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base step backward-base 150 $B/spbench-base $A --backward --out $O/backward-base
cd $OUT && tar czf rH1.tgz rH1 && rm -rf rH1
