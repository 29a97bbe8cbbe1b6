#!/usr/bin/env bash
# fused-tc's backward with P and dS also in A^T's order, and the weighted sums' loads one and two blocks ahead (variants 0, 1, 2 in turn, one per backward): edge-case tests; per-kernel times (ncu), R-MAT 2^20 x 16, f16, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for k in 64 128; do
step ncu-$k 120 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 30 --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active $B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k $k --precisions f16 --algorithms fused-tc --backward --runs 3 --warmup-ms 0.01 --time-limit-s 0.01 --out $O/ncu-$k
done
step test-attention 230 $B/test-attention --test-threads=1 attention_meets heads_that an_infinite
rm -f $O/*/*.svg
cd $OUT && tar czf rU1.tgz rU1 && rm -rf rU1
