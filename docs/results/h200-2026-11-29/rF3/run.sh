#!/usr/bin/env bash
# rF3: ncu over the committed build's forward and backward (fused-tc, f16, d = 64, R-MAT 2^20 x 16, one head): time, L2 and DRAM throughput, L2 hit rate, issue activity, per kernel.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rF3; mkdir -p $B $O
for f in devrun/bin/spbench.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rF3.tgz rF3); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 3"
M=gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
step ncu-64 400 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention_tc --launch-count 11 --metrics $M $B/spbench $S --backward --out $O/ncu-64; pack
rm -rf $O
