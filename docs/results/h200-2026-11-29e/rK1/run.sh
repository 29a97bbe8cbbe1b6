#!/usr/bin/env bash
# rK1: the committed build (HEAD 534d64e) against an experiment build (the backward's score kernel held to 128 registers at d = 65..128; bf16 heads wider than 64 columns take the wide sums): forward + backward, R-MAT 2^20 x 16, one head, d = 128, f16 and bf16; then memcheck and racecheck of the committed build's small attention cases (d up to 130, the wide sums included).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rK1; mkdir -p $B $O
for f in devrun/bin/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rK1.tgz rK1); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5 --k 128 --precisions f16,bf16 --backward"
step committed 170 $B/spbench $S --out $O/committed; pack
step exp 170 $B/spbench-exp $S --out $O/exp; pack
step memcheck 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-attention small; pack
step racecheck 120 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 1 $B/test-attention small; pack
rm -rf $O
