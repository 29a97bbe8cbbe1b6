#!/usr/bin/env bash
# The committed BSR kernel (each group's block columns and masks loaded first; one copy of the loop for one-slot chunks) and `auto` picking BSR for large matrices of whole 4 x 4 blocks (spbench) against 4602a7d (spbench-base): auto and BSR tests, SpMV conformance over the generators and 45 corpus matrices, memcheck, auto on block stencils, BSR on FEM matrices and a block stencil.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rM3; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rm/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_auto 150 $B/test-spmv_auto --test-threads=1
step test-spmv_formats 120 $B/test-spmv_formats --test-threads=1
step conformance-spmv 240 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-spmv_formats 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-spmv_formats --test-threads=1
step memcheck-spmv_auto 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-spmv_auto --test-threads=1 auto
A="--backend cuda --ops spmv --precisions f64,f32,f16 --formats csr --algorithms auto --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --no-corpus --generators block-poisson3d"
F="--backend cuda --ops spmv --precisions f64,f32,f16 --formats bsr --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
for bin in spbench spbench-base; do
  for mb in 5 15.5 64 256; do step auto-$mb-$bin 60 $B/$bin $A --large $mb --out $O/auto-$mb-$bin; done
  step fem-$bin 60 $B/$bin $F --no-corpus --large 0 --out $O/fem-$bin $M/bcsstk14.mtx $M/bcsstk16.mtx $M/cage10.mtx $M/nsjac.mtx $M/xenon1.mtx $M/brack2.mtx $M/copter2.mtx
  step bp-bsr-$bin 60 $B/$bin $F --no-corpus --large 256 --generators block-poisson3d --out $O/bp-bsr-$bin
done
rm -f $O/*/*.svg
cd $OUT && tar czf rM3.tgz rM3 && rm -rf rM3
