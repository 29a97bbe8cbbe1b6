#!/usr/bin/env bash
# The 4-bit path (magicube-s4), second call: the SDDMM test with K past 256, conformance of i4
# and l8-r4 over every dlmc_* layer, memcheck of the s4 SpMM and SDDMM, the attention
# conformance on the generators (the no-rows backward fix), and intbench.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/dlmc
B=/tmp/bin; O=$OUT/rG2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-magicube_modes 120 $B/test-magicube_modes --test-threads=1
step conformance-s4-dlmc 150 $B/conformance --backend cuda --quick --corpus devrun/dlmc --op spmm,sddmm --precision i4,l8-r4 --markdown $O/conformance-s4-dlmc.md
step memcheck-s4 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-magicube_modes --test-threads=1 values_past_a_mode_width_are_still_exact
step conformance-attention 60 $B/conformance --backend cuda --quick --no-corpus --op attention --markdown $O/conformance-attention.md
step intbench 200 $B/intbench $O/intbench --corpus devrun/dlmc
cd $OUT && tar czf rG2.tgz rG2 && rm -rf rG2
