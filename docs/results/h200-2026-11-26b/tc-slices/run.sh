#!/usr/bin/env bash
# fused-tc at d = 128: one slice of 128 V columns per warp (DVC 2) against two neighbouring warps of 64 (DVC 1); ncu of both.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --large 118 --k 128 --precisions f16 --algorithms fused-tc"
step dvc2 120 $S --runs 5 --out $O/dvc2
step dvc1 120 env SPARSE_ATTN_TC_DVC=1 $S --runs 5 --out $O/dvc1
N="/usr/local/cuda/bin/ncu --kernel-name regex:attention_tc --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
step ncu-dvc2 150 $N $S --runs 1 --out $O/n2
step ncu-dvc1 150 env SPARSE_ATTN_TC_DVC=1 $N $S --runs 1 --out $O/n1
cd $OUT && tar czf rC3.tgz rC3 && rm -rf rC3
