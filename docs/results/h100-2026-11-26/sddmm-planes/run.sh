#!/usr/bin/env bash
# The SDDMM of 16-bit storage (X and Y as 8-bit planes) and the i8 SDDMM after its refactor.

set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rE6; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
M=i4,l8-r4,l12-r4,l16-r4,l16-r8,l16-r16
step test-magicube_modes 120 $B/test-magicube_modes --test-threads=1
step test-magicube 120 $B/test-magicube --test-threads=1
step conformance-sddmm 120 $B/conformance --backend cuda --quick --no-corpus --op sddmm --precision $M,i8
step conformance-sddmm-corpus 200 $B/conformance --backend cuda --quick --corpus devrun/matrices --op sddmm --precision $M
step memcheck-sddmm 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-magicube_modes --test-threads=1 every_sddmm_mode
cd $OUT && tar czf rE6.tgz rE6 && rm -rf rE6
