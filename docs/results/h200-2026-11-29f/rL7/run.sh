#!/usr/bin/env bash
# SDDMM in f64 and f32: RoDe (deterministic) against `vector` and cuSPARSE on the corpus matrices `auto` gives RoDe for their mean row (100k entries or more, mean row 13 or more, no row of 96) and on large generated ones (9b600d7).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL7; M=/tmp/sd; mkdir -p $B $O; xz -dc devrun/cx3/sd.tar.xz | tar -C /tmp -xf -
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops sddmm --k 32,128 --precisions f64,f32 --formats csr --warmup-ms 20 --time-limit-s 1 --runs 5"
step corpus 150 $B/spbench $F --no-corpus --large 0 --out $O/corpus $M/*.mtx
for mb in 15.5 64; do step gen-$mb 150 $B/spbench $F --no-corpus --large $mb --generators block-poisson3d,uniform --out $O/gen-$mb; done
rm -f $O/*/*.svg
cd $OUT && tar czf rL7.tgz rL7 && rm -rf rL7
