#!/usr/bin/env bash
# fused-tc instruction cuts A/B, through a switch of that build only (SPARSE_TC_V, passed to NVRTC as
# -DTC_V): 0 (before), 1 (one add per word for the non-finite test, the rescale of the accumulators
# skipped when no maximum of the warp moved), 2 (1 with __expf for expf).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rT1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
SPARSE_TC_V=2 step test-attention-v2 150 $B/test-attention --test-threads=1
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --runs 10 --large 118 --k 64,128"
for v in 0 1 2; do SPARSE_TC_V=$v step e16-v$v 110 $S --precisions f16 --algorithms fused-tc --out $O/e16-v$v; done
step e16-f32 110 $S --precisions f32 --algorithms fused --out $O/e16-f32
rm -f $O/*/*.svg
cd $OUT && tar czf rT1.tgz rT1 && rm -rf rT1
