#!/usr/bin/env bash
# The attention backward with P and dS side by side (one 8-byte gather per entry in the column
# pass) on top of rH1's one-gather row pass: conformance of attention on the generators, forward
# and forward + backward on the R-MAT graph of docs/attention.md (one head, d = 64 and 128) and
# on a smaller R-MAT graph with four heads of 128 columns.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
A="--backend cuda --no-corpus --generators rmat --ops attention --precisions f32 --algorithms fused --runs 20"
step conformance-attention 120 $B/conformance --backend cuda --quick --no-corpus --op attention --markdown $O/conformance-attention.md
step forward 120 $B/spbench $A --large 147 --k 64,128 --out $O/forward
step backward 120 $B/spbench $A --large 147 --k 64,128 --backward --out $O/backward
step forward-h4 90 $B/spbench $A --large 40 --k 128 --heads 4 --out $O/forward-h4
step backward-h4 90 $B/spbench $A --large 40 --k 128 --heads 4 --backward --out $O/backward-h4
cd $OUT && tar czf rH2.tgz rH2 && rm -rf rH2
