#!/usr/bin/env bash
# Why the unfused pipeline beats fused on a uniform random graph (f32, d = 64, one head): per-kernel time, DRAM bytes, L2 hit rate (ncu).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rW6; mkdir -p $B $O
gunzip -c devrun/bin/spbench.gz > $B/spbench; chmod +x $B/spbench
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="--backend cuda --no-corpus --large 30 --generators uniform --ops attention --k 64 --heads 1 --precisions f32 --warmup-ms 0.01 --time-limit-s 0.05 --runs 1"
M=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__registers_per_thread
for a in fused unfused; do
  step ncu-$a 100 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:"attention|sddmm|spmm|rode|csr" --launch-count 6 --metrics $M $B/spbench $S --algorithms $a --out $O/bench-$a
done
cd $OUT && tar czf rW6.tgz rW6 && rm -rf rW6
