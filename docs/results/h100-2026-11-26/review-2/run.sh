#!/usr/bin/env bash
# After the second review: the Magicube plans share the SpMM run prologue (spmm_operands).

set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rE8; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-magicube_modes 100 $B/test-magicube_modes --test-threads=1
step test-magicube 150 $B/test-magicube --test-threads=1
step memcheck-f32-i8 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-magicube --test-threads=1 f32_via_i8 new_values
cd $OUT && tar czf rE8.tgz rE8 && rm -rf rE8
