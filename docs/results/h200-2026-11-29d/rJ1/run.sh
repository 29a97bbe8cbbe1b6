#!/usr/bin/env bash
# rJ1: the backward's weighted sums taking slices of 128 columns where a head is wider than 64 (spbench) against the committed build (spbench-base): forward + backward, R-MAT 2^20 x 16, one head, f16, d = 64 and 128; the forward alone; the edge-case attention tests and the NaN-row test.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rJ1; mkdir -p $B $O
for f in devrun/bin/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rJ1.tgz rJ1); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step new-fwd-bwd 130 $B/spbench $S --backward --out $O/new-fwd-bwd; pack
step base-fwd-bwd 130 $B/spbench-base $S --backward --out $O/base-fwd-bwd; pack
step new-fwd 100 $B/spbench $S --out $O/new-fwd; pack
step test-attention 200 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan; pack
rm -rf $O
