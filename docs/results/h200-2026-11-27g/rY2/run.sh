#!/usr/bin/env bash
# Where the weighted sums spend their time: ncu sections (speed of light, memory, warp states, scheduler, occupancy) for the forward (attention_tc) and the two weighted-sum kernels of rY1's build (dQ alone, dK and dV together), R-MAT 2^20 x 16, f16, one head, d = 64.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rY2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --precisions f16 --algorithms fused-tc --backward --runs 1 --warmup-ms 0.01 --time-limit-s 0.01 --k 64"
step ncu-sections 200 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k "regex:^attention_tc(_gather)?$" --launch-count 3 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats $B/spbench $S --out $O/spbench
rm -f $O/*/*.svg
cd $OUT && tar czf rY2.tgz rY2 && rm -rf rY2
