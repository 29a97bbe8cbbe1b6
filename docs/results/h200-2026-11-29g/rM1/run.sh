#!/usr/bin/env bash
# BSR SpMV with each lane reading chunks of consecutive slots by vector loads (spbench; lanes per chunk, SPARSE_BSR_PER=1, or per four chunks, =4) against 838af3e's kernel (spbench-base): BSR tests, SpMV conformance over the generators and five corpus matrices, memcheck, and BSR against cuSPARSE's BSR and CSR auto on block stencils and FEM matrices.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rM1; M=/tmp/sd; mkdir -p $B $O; xz -dc devrun/cx3/sd.tar.xz | tar -C /tmp -xf -
for f in devrun/rm/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_formats 120 $B/test-spmv_formats --test-threads=1
step conformance-spmv 150 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-spmv_formats 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-spmv_formats --test-threads=1
F="--backend cuda --ops spmv --precisions f64,f32,f16 --formats bsr --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
for v in base 1 4; do
  if [ $v = base ]; then bin=spbench-base; else bin=spbench; fi
  export SPARSE_BSR_PER=${v/base/1}
  step fem-$v 60 $B/$bin $F --no-corpus --large 0 --out $O/fem-$v $M/*.mtx
  for mb in 15.5 64 256; do step bp-$mb-$v 60 $B/$bin $F --no-corpus --large $mb --generators block-poisson3d --out $O/bp-$mb-$v; done
done
step bp-256-csr 60 $B/spbench --backend cuda --ops spmv --precisions f64,f32,f16 --formats csr --algorithms auto --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --no-corpus --large 256 --generators block-poisson3d --out $O/bp-256-csr
rm -f $O/*/*.svg
cd $OUT && tar czf rM1.tgz rM1 && rm -rf rM1
