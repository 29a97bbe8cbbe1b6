#!/usr/bin/env bash
# BSR SpMV with each lane's loads of four slots issued together (spbench) against d212202's kernel (spbench-base, 958fca8: the BSR kernel did not change between them): BSR tests, SpMV conformance over the generators and five corpus matrices, memcheck, and BSR against cuSPARSE's on block stencils and FEM matrices.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL9; M=/tmp/sd; mkdir -p $B $O; xz -dc devrun/cx3/sd.tar.xz | tar -C /tmp -xf -
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_formats 120 $B/test-spmv_formats --test-threads=1
step conformance-spmv 120 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-spmv_formats 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-spmv_formats --test-threads=1
F="--backend cuda --ops spmv --precisions f64,f32 --formats bsr --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
for bin in spbench spbench-base; do
  step fem-$bin 60 $B/$bin $F --no-corpus --large 0 --out $O/fem-$bin $M/*.mtx
  for mb in 15.5 64 256; do step bp-$mb-$bin 60 $B/$bin $F --no-corpus --large $mb --generators block-poisson3d --out $O/bp-$mb-$bin; done
done
rm -f $O/*/*.svg
cd $OUT && tar czf rL9.tgz rL9 && rm -rf rL9
