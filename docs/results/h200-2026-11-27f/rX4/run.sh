#!/usr/bin/env bash
# The committed code (rX3's build with ragged runs of X staged through registers): the edge-case attention tests, memcheck and racecheck on the small cases; then forward and forward+backward times, R-MAT 2^20 x 16, f16, one head, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rX4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 230 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite &
step memcheck-small 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
step racecheck-small 250 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
wait
S="$B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd 120 $S --out $O/fwd
step fwd-bwd-tc 120 $S --backward --out $O/fwd-bwd-tc
rm -f $O/*/*.svg
cd $OUT && tar czf rX4.tgz rX4 && rm -rf rX4
