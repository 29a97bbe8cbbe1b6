#!/usr/bin/env bash
# TileSpMV on the GPU deferring the tiles of at most 32 entries of large matrices of sparse tiles
# (fewer than 16 entries a tile on average, at least 2^17 entries): GPU tests, SpMV conformance
# on the generators and all corpus matrices, and the FEM and large benchmarks against the
# previous build (ffcfa0c) in the same call. The deferred entries run on `scalar` where `auto`
# would give the whole matrix `scalar`, else on `vector-split` (rH5: always `vector-split`).
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH6; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
step test-tilespmv 60 $B/test-tilespmv --test-threads 4
step conf-cuda-gen 60 $B/conformance --backend cuda --quick --no-corpus --op spmv
step conf-cuda-corpus 90 $B/conformance --backend cuda --quick --corpus $M --op spmv
step memcheck-tilespmv 80 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads 1
FEM="bcsstk01 bcsstk14 bcsstk16 brack2 copter2 nsjac xenon1 bayer10 jagmesh7 mdual sherman3 1138_bus dwt_992 delaunay_n15"
F="--backend cuda --no-corpus --large 0 --ops spmv --formats csr,coo,tiled16,bsr --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
L="--backend cuda --formats csr,tiled16 --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
for v in new base; do
  bin=$B/spbench; [ $v = base ] && bin=$B/spbench-base
  export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-$v
  step bench-fem-$v 60 $bin $F --out $O/bench-fem-$v $(for m in $FEM; do echo $M/$m.mtx.gz; done)
  step bench-large-$v 60 $bin $L --out $O/bench-large-$v
done
cd $OUT && tar czf rH6.tgz rH6 && rm -rf rH6
