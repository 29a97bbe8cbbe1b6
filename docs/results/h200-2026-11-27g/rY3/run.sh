#!/usr/bin/env bash
# The weighted sums' weights loaded under a predicate from an offset of the row's first weight, and the non-finite check of X's rows by packed multiply-adds: the edge-case attention tests; per-kernel times (ncu) of this build and of the previous one (spbench-base, the build of 3cc3406), R-MAT 2^20 x 16, one head, d = 64, f16 and bf16.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rY3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 250 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --algorithms fused-tc --backward --runs 3 --warmup-ms 0.01 --time-limit-s 0.01 --k 64"
M="gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active"
for p in f16 bf16; do
for bin in spbench spbench-base; do
step ncu-$bin-$p 90 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 22 --metrics $M $B/$bin $S --precisions $p --out $O/ncu-$bin-$p
done
done
rm -f $O/*/*.svg
cd $OUT && tar czf rY3.tgz rY3 && rm -rf rY3
