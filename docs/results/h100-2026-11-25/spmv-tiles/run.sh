#!/usr/bin/env bash
# SpMV: the GPU tests, conformance, sanitizers and benchmarks of the TileSpMV rework.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rA; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
CS=/usr/local/cuda/bin/compute-sanitizer
for t in spmv_auto spmv_formats tilespmv; do step test-$t 40 $B/test-$t --test-threads 4; done
step conf-cuda-gen 40 $B/conformance --backend cuda --quick --no-corpus --op spmv
step conf-cuda-corpus 60 $B/conformance --backend cuda --quick --corpus $M --op spmv
FEM="bcsstk01 bcsstk14 bcsstk16 brack2 copter2 nsjac xenon1 bayer10 jagmesh7 mdual sherman3 1138_bus dwt_992 delaunay_n15"
step bench-fem 50 $B/spbench --backend cuda --no-corpus --large 0 --ops spmv --formats csr,coo,tiled16,bsr --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-fem $(for m in $FEM; do echo $M/$m.mtx.gz; done)
REST=$(ls $M | sort | awk '$0 > "dwt_992.mtx.gz"' | sed "s|^|$M/|")
step bench-rest 70 $B/spbench --backend cuda --no-corpus --large 0 --ops spmv --precisions f32,f64 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-rest $REST
step bench-f16 50 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --formats csr --precisions f16 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-f16
step bench-large-tiles 60 $B/spbench --backend cuda --formats csr,tiled16 --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --out $O/bench-large-tiles
step memcheck-tilespmv 80 $CS --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads 1
step memcheck-spmv_formats 70 $CS --tool memcheck --error-exitcode 9 $B/test-spmv_formats --test-threads 1
step memcheck-spmv_auto 50 $CS --tool memcheck --error-exitcode 9 $B/test-spmv_auto --test-threads 1
step racecheck-tilespmv 80 $CS --tool racecheck --error-exitcode 9 $B/test-tilespmv --test-threads 1
cd $OUT && tar czf rA.tgz rA && rm -rf rA
