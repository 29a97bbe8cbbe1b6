#!/usr/bin/env bash
# fused-tc with pieces sized by the work per multiprocessor (32..256 blocks) against fixed pieces of 32 blocks (spbench-base, HEAD 1d21464): forward and forward + backward, R-MAT 2^20 x 16 with one head and 2^18 x 16 with four, f16, d = 64 and 128; each case checked against the oracle by spbench before timing.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
H=${1%% *}; B=/tmp/bin; O=$OUT/rZ2-h$H${TAG:-}; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for g in "$@"; do
  set -- $g
  S="--backend cuda --no-corpus --large $2 --generators rmat --ops attention --heads $1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
  for bin in ${BINS:-spbench-base spbench}; do
    step $bin-h$1-fwd 150 $B/$bin $S --out $O/$bin-h$1-fwd
    step $bin-h$1-fwd-bwd 150 $B/$bin $S --backward --out $O/$bin-h$1-fwd-bwd
  done
done
rm -f $O/*/*.svg
cd $OUT && tar czf rZ2-h$H${TAG:-}.tgz rZ2-h$H${TAG:-} && rm -rf rZ2-h$H${TAG:-}
