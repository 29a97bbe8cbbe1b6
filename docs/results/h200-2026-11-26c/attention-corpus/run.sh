#!/usr/bin/env bash
# Attention forward and backward on every graph and GNN corpus matrix, all algorithms and
# precisions (after the corpus manifest was added to the copy).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rD7; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention-corpus 300 $B/test-attention --test-threads=1 every_corpus --nocapture

cd $OUT && tar czf rD7.tgz rD7 && rm -rf rD7
