#!/usr/bin/env bash
# fused-tc's tensor-core backward: tests against the oracle, then forward vs forward+backward timings (TC and, through SPARSE_AB_CC_BWD, a switch of this build only, the CUDA-core backward).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rT1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 170 $B/test-attention --test-threads=1 attention_meets heads_that an_infinite
S="$B/spbench --backend cuda --no-corpus --large 118 --generators rmat --ops attention --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd 80 $S --out $O/fwd
step fwd-bwd-tc 80 $S --backward --out $O/fwd-bwd-tc
SPARSE_AB_CC_BWD=1 step fwd-bwd-cc 100 $S --backward --out $O/fwd-bwd-cc
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 120 $B/test-attention --test-threads=1 every_corpus
(cd /tmp/kc && for f in *; do /usr/local/cuda/bin/cuobjdump --dump-resource-usage $f 2>/dev/null | grep -A1 "attention_tc"; done) > $O/resources.txt 2>&1
rm -f $O/*/*.svg
cd $OUT && tar czf rT1.tgz rT1 && rm -rf rT1
