#!/usr/bin/env bash
# rF4: ncu sections (warp states, memory workload, scheduler) of the committed build's weighted sum and score kernel (fused-tc backward, f16, d = 64, R-MAT 2^20 x 16, one head).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rF4; mkdir -p $B $O
for f in devrun/bin/spbench.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rF4.tgz rF4); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 3"
M=gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
X="--cache-control none --clock-control none --launch-count 1 --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats"
step ncu-gather 200 /usr/local/cuda/bin/ncu $X -k attention_tc_gather $B/spbench $S --backward --out $O/g; pack
step ncu-scores 200 /usr/local/cuda/bin/ncu $X -k attention_tc_grad_scores $B/spbench $S --backward --out $O/s; pack
rm -rf $O
