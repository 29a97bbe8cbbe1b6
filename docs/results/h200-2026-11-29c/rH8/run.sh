#!/usr/bin/env bash
# TileSpMV segments lengthened until the blocks of a small matrix's launch that do work fit one wave of resident blocks (the committed rule): tests, SpMV conformance on the FEM matrices, bench-fem against the previous plan (spbench-base) twice, block-poisson3d of 16^3 to 24^3 points (not in the corpus), memcheck.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH8; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step conformance 200 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
F="--backend cuda --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step ref 200 $B/spbench-base $F --no-corpus --large 0 --formats csr,coo,tiled16,bsr --out $O/ref $M/*.mtx.gz
for i in 1 2; do
  step base$i 100 $B/spbench-base $F --no-corpus --large 0 --formats tiled16 --out $O/base$i $M/*.mtx.gz
  step new$i 100 $B/spbench $F --no-corpus --large 0 --formats tiled16 --out $O/new$i $M/*.mtx.gz
done
for mb in 3.5 5 7 9.5 12.5; do
  step bp-ref-$mb 100 $B/spbench-base $F --no-corpus --large $mb --generators block-poisson3d --formats csr,coo,tiled16,bsr --out $O/bp-ref-$mb
  step bp-new-$mb 100 $B/spbench $F --no-corpus --large $mb --generators block-poisson3d --formats tiled16 --out $O/bp-new-$mb
done
step memcheck 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 1 $B/test-tilespmv --test-threads=1
rm -f $O/*/*.svg
cd $OUT && tar czf rH8.tgz rH8 && rm -rf rH8
