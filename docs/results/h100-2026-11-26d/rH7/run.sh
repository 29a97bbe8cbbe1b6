#!/usr/bin/env bash
# The attention backward against the forward on more power-law graphs (issue 18's target: at
# most 2.5x, d = 64 and 128, H = 1 and 4): R-MAT of 5.3M edges with one head, and of 10.6M
# edges with four heads, f32, `fused`, the build of rH6.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH7; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
A="--backend cuda --no-corpus --generators rmat --ops attention --precisions f32 --algorithms fused --k 64,128 --runs 20"
step forward-h1 100 $B/spbench $A --large 40 --out $O/forward-h1
step backward-h1 100 $B/spbench $A --large 40 --backward --out $O/backward-h1
step forward-h4 150 $B/spbench $A --large 80 --heads 4 --out $O/forward-h4
step backward-h4 150 $B/spbench $A --large 80 --heads 4 --backward --out $O/backward-h4
cd $OUT && tar czf rH7.tgz rH7 && rm -rf rH7
