#!/usr/bin/env bash
# Magicube SpMM units picked per run (whole vector-rows or cut), column indices prefetched two
# groups ahead, W = 4 kernels capped at 64 registers, SDDMM tiles by place in their vector-row
# and K steps unrolled: the GPU tests, conformance (generators and every dlmc_* matrix, i8 and
# the mixed modes), memcheck, and intbench.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rF5; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
P=i8,i4,l8-r4,l12-r4,l16-r4,l16-r8,l16-r16
step test-magicube 120 $B/test-magicube --test-threads=1
step test-magicube_modes 120 $B/test-magicube_modes --test-threads=1
step conformance 120 $B/conformance --backend cuda --quick --no-corpus --op spmm,sddmm --precision $P
step conformance-dlmc 150 $B/conformance --backend cuda --quick --corpus devrun/dlmc --op spmm,sddmm --precision $P
step memcheck 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-magicube --test-threads=1 spmm_is_exact
step intbench 160 $B/intbench $O/intbench --corpus devrun/matrices
cd $OUT && tar czf rF5.tgz rF5 && rm -rf rF5
