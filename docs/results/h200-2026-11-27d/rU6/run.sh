#!/usr/bin/env bash
# fused-tc's forward with __launch_bounds__(128, 1) (spbench-mb1: no spills, more registers) against the committed build (spbench), in turn; R-MAT 2^20 x 16, f16, d = 64 and 128; edge-case tests of the mb1 build.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU6; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
for i in 1 2; do
step fwd-base-$i 100 $B/spbench $S --out $O/fwd-base-$i
step fwd-mb1-$i 100 $B/spbench-mb1 $S --out $O/fwd-mb1-$i
done
step test-attention-mb1 220 $B/test-attention-mb1 --test-threads=1 attention_meets heads_that an_infinite
rm -f $O/*/*.svg
cd $OUT && tar czf rU6.tgz rU6 && rm -rf rU6
