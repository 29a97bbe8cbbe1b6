#!/usr/bin/env bash
# SDDMM `auto` taking `vector` in f64 from 2^20 entries: the RoDe GPU tests (with the new pick), and spbench's SDDMM on the corpus matrices of rL7 and a generated block stencil and uniform matrix.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL8; M=/tmp/sd; mkdir -p $B $O; xz -dc devrun/cx3/sd.tar.xz | tar -C /tmp -xf -
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-rode 150 $B/test-rode --test-threads=1
F="--backend cuda --ops sddmm --k 32,128 --precisions f64 --formats csr --algorithms auto --warmup-ms 20 --time-limit-s 1 --runs 5"
step corpus 100 $B/spbench $F --no-corpus --large 0 --out $O/corpus $M/*.mtx
step gen-15.5 100 $B/spbench $F --no-corpus --large 15.5 --generators block-poisson3d,uniform --out $O/gen-15.5
rm -f $O/*/*.svg
cd $OUT && tar czf rL8.tgz rL8 && rm -rf rL8
