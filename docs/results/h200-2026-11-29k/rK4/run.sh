#!/usr/bin/env bash
# rK4: the score steps in blocks of 16 entries, as many as a tile needs (spbench-new), against c143b2a (spbench-c143, every step of a tile whatever its entries): short-row graphs where rK3 found `fused` slower than before, and R-MAT 2^20 x 20 at d = 64; the edge-case tests.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rK4; mkdir -p $B $O
for f in devrun/at/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rK4.tgz rK4); }
A="--backend cuda --no-corpus --large 30 --generators uniform,poisson3d --ops attention --precisions f32 --algorithms fused --heads 1 --warmup-ms 10 --time-limit-s 0.4 --runs 5 --k 64,128"
step new-short 35 $B/spbench-new $A --out $O/new-short; pack
step c143-short 35 $B/spbench-c143 $A --out $O/c143-short; pack
step test-attention 150 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan; pack
step new-e20 40 $B/spbench-new --backend cuda --no-corpus --generators rmat --ops attention --algorithms fused --precisions f32 --warmup-ms 20 --time-limit-s 1 --runs 5 --heads 1 --large 147 --k 64 --out $O/new-e20; pack
rm -rf $O
