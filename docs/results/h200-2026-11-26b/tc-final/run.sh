#!/usr/bin/env bash
# fused-tc (fragments loaded straight into registers): GPU tests, benchmark (R-MAT 2^20 x 16 and x 20; f16, bf16; 1 and 4 heads), ncu at d = 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC7; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 150 $B/test-attention --test-threads=1
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --runs 5 --algorithms fused-tc"
step e16-d128 90 $S --large 118 --k 128 --precisions f16 --out $O/e16-d128
step e16-d64 70 $S --large 118 --k 64 --precisions f16 --out $O/e16-d64
step e20-f16 130 $S --large 147 --k 64,128 --precisions f16 --out $O/e20-f16
step e20-bf16 70 $S --large 147 --k 64 --precisions bf16 --out $O/e20-bf16
step e20-h4 80 $S --large 147 --k 64 --heads 4 --precisions f16 --out $O/e20-h4
N="/usr/local/cuda/bin/ncu --kernel-name regex:attention_tc --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
step ncu-d128 100 $N $S --large 118 --k 128 --precisions f16 --out $O/n
cd $OUT && tar czf rC7.tgz rC7 && rm -rf rC7
