#!/usr/bin/env bash
# rJ2: ncu per kernel of the forward and backward at d = 128 (fused-tc, f16, R-MAT 2^20 x 16, one head): the committed build (spbench-base) and rJ1's variant with slices of 128 columns (spbench).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rJ2; mkdir -p $B $O
for f in devrun/bin/spbench*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rJ2.tgz rJ2); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 128 --precisions f16 --algorithms fused-tc --warmup-ms 1 --time-limit-s 0.1 --runs 1"
M=gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio
step ncu-base 280 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention_tc --launch-count 14 --metrics $M $B/spbench-base $S --backward --out $O/base; pack
step ncu-wide 250 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention_tc --launch-count 14 --metrics $M $B/spbench $S --backward --out $O/wide; pack
rm -rf $O
