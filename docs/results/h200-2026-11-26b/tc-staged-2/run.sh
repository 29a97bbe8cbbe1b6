#!/usr/bin/env bash
# fused-tc with K and V staged in shared memory: GPU tests, d = 64 and 128 (DVC 2 and 1), ncu at d = 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 200 $B/test-attention --test-threads=1
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --large 118 --k 128 --precisions f16 --algorithms fused-tc"
step d64 100 ${S/--k 128/--k 64} --runs 5 --out $O/d64
step dvc2 120 $S --runs 5 --out $O/dvc2
step dvc1 120 env SPARSE_ATTN_TC_DVC=1 $S --runs 5 --out $O/dvc1
N="/usr/local/cuda/bin/ncu --kernel-name regex:attention_tc --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
step ncu-dvc2 150 $N $S --runs 1 --out $O/n2
cd $OUT && tar czf rC4.tgz rC4 && rm -rf rC4
