#!/usr/bin/env bash
# Plan-time tuning for SpMM and SDDMM (cuSPARSE among the candidates): the tuning tests, then the rule's auto, every kernel and cuSPARSE, and tuned auto on R-MAT, Poisson 3D and five corpus matrices.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rA5; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="$M/bcsstk16.mtx.gz $M/musae_facebook.mtx.gz $M/dlmc_rn50_mp50_proj_g4.mtx.gz $M/NotreDame_www.mtx.gz $M/astro-ph.mtx.gz"
S="--backend cuda --no-corpus --large 64 --generators rmat,poisson3d --ops spmm,sddmm --precisions f32,f16 --formats csr --n 32,128 --k 32 --warmup-ms 20 --time-limit-s 1 --runs 10"
step test-tuning 120 $B/test-tuning --test-threads=1
step test-spmv_auto 60 $B/test-spmv_auto --test-threads=1
step rule 200 $B/spbench $S --out $O/rule $F
step tuned 150 $B/spbench $S --tune --algorithms auto --out $O/tuned $F
rm -f $O/*/*.svg
cd $OUT && tar czf rA5.tgz rA5 && rm -rf rA5
