#!/usr/bin/env bash
# f32 attention auto from short rows and columns (final rule): test, and auto's picks against fused and unfused.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rW4; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-auto 150 $B/test-attention --test-threads=1 auto_in_f32
A="$M/delaunay_n15.mtx.gz $M/NotreDame_www.mtx.gz --backend cuda --no-corpus --large 30 --generators uniform,poisson3d --ops attention --k 64 --precisions f32 --algorithms fused,unfused,auto --warmup-ms 10 --time-limit-s 0.4 --runs 5"
step fwd-h1 80 $B/spbench $A --heads 1 --out $O/fwd-h1
step bwd-h1 100 $B/spbench $A --heads 1 --backward --out $O/bwd-h1
rm -f $O/*/*.svg
cd $OUT && tar czf rW4.tgz rW4 && rm -rf rW4
