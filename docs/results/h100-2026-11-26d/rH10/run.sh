#!/usr/bin/env bash
# The attention backward's entry loops unrolled 8 deep instead of 4: the row pass (V1) or the
# column pass (V2), against the build of rH9 (base) in the same call; R-MAT of 5.3M edges, f32,
# `fused`, d = 128, one and four heads.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH10; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
A="--backend cuda --no-corpus --large 40 --generators rmat --ops attention --precisions f32 --algorithms fused --k 128 --runs 20"
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base
step forward-h1 60 $B/spbench-base $A --out $O/forward-h1
step forward-h4 90 $B/spbench-base $A --heads 4 --out $O/forward-h4
for v in base V1 V2; do
  export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-$v
  step backward-h1-$v 60 $B/spbench-$v $A --backward --out $O/backward-h1-$v
  step backward-h4-$v 90 $B/spbench-$v $A --heads 4 --backward --out $O/backward-h4-$v
done
cd $OUT && tar czf rH10.tgz rH10 && rm -rf rH10
