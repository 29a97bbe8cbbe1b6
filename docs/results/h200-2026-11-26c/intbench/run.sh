#!/usr/bin/env bash
# cuSPARSE's i8 Blocked-ELL SpMM with B column-major: its test, then intbench.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rD2; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-blocked-ell 60 $B/test-magicube --test-threads=1 cusparse_
step intbench 200 $B/intbench $O/intbench --corpus $M
cd $OUT && tar czf rD2.tgz rD2 && rm -rf rD2
