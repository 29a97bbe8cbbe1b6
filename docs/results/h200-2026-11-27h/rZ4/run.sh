#!/usr/bin/env bash
# fused (CUDA cores) with each tile's 32 dot products summed across the warp at once (a transposed reduction) instead of a butterfly per entry: the edge-case attention tests and the f32 corpus-graph tests; spbench f32 forward, R-MAT 2^20 x 16, d = 64 and 128, against 17b7601 (spbench-base).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rZ4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 230 $B/test-attention --test-threads=4 attention_meets auto_in_f32 an_infinite
SPARSE_CORPUS=devrun/matrices step test-attention-corpus-f32 100 $B/test-attention every_corpus_graph_meets_the_oracle_forward_and_backward_in_f32
for bin in spbench-base spbench; do
  step $bin-fwd 110 $B/$bin --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f32 --algorithms fused --warmup-ms 20 --time-limit-s 1 --runs 5 --out $O/$bin-fwd
done
rm -f $O/*/*.svg
cd $OUT && tar czf rZ4.tgz rZ4 && rm -rf rZ4
