#!/usr/bin/env bash
# fused-tc, three shared-memory stages per one-warp block: GPU tests, d = 64 and 128 on R-MAT 2^20 x 16, ncu at d = 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC5; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --large 118 --precisions f16 --algorithms fused-tc"
step d128 120 $S --k 128 --runs 5 --out $O/d128
step d64 100 $S --k 64 --runs 5 --out $O/d64
step test-attention 200 $B/test-attention --test-threads=1
N="/usr/local/cuda/bin/ncu --kernel-name regex:attention_tc --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
step ncu 150 $N $S --k 128 --runs 1 --out $O/n
cd $OUT && tar czf rC5.tgz rC5 && rm -rf rC5
