#!/usr/bin/env bash
# fused-tc, three shared-memory stages per one-warp block: GPU tests, benchmark (R-MAT 2^20 x 16, d = 128 and 64), corpus conformance, memcheck and racecheck.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC6; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 150 $B/test-attention --test-threads=1
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --large 118 --precisions f16 --algorithms fused-tc"
step d128 100 $S --k 128 --runs 5 --out $O/d128
step d64 80 $S --k 64 --runs 5 --out $O/d64
step conformance-attention 90 $B/conformance --backend cuda --quick --corpus $M --op attention --precision f16,bf16
step memcheck 90 compute-sanitizer --tool memcheck $B/test-attention --test-threads=1 small
step racecheck 90 compute-sanitizer --tool racecheck $B/test-attention --test-threads=1 small
cd $OUT && tar czf rC6.tgz rC6 && rm -rf rC6
