#!/usr/bin/env bash
# The 4-bit path (magicube-s4) and the shared SpMM code after its generalization to 4 bits:
# the GPU tests, conformance of i4 and l8-r4 (both Magicube algorithms) on the generators, and
# the attention edge cases after the no-rows backward fix.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/dlmc
B=/tmp/bin; O=$OUT/rG1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-magicube_modes 240 $B/test-magicube_modes --test-threads=1
step test-magicube 60 $B/test-magicube --test-threads=1
step conformance-s4 120 $B/conformance --backend cuda --quick --no-corpus --op spmm,sddmm --precision i4,l8-r4 --markdown $O/conformance-s4.md
step test-attention-edges 100 $B/test-attention --test-threads=1 attention_meets_the_oracle_on_every_edge_case
cd $OUT && tar czf rG1.tgz rG1 && rm -rf rG1
