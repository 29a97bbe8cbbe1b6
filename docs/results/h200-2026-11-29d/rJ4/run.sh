#!/usr/bin/env bash
# rJ4: the committed weighted sums (slices of 128 columns where a head is wider than 64, held to 128 registers): the edge-case attention tests and the NaN-row test; forward + backward, R-MAT 2^20 x 16, one head, f16 and bf16 at d = 64 and 128; bf16 at d = 128 with the previous build (spbench-base).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rJ4; mkdir -p $B $O
for f in devrun/bin/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rJ4.tgz rJ4); }
step test-attention 200 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan; pack
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step new-fwd-bwd 150 $B/spbench $S --k 64,128 --precisions f16,bf16 --backward --out $O/new-fwd-bwd; pack
step base-bf16-fwd-bwd 110 $B/spbench-base $S --k 128 --precisions bf16 --backward --out $O/base-bf16-fwd-bwd; pack
rm -rf $O
