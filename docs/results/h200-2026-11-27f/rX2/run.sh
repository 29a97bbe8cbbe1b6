#!/usr/bin/env bash
# Build A: rX1's build plus the forward loading the next block's rows of K and V and its bitmaps ahead; build B: A with the weighted sums held to 5 blocks a multiprocessor (__launch_bounds__ minimum). Per-kernel times (ncu), R-MAT 2^20 x 16, f16, one head, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rX2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --precisions f16 --algorithms fused-tc --backward --runs 3 --warmup-ms 0.01 --time-limit-s 0.01"
M="gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active"
for k in 64 128; do
for bin in spbench-A spbench-B; do
step ncu-$bin-$k 150 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 22 --metrics $M $B/$bin $S --k $k --out $O/ncu-$bin-$k
done
done
rm -f $O/*/*.svg
cd $OUT && tar czf rX2.tgz rX2 && rm -rf rX2
