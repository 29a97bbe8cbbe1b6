#!/usr/bin/env bash
# Magicube SpMM/SDDMM work order and splitting experiments: intbench under each setting.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rF3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-magicube 120 $B/test-magicube --test-threads 1
step fill16 160 $B/intbench $O/fill16 --corpus devrun/matrices
step fill4 150 env SPARSE_MC_FILL=4 $B/intbench $O/fill4 --corpus devrun/matrices
cd $OUT && tar czf rF3.tgz rF3 && rm -rf rF3
