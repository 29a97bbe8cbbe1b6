#!/usr/bin/env bash
# Integer precisions with widths: i8 storage multiplied whole, i16 as planes with B's high byte taken only when needed (i4, l8-r4 .. l16-r16): GPU tests, conformance, memcheck, intbench.

set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rE3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-magicube_modes 150 $B/test-magicube_modes --test-threads=1
step test-magicube 120 $B/test-magicube --test-threads=1 --skip integer_mma_rates
step conformance-modes 150 $B/conformance --backend cuda --quick --no-corpus --op spmm --precision i4,l8-r4,l12-r4,l16-r4,l16-r8,l16-r16,i8
step memcheck-modes 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-magicube_modes --test-threads=1 values_past new_values every_mode_is_exact_for_every
step intbench 330 $B/intbench $O/intbench --corpus devrun/matrices
cd $OUT && tar czf rE3.tgz rE3 && rm -rf rE3
