#!/usr/bin/env bash
# TileSpMV with short deferred rows added by the tile kernels (spbench) against the committed kernel (spbench-base): tests, SpMV conformance, memcheck and racecheck, then bench-fem and bench-large under deferral rules set by SPARSE_TILE_DEFER (from_nnz,mean,max_tile; unset: the committed rule).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC1; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FILES=""; for m in bcsstk14 bcsstk16 nsjac bayer10 xenon1 delaunay_n15 brack2 copter2 mdual sherman3 1138_bus dwt_992 jagmesh7 bcsstk01; do FILES="$FILES $M/$m.mtx.gz"; done
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
L="--backend cuda --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 2"
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step conformance-spmv 150 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-tilespmv 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads=1
step racecheck-tilespmv 150 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-tilespmv --test-threads=1 every_tile_format
step fem-base 150 $B/spbench-base $FEM --formats csr,coo,tiled16,bsr --out $O/fem-base $FILES
step large-base 120 $B/spbench-base $L --formats csr,tiled16 --out $O/large-base
for i in 1 2; do
  step fem-new-$i 100 $B/spbench $FEM --formats tiled16 --out $O/fem-new-$i $FILES
  step large-new-$i 100 $B/spbench $L --formats tiled16 --out $O/large-new-$i
  for rule in 0,16,32 0,1e9,12 0,1e9,16 0,1e9,24 0,1e9,32; do
    n=$(echo $rule | tr ',' '_')
    SPARSE_TILE_DEFER=$rule step fem-$n-$i 100 $B/spbench $FEM --formats tiled16 --out $O/fem-$n-$i $FILES
    SPARSE_TILE_DEFER=$rule step large-$n-$i 100 $B/spbench $L --formats tiled16 --out $O/large-$n-$i
  done
  step fem-base-tiles-$i 100 $B/spbench-base $FEM --formats tiled16 --out $O/fem-base-tiles-$i $FILES
done
rm -f $O/*/*.svg
cd $OUT && tar czf rC1.tgz rC1 && rm -rf rC1
