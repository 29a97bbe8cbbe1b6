#!/usr/bin/env bash
# fused-tc's backward with the pairs copied into A^T's order by their own kernel, the weighted sums' loads ahead, at three register limits in turn (min blocks 1, 6, 8, one per backward): per-kernel times (ncu), R-MAT 2^20 x 16, f16, d = 64 and 128; the corpus graphs forward and backward against the oracle (f32, f16, bf16 side by side); memcheck on the small cases.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for k in 64 128; do
step ncu-$k 120 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 33 --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active $B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k $k --precisions f16 --algorithms fused-tc --backward --runs 3 --warmup-ms 0.01 --time-limit-s 0.01 --out $O/ncu-$k
done
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 280 $B/test-attention every_corpus
step memcheck-small 170 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
rm -f $O/*/*.svg
cd $OUT && tar czf rU2.tgz rU2 && rm -rf rU2
