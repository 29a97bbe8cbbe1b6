#!/usr/bin/env bash
# The committed code (0f19c13), 4 heads: forward and forward + backward times, R-MAT 2^18 x 16 (as h200-2026-11-27d's rU5), f16, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rY8; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --large 30 --generators rmat --ops attention --heads 4 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd 150 $S --out $O/fwd
step fwd-bwd-tc 150 $S --backward --out $O/fwd-bwd-tc
rm -f $O/*/*.svg
cd $OUT && tar czf rY8.tgz rY8 && rm -rf rY8
