#!/usr/bin/env bash
# fused-tc with two warps sharing the scores at d = 65..128: A/B (SPARSE_ATTN_TC_NOSPLIT, a switch of this build only), tests, sanitizers.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rS6; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step racecheck 100 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
step memcheck 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
S="$B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 2 --runs 10"
step e16-split 110 $S --out $O/e16-split
SPARSE_ATTN_TC_NOSPLIT=1 step e16-nosplit 110 $S --out $O/e16-nosplit
step test-attention 160 $B/test-attention --test-threads=1 attention_meets auto_in heads_that an_infinite
rm -f $O/*/*.svg
cd $OUT && tar czf rS6.tgz rS6 && rm -rf rS6
