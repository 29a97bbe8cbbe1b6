#!/usr/bin/env bash
# fused-tc with pieces of 32..512 blocks sized by the work per multiprocessor (heads counted): the corpus-graph attention tests; spbench forward and forward + backward, R-MAT 2^20 x 16 with one head and 2^18 x 16 with four, f16, d = 64 and 128 (each case checked against the oracle before timing).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rZ3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 170 $B/test-attention every_corpus
for g in "1 118" "4 30"; do
  set -- $g
  S="$B/spbench --backend cuda --no-corpus --large $2 --generators rmat --ops attention --heads $1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
  step h$1-fwd 120 $S --out $O/h$1-fwd
  step h$1-fwd-bwd 120 $S --backward --out $O/h$1-fwd-bwd
done
rm -f $O/*/*.svg
cd $OUT && tar czf rZ3.tgz rZ3 && rm -rf rZ3
