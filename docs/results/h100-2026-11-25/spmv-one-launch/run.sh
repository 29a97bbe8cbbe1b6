#!/usr/bin/env bash
# TileSpMV in one launch: its GPU test, SpMV conformance, sanitizers, and the FEM benchmark.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rA2; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
CS=/usr/local/cuda/bin/compute-sanitizer
step test-tilespmv 40 $B/test-tilespmv --test-threads 4
step conf-cuda-gen 40 $B/conformance --backend cuda --quick --no-corpus --op spmv
step conf-cuda-corpus 60 $B/conformance --backend cuda --quick --corpus $M --op spmv
FEM="bcsstk01 bcsstk14 bcsstk16 brack2 copter2 nsjac xenon1 bayer10 jagmesh7 mdual sherman3 1138_bus dwt_992 delaunay_n15"
step bench-fem 50 $B/spbench --backend cuda --no-corpus --large 0 --ops spmv --formats csr,coo,tiled16,bsr --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-fem $(for m in $FEM; do echo $M/$m.mtx.gz; done)
step bench-large-tiles 60 $B/spbench --backend cuda --formats csr,tiled16 --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-large-tiles
step memcheck-tilespmv 80 $CS --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads 1
step racecheck-tilespmv 100 $CS --tool racecheck --error-exitcode 9 $B/test-tilespmv --test-threads 1
cd $OUT && tar czf rA2.tgz rA2 && rm -rf rA2
