#!/usr/bin/env bash
# rM3's binaries: SpMV conformance over the generators and the other four corpus matrices.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rM4; M=/tmp/big4; mkdir -p $B $O; xz -dc devrun/cx2/big4.tar.xz | tar -C /tmp -xf -
xz -dc devrun/rm/conformance.xz > $B/conformance; chmod +x $B/conformance
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step conformance-spmv 300 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
cd $OUT && tar czf rM4.tgz rM4 && rm -rf rM4
