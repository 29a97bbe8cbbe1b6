#!/usr/bin/env bash
# Build A (the committed code): the attention tests against the oracle (edge cases, corpus graphs), memcheck and racecheck on the small cases; the RoDe and FlashSparse tests (their cp.async helpers moved into the prelude).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rX3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for t in rode flashsparse; do step test-$t 60 $B/test-$t --test-threads 4; done
step test-attention 230 $B/test-attention --test-threads=2 attention_meets heads_that an_infinite &
SPARSE_CORPUS=devrun/matrices step test-attention-corpus 230 $B/test-attention every_corpus
wait
step memcheck-small 80 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
step racecheck-small 140 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
cd $OUT && tar czf rX3.tgz rX3 && rm -rf rX3
