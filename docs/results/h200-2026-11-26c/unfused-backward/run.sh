#!/usr/bin/env bash
# The unfused attention backward after the fix of dbias without a bias: tests and memcheck.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rD5; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 300 $B/test-attention --test-threads=1
step memcheck-attention 150 compute-sanitizer --tool memcheck $B/test-attention --test-threads=1 small
cd $OUT && tar czf rD5.tgz rD5 && rm -rf rD5
