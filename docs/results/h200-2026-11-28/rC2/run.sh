#!/usr/bin/env bash
# TileSpMV with short deferred rows added by the tile kernels: the deferred loads started after the tiles (plain) or before them (TILE_DEFER_AHEAD, set through SPARSE_EXPERIMENT_DEFINES), under deferral rules set by SPARSE_TILE_DEFER (from_nnz,mean,max_tile; unset: the committed rule), against the committed kernel (spbench-base). Tests and conformance of both variants first.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC2; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FILES=""; for m in bcsstk14 bcsstk16 nsjac bayer10 xenon1 delaunay_n15 brack2 copter2 mdual sherman3 1138_bus dwt_992 jagmesh7 bcsstk01; do FILES="$FILES $M/$m.mtx.gz"; done
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
L="--backend cuda --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 2"
for v in plain ahead; do
  export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-$v SPARSE_EXPERIMENT_DEFINES=$([ $v = ahead ] && echo TILE_DEFER_AHEAD)
  step test-tilespmv-$v 120 $B/test-tilespmv --test-threads=1
  step conformance-spmv-$v 150 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32
done
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-plain SPARSE_EXPERIMENT_DEFINES=
step memcheck-tilespmv 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads=1
step fem-base 150 $B/spbench-base $FEM --formats csr,coo,tiled16,bsr --out $O/fem-base $FILES
step large-base 120 $B/spbench-base $L --formats csr,tiled16 --out $O/large-base
for i in 1 2; do
  for v in plain ahead; do
    export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-$v SPARSE_EXPERIMENT_DEFINES=$([ $v = ahead ] && echo TILE_DEFER_AHEAD)
    step fem-$v-default-$i 100 $B/spbench $FEM --formats tiled16 --out $O/fem-$v-default-$i $FILES
    for rule in 0,1e9,32 0,1e9,48 0,1e9,64; do
      n=$(echo $rule | tr ',' '_')
      SPARSE_TILE_DEFER=$rule step fem-$v-$n-$i 100 $B/spbench $FEM --formats tiled16 --out $O/fem-$v-$n-$i $FILES
    done
  done
  for v in plain ahead; do
    export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-$v SPARSE_EXPERIMENT_DEFINES=$([ $v = ahead ] && echo TILE_DEFER_AHEAD)
    for rule in 0,1e9,32 0,1e9,48; do
      n=$(echo $rule | tr ',' '_')
      SPARSE_TILE_DEFER=$rule step large-$v-$n-$i 100 $B/spbench $L --formats tiled16 --out $O/large-$v-$n-$i
    done
  done
  export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base SPARSE_EXPERIMENT_DEFINES=
  step fem-base-tiles-$i 100 $B/spbench-base $FEM --formats tiled16 --out $O/fem-base-tiles-$i $FILES
done
rm -f $O/*/*.svg
cd $OUT && tar czf rC2.tgz rC2 && rm -rf rC2
