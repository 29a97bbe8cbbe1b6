#!/usr/bin/env bash
# The committed code (0f19c13): the attention corpus-graph tests beside memcheck and racecheck on the small attention cases; then forward and forward + backward times, R-MAT 2^20 x 16, f16, one head, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rY7; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 280 $B/test-attention every_corpus &
step memcheck-small 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
step racecheck-small 270 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
wait
S="$B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd 110 $S --out $O/fwd
step fwd-bwd-tc 110 $S --backward --out $O/fwd-bwd-tc
rm -f $O/*/*.svg
cd $OUT && tar czf rY7.tgz rY7 && rm -rf rY7
