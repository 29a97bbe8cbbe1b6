#!/usr/bin/env bash
# The final fused-tc: corpus conformance (f16, bf16), memcheck and racecheck, 4 heads at d = 64.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC8; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step conformance-attention 90 $B/conformance --backend cuda --quick --corpus $M --op attention --precision f16,bf16
step memcheck 60 compute-sanitizer --tool memcheck $B/test-attention --test-threads=1 small
step racecheck 60 compute-sanitizer --tool racecheck $B/test-attention --test-threads=1 small
step e20-h4 170 $B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --runs 5 --algorithms fused-tc --large 147 --k 64 --heads 4 --precisions f16 --out $O/e20-h4
cd $OUT && tar czf rC8.tgz rC8 && rm -rf rC8
