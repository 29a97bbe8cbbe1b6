#!/usr/bin/env bash
# rK3: the build of rK2 (bf16 heads wider than 64 columns take the wide sums): the edge-case attention tests and the non-finite rows, and racecheck of the small cases, side by side (both ran out of time in rK2).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rK3; mkdir -p $B $O
xz -dc devrun/bin/test-attention.xz > $B/test-attention; chmod +x $B/test-attention
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { (cd $OUT && tar czf rK3.tgz rK3); }
step test-attention 540 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan &
SPARSE_KERNEL_CACHE_DIR=/tmp/kc2 step racecheck 540 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 1 $B/test-attention small &
wait; pack
rm -rf $O
