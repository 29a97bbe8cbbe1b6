#!/usr/bin/env bash
# rY3's build: the attention corpus-graph tests beside memcheck on the small attention cases and on the RoDe tests (whose tiles copy partial chunks by cp.async); then forward and forward + backward times, R-MAT 2^20 x 16, f16, one head, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rY4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 280 $B/test-attention every_corpus &
step memcheck-small 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
step memcheck-rode 180 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-rode --test-threads=1 rode_spmm_and_sddmm
wait
S="$B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd 120 $S --out $O/fwd
step fwd-bwd-tc 120 $S --backward --out $O/fwd-bwd-tc
rm -f $O/*/*.svg
cd $OUT && tar czf rY4.tgz rY4 && rm -rf rY4
