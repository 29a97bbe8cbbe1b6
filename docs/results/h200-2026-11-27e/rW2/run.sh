#!/usr/bin/env bash
# SpMV auto test on the committed rule; attention forward on every corpus graph and three generated kinds, fused / fused-tc / unfused, for an auto rule from degree statistics.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rW2; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_auto 90 $B/test-spmv_auto --test-threads=1
G=""; for m in karate Erdos971 G51 bcspwr10 wiki-Vote delaunay_n15 astro-ph rgg_n_2_15_s0 facebook_MIT8 NotreDame_www citeseer cora PROTEINS_full musae_facebook musae_github; do G="$G $M/$m.mtx.gz"; done
A="--backend cuda --no-corpus --large 30 --generators rmat,uniform,poisson3d --ops attention --k 64,128 --precisions f32,f16 --algorithms fused,fused-tc,unfused --warmup-ms 10 --time-limit-s 0.5 --runs 5"
step attn-h1 200 $B/spbench $G $A --heads 1 --out $O/attn-h1
step attn-h4 200 $B/spbench $G $A --heads 4 --out $O/attn-h4
rm -f $O/*/*.svg
cd $OUT && tar czf rW2.tgz rW2 && rm -rf rW2
