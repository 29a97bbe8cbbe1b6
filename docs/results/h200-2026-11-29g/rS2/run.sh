#!/usr/bin/env bash
# SpMM auto with RoDe for matrices of fewer than 8,192 rows (spbench) against 8b6488a's rule (spbench-base): the RoDe and tuning tests, memcheck of the RoDe test, and SpMM auto on small block stencils and FEM matrices, N = 32 and 128, f32 and f64.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rS2; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rs2/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-rode 200 $B/test-rode --test-threads=1
step test-tuning 200 $B/test-tuning --test-threads=1
step memcheck-rode 240 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-rode --test-threads=1 auto
F="--backend cuda --ops spmm --n 32,128 --precisions f32,f64 --formats csr --algorithms auto --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
for bin in spbench spbench-base; do
  for mb in 0.66 1.2 2.0 3.1; do step bp-$mb-$bin 90 $B/$bin $F --no-corpus --large $mb --generators block-poisson3d --out $O/bp-$mb-$bin; done
  step fem-$bin 120 $B/$bin $F --no-corpus --large 0 --out $O/fem-$bin $M/bcsstk14.mtx $M/bcsstk16.mtx $M/cage10.mtx $M/nsjac.mtx $M/dnn_images1024_subset.mtx $M/dlmc_rn50_mp80_b2_g3_conv3x3.mtx $M/facebook_MIT8.mtx $M/dlmc_rn50_emp98_final_dense.mtx
done
rm -f $O/*/*.svg
cd $OUT && tar czf rS2.tgz rS2 && rm -rf rS2
