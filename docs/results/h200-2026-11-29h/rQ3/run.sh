#!/usr/bin/env bash
# The committed wide-on-vendor plans (362ac53): the RoDe tests (both auto tests) and the tuning tests.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rQ3; mkdir -p $B $O
for f in devrun/rq/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-rode 150 $B/test-rode --test-threads=1
step test-tuning 120 $B/test-tuning --test-threads=1
cd $OUT && tar czf rQ3.tgz rQ3 && rm -rf rQ3
