#!/usr/bin/env bash
# fused-tc's backward with X's rows copied into shared memory by cp.async one block ahead (the weighted sums) and the next block's rows and bitmaps loaded ahead (the score kernel), against the build before: per-kernel times (ncu), R-MAT 2^20 x 16, f16, one head, d = 64 and 128; the edge-case tests of the new build.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rX1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --precisions f16 --algorithms fused-tc --backward --runs 3 --warmup-ms 0.01 --time-limit-s 0.01"
M="gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active"
for k in 64 128; do
for bin in spbench-base spbench; do
step ncu-$bin-$k 150 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 33 --metrics $M $B/$bin $S --k $k --out $O/ncu-$bin-$k
done
done
step test-attention 280 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite
rm -f $O/*/*.svg
cd $OUT && tar czf rX1.tgz rX1 && rm -rf rX1
