#!/usr/bin/env bash
# fused-tc's tensor-core backward with its weights shifted by powers of two: edge-case tests, forward vs forward+backward timings.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rT2; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 200 $B/test-attention --test-threads=1 attention_meets heads_that an_infinite
S="$B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd 130 $S --out $O/fwd
step fwd-bwd-tc 130 $S --backward --out $O/fwd-bwd-tc
(cd /tmp/kc && for f in *; do /usr/local/cuda/bin/cuobjdump --dump-resource-usage $f 2>/dev/null | grep -A1 "attention_tc"; done) > $O/resources.txt 2>&1
rm -f $O/*/*.svg
cd $OUT && tar czf rT2.tgz rT2 && rm -rf rT2
