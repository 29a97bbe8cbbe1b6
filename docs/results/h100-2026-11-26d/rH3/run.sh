#!/usr/bin/env bash
# TileSpMV with each tile's payload, values and x staged in shared memory by its half-warp
# before the lanes decode their rows: GPU tests, SpMV conformance, sanitizers, and the FEM and
# large benchmarks against the previous build (ffcfa0c) in the same call; memcheck of the
# attention backward changed by rH1 and rH2.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rH3; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
CS=/usr/local/cuda/bin/compute-sanitizer
step test-tilespmv 60 $B/test-tilespmv --test-threads 4
step conf-cuda-gen 60 $B/conformance --backend cuda --quick --no-corpus --op spmv
step conf-cuda-corpus 90 $B/conformance --backend cuda --quick --corpus $M --op spmv
FEM="bcsstk01 bcsstk14 bcsstk16 brack2 copter2 nsjac xenon1 bayer10 jagmesh7 mdual sherman3 1138_bus dwt_992 delaunay_n15"
F="--backend cuda --no-corpus --large 0 --ops spmv --formats csr,coo,tiled16,bsr --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step bench-fem 60 $B/spbench $F --out $O/bench-fem $(for m in $FEM; do echo $M/$m.mtx.gz; done)
SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base step bench-fem-base 60 $B/spbench-base $F --out $O/bench-fem-base $(for m in $FEM; do echo $M/$m.mtx.gz; done)
L="--backend cuda --formats csr,tiled16 --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step bench-large-tiles 60 $B/spbench $L --out $O/bench-large-tiles
step memcheck-tilespmv 80 $CS --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads 1
step racecheck-tilespmv 80 $CS --tool racecheck --error-exitcode 9 $B/test-tilespmv --test-threads 1
step memcheck-attention 100 $CS --tool memcheck --error-exitcode 9 $B/test-attention small --test-threads 1
cd $OUT && tar czf rH3.tgz rH3 && rm -rf rH3
