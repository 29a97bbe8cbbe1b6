#!/usr/bin/env bash
# Where attention's time goes: a graph without hubs (uniform, 16 per row) beside R-MAT, and ncu on the fused forward.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rB5; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step uniform-fwd 120 $B/spbench --backend cuda --no-corpus --large 147 --generators uniform --ops attention --k 64,128 --precisions f32 --algorithms fused --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/uniform-fwd
step uniform-bwd 120 $B/spbench --backend cuda --no-corpus --large 147 --generators uniform --ops attention --k 64,128 --precisions f32 --algorithms fused --backward --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/uniform-bwd
step ncu-fused 150 /usr/local/cuda/bin/ncu -k regex:attention -c 4 --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 128 --precisions f32 --algorithms fused --backward --runs 1 --warmup-ms 0.1 --batch-ms 0.1 --time-limit-s 1 --out $O/ncu-bench
cd $OUT && tar czf rB5.tgz rB5 && rm -rf rB5
