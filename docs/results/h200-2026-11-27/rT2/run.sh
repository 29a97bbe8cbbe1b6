#!/usr/bin/env bash
# fused-tc with the cheaper non-finite test, the rescale skipped where no maximum moved, and __expf:
# GPU tests, attention conformance in f16 and bf16 on the generators, R-MAT 2^20 x 16 and x 20.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rT2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 200 $B/test-attention --test-threads=1
step conformance-attention 120 $B/conformance --backend cuda --quick --no-corpus --op attention --precision f16,bf16 --markdown $O/conformance-attention.md
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --runs 10 --precisions f16 --algorithms fused-tc"
step e16 130 $S --large 118 --k 64,128 --out $O/e16
step e20-d128 100 $S --large 147 --k 128 --out $O/e20-d128
rm -f $O/*/*.svg
cd $OUT && tar czf rT2.tgz rT2 && rm -rf rT2
