#!/usr/bin/env bash
# Attention backward with long rows and columns split over warps: GPU tests, sanitizers,
# forward+backward timing, and where the fused forward's time goes (ncu); the solver test.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rB4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
CS=/usr/local/cuda/bin/compute-sanitizer
step test-solve 60 $B/test-solve --test-threads 1 --nocapture
step test-attention 120 $B/test-attention --test-threads 2
step memcheck-attention 100 $CS --tool memcheck --error-exitcode 9 $B/test-attention small --test-threads 1
step racecheck-attention 120 $CS --tool racecheck --error-exitcode 9 $B/test-attention small --test-threads 1
step attn-fwd-bwd 150 $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64,128 --precisions f32 --algorithms fused --backward --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/attn-bwd
step ncu-attention 120 /usr/local/cuda/bin/ncu -k regex:attention_fused -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64 --precisions f32 --algorithms fused --runs 1 --warmup-ms 0 --time-limit-s 1 --out $O/ncu-bench
cd $OUT && tar czf rB4.tgz rB4 && rm -rf rB4
