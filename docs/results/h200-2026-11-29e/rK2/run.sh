#!/usr/bin/env bash
# rK2: bf16 heads wider than 64 columns take the wide weighted sums too (working tree on 534d64e): forward + backward, R-MAT 2^20 x 16, one head, d = 128, f16 and bf16; the edge-case attention tests and the non-finite rows; racecheck of the small cases.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rK2; mkdir -p $B $O
for f in devrun/bin/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rK2.tgz rK2); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5 --k 128 --precisions f16,bf16 --backward"
step new 170 $B/spbench $S --out $O/new; pack
step test-attention 200 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan; pack
step racecheck 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 1 $B/test-attention small; pack
rm -rf $O
