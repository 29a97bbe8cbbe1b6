#!/usr/bin/env bash
# Value orders built in parallel (plan time of the blocked formats) on top of rM6's kernels (spbench) against 4602a7d (spbench-base): the SpMV and TileSpMV tests; conformance of SpMV over the generators and 45 corpus matrices and of SpMM and SDDMM over the generators; auto on block stencils and the blocked formats' plans on large stencils, with plan times.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rM8; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rm/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; nproc; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for t in spmv_auto spmv_formats tilespmv; do step test-$t 150 $B/test-$t --test-threads=1; done
step conformance-spmv 240 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step conformance-spmm-sddmm 240 $B/conformance --backend cuda --quick --no-corpus --op spmm,sddmm
A="--backend cuda --ops spmv --precisions f64,f32,f16 --formats csr --algorithms auto --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --no-corpus --generators block-poisson3d"
F="--backend cuda --ops spmv --precisions f64,f32 --runs 5 --warmup-ms 10 --batch-ms 0.5 --time-limit-s 1 --no-corpus --large 256"
for bin in spbench spbench-base; do
  for mb in 15.5 256; do step auto-$mb-$bin 60 $B/$bin $A --large $mb --out $O/auto-$mb-$bin; done
  step formats-bp-$bin 90 $B/$bin $F --formats bsr,tiled16 --generators block-poisson3d --out $O/formats-bp-$bin
  step formats-p3-$bin 90 $B/$bin $F --formats ell,hyb --generators poisson3d --out $O/formats-p3-$bin
done
rm -f $O/*/*.svg
cd $OUT && tar czf rM8.tgz rM8 && rm -rf rM8
