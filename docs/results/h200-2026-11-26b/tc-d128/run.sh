#!/usr/bin/env bash
# Tensor-core fused attention: d = 128, bf16, 4 heads, the 16-edge-per-node R-MAT graph, ncu.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --runs 5 --warmup-ms 20 --time-limit-s 2"
step e20-tc $((110)) $S --large 147 --k 128 --precisions f16,bf16 --algorithms fused-tc --out $O/e20-tc
step e16-f32 $((90)) $S --large 118 --k 64,128 --precisions f32 --algorithms fused --out $O/e16-f32
step e16-tc $((90)) $S --large 118 --k 64,128 --precisions f16 --algorithms fused-tc --out $O/e16-tc
step e20-h4 $((80)) $S --large 147 --k 64 --heads 4 --precisions f16 --algorithms fused-tc --out $O/e20-h4
step ncu $((120)) /usr/local/cuda/bin/ncu --kernel-name regex:attention_tc --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats $S --large 118 --k 128 --precisions f16 --algorithms fused-tc --runs 1 --out $O/ncu-run
cd $OUT && tar czf rC2.tgz rC2 && rm -rf rC2
