#!/usr/bin/env bash
# Per-kernel times of fused-tc's forward and tensor-core backward (ncu, warm caches), R-MAT 2^20 x 16, f16, d = 64 and 128; the corpus graphs forward and backward against the oracle.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rT3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for k in 64 128; do
step ncu-$k 100 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 14 --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes.sum,lts__t_bytes.sum $B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k $k --precisions f16 --algorithms fused-tc --backward --runs 1 --warmup-ms 0.01 --time-limit-s 0.01 --out $O/ncu-$k
done
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 200 $B/test-attention --test-threads=1 every_corpus
rm -f $O/*/*.svg
cd $OUT && tar czf rT3.tgz rT3 && rm -rf rT3
