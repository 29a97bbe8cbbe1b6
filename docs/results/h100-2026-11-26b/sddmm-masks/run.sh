#!/usr/bin/env bash
# The Magicube SDDMM with its row masks loaded before the dot products: the GPU tests, SDDMM
# conformance (generators and every dlmc_* matrix, i8 and the mixed modes), and intbench.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rF6; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
P=i8,i4,l8-r4,l12-r4,l16-r4,l16-r8,l16-r16
step test-magicube 120 $B/test-magicube --test-threads=1
step test-magicube_modes 120 $B/test-magicube_modes --test-threads=1
step conformance 120 $B/conformance --backend cuda --quick --no-corpus --op sddmm --precision $P
step conformance-dlmc 150 $B/conformance --backend cuda --quick --corpus devrun/dlmc --op sddmm --precision $P
step intbench 160 $B/intbench $O/intbench --corpus devrun/matrices
cd $OUT && tar czf rF6.tgz rF6 && rm -rf rF6
