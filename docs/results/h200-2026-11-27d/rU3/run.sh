#!/usr/bin/env bash
# fused-tc's weighted sums: ldexpf (0), powers of two by multiplication (1), and 128 columns a warp (2), one per backward in turn: per-kernel times (ncu), R-MAT 2^20 x 16, f16, d = 64 and 128; warp stall reasons of variant 1.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --precisions f16 --algorithms fused-tc --backward --runs 3 --warmup-ms 0.01 --time-limit-s 0.01"
for k in 64 128; do
step ncu-$k 120 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 33 --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active $B/spbench $S --k $k --out $O/ncu-$k
done
SPARSE_TC_VARIANT=1 step stalls-64 120 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:^attention_tc_gather$ --launch-count 2 --section WarpStateStats --section SchedulerStats --section Occupancy --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis $B/spbench $S --k 64 --out $O/stalls-64
rm -f $O/*/*.svg
cd $OUT && tar czf rU3.tgz rU3 && rm -rf rU3
