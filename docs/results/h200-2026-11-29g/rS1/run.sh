#!/usr/bin/env bash
# SpMM on CSR (every algorithm of the cuda backend and cuSPARSE's) on matrices of few, moderately long rows: small 3D stencils of 4 x 4 blocks and FEM corpus matrices, N = 32 and 128, f32 and f64 (rM8's spbench).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rS1; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rs/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops spmm --n 32,128 --precisions f32,f64 --formats csr --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
for mb in 0.66 1.2 2.0 3.1 5; do step bp-$mb 90 $B/spbench $F --no-corpus --large $mb --generators block-poisson3d --out $O/bp-$mb; done
step fem 120 $B/spbench $F --no-corpus --large 0 --out $O/fem $M/bcsstk14.mtx $M/bcsstk16.mtx $M/cage10.mtx $M/nsjac.mtx $M/dwt_992.mtx $M/dnn_n1024_l1.mtx $M/bayer10.mtx $M/zenios.mtx
rm -f $O/*/*.svg
cd $OUT && tar czf rS1.tgz rS1 && rm -rf rS1
