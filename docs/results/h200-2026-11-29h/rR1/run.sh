#!/usr/bin/env bash
# SDDMM at K = 64, 128, 256 in f64 and f32: `auto`, `vector`, RoDe and cuSPARSE on FEM, block and mesh matrices and uniform ones: where wide SDDMM should go to cuSPARSE.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rR1; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cs/m.tar.xz | tar -C /tmp -xf -
for f in devrun/rq/spbench.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops sddmm --k 64,128,256 --precisions f64,f32 --formats csr --algorithms auto,vector,rode-deterministic,vendor-default --warmup-ms 20 --time-limit-s 1 --runs 10"
step corpus 150 $B/spbench $F --no-corpus --large 0 --out $O/corpus $M/*.mtx
step gen 150 $B/spbench $F --no-corpus --large 15.5 --generators block-poisson3d,uniform,poisson3d --out $O/gen
rm -f $O/*/*.svg
cd $OUT && tar czf rR1.tgz rR1 && rm -rf rR1
