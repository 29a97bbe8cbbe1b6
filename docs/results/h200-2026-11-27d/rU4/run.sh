#!/usr/bin/env bash
# fused-tc's backward as committed (pairs in A^T's order, loads ahead, powers of two by multiplication): edge-case and corpus-graph tests against the oracle, memcheck and racecheck on the small cases; forward and forward+backward times, R-MAT 2^20 x 16, f16, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd 120 $S --out $O/fwd
step fwd-bwd-tc 120 $S --backward --out $O/fwd-bwd-tc
# The edge cases and the corpus graphs side by side (the oracle's work is on the CPU).
step test-attention 230 $B/test-attention --test-threads=1 attention_meets heads_that an_infinite &
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 230 $B/test-attention every_corpus
wait
step memcheck-small 80 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
step racecheck-small 130 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
rm -f $O/*/*.svg
cd $OUT && tar czf rU4.tgz rU4 && rm -rf rU4
