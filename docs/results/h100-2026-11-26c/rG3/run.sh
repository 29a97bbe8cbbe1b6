#!/usr/bin/env bash
# The attention conformance, forward and backward, over the 15 graph and GNN corpus matrices
# (cut off at 150 s in rF7), and memcheck of the 4-bit SDDMM.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/dlmc
B=/tmp/bin; O=$OUT/rG3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step conformance-attention-graphs 420 $B/conformance --backend cuda --quick --corpus devrun/graphs --op attention --markdown $O/conformance-attention-graphs.md
step memcheck-s4-sddmm 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-magicube_modes --test-threads=1 every_sddmm_mode_is_exact_in_slot_order
cd $OUT && tar czf rG3.tgz rG3 && rm -rf rG3
