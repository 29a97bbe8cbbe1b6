#!/usr/bin/env bash
# The whole attention test binary of the committed auto change (edge cases, corpus graphs, auto, refusals), every test side by side.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rW5; mkdir -p $B $O
for f in devrun/bin/test-attention.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 300 $B/test-attention --test-threads=9
cd $OUT && tar czf rW5.tgz rW5 && rm -rf rW5
