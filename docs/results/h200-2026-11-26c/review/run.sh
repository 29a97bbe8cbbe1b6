#!/usr/bin/env bash
# The review mends: the unfused scores column and the Blocked-ELL workspace sized once per shape.

set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rD8; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-blocked-ell 60 $B/test-magicube --test-threads=1 cusparse_
step test-attention 200 $B/test-attention --test-threads=1 --skip every_corpus

cd $OUT && tar czf rD8.tgz rD8 && rm -rf rD8
