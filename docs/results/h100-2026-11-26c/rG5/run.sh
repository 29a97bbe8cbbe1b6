#!/usr/bin/env bash
# The conformance suite on the generators after the all-negative-scores variant for attention
# was added (which moves every generated case to another combination): attention first, then
# every operation.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rG5; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step conformance-attention 120 $B/conformance --backend cuda --quick --no-corpus --op attention --markdown $O/conformance-attention.md
step conformance-all 360 $B/conformance --backend cuda --quick --no-corpus --markdown $O/conformance-all.md
cd $OUT && tar czf rG5.tgz rG5 && rm -rf rG5
