#!/usr/bin/env bash
# Integer modes: GPU test, SpMM and SDDMM conformance on the generators and the whole corpus,
# intbench with B spread over each mode's right width.

set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rE4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
M=i4,l8-r4,l12-r4,l16-r4,l16-r8,l16-r16
step test-magicube_modes 100 $B/test-magicube_modes --test-threads=1
step conformance-modes 120 $B/conformance --backend cuda --quick --no-corpus --op spmm,sddmm --precision $M
step conformance-modes-corpus 200 $B/conformance --backend cuda --quick --corpus devrun/matrices --op spmm,sddmm --precision $M
step intbench 230 $B/intbench $O/intbench --corpus devrun/matrices
cd $OUT && tar czf rE4.tgz rE4 && rm -rf rE4
