#!/usr/bin/env bash
# f32 attention auto from the rows: test, then forward and forward+backward of fused, unfused and auto on short-row graphs.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rW3; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-auto 120 $B/test-attention --test-threads=1 auto_in_f32
G=""; for m in delaunay_n15 rgg_n_2_15_s0 PROTEINS_full NotreDame_www wiki-Vote; do G="$G $M/$m.mtx.gz"; done
A="--backend cuda --no-corpus --large 30 --generators uniform,poisson3d --ops attention --k 64,128 --precisions f32 --algorithms fused,unfused,auto --warmup-ms 10 --time-limit-s 0.4 --runs 5"
step bwd-h1 150 $B/spbench $G $A --heads 1 --backward --out $O/bwd-h1
step bwd-h4 150 $B/spbench $G $A --heads 4 --backward --out $O/bwd-h4
step fwd-h4 100 $B/spbench $G $A --heads 4 --out $O/fwd-h4
rm -f $O/*/*.svg
cd $OUT && tar czf rW3.tgz rW3 && rm -rf rW3
