#!/usr/bin/env bash
# racecheck on fused-tc with two warps sharing the scores (d = 128, f16 and bf16), small R-MAT graph.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rS7; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step racecheck-tc 240 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/spbench --backend cuda --no-corpus --large 0.3 --generators rmat --ops attention --k 128 --heads 2 --precisions f16,bf16 --algorithms fused-tc --runs 1 --warmup-ms 0.01 --time-limit-s 0.01 --out $O/racecheck-tc
rm -f $O/*/*.svg
cd $OUT && tar czf rS7.tgz rS7 && rm -rf rS7
