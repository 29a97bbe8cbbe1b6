#!/usr/bin/env bash
# fused-tc in bf16 with pieces sized by the work (8603d0a, spbench) against 1d21464 (spbench-base): forward and backward, R-MAT 2^20 x 16, one head, d = 64 and 128 (each case checked against the oracle before timing).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rZ5; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for bin in spbench-base spbench; do
  step $bin-fwd-bwd 130 $B/$bin --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions bf16 --algorithms fused-tc --backward --warmup-ms 20 --time-limit-s 1 --runs 5 --out $O/$bin-fwd-bwd
done
rm -f $O/*/*.svg
cd $OUT && tar czf rZ5.tgz rZ5 && rm -rf rZ5
