#!/usr/bin/env bash
# TileSpMV load chains: the committed kernel (spbench-base) against the segment span loaded with the segment, and variants set through SPARSE_EXPERIMENT_DEFINES (group sizes of the walk, sparse and dense formats; the deferred row pointers loaded before the tile walk). Tests of each variant, then bench-fem and bench-large, two rounds.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rD1; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FEM_M="bcsstk14 bcsstk16 nsjac bayer10 xenon1 delaunay_n15 brack2 copter2 mdual sherman3 1138_bus dwt_992 jagmesh7 bcsstk01"
FILES=""; for m in $FEM_M; do FILES="$FILES $M/$m.mtx.gz"; done
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --formats tiled16"
L="--backend cuda --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 2 --formats tiled16"
declare -A V=( [new]="" [g8]="TILE_GROUP=8" [d8]="TILE_GROUP_DENSE=8" [d16]="TILE_GROUP_DENSE=16" [ahead]="TILE_DEFER_PTR_AHEAD=1" [d16a]="TILE_GROUP_DENSE=16 TILE_DEFER_PTR_AHEAD=1" [g8d16a]="TILE_GROUP=8 TILE_GROUP_DENSE=16 TILE_DEFER_PTR_AHEAD=1" )
ORDER="new g8 d8 d16 ahead d16a g8d16a"
for v in $ORDER; do SPARSE_EXPERIMENT_DEFINES="${V[$v]}" step test-$v 120 $B/test-tilespmv --test-threads=1; done
for i in 1 2; do
  step fem-base-$i 100 $B/spbench-base $FEM --out $O/fem-base-$i $FILES
  for v in $ORDER; do SPARSE_EXPERIMENT_DEFINES="${V[$v]}" step fem-$v-$i 100 $B/spbench $FEM --out $O/fem-$v-$i $FILES; done
done
step large-base 100 $B/spbench-base $L --out $O/large-base
for v in $ORDER; do SPARSE_EXPERIMENT_DEFINES="${V[$v]}" step large-$v 100 $B/spbench $L --out $O/large-$v; done
for f in /tmp/kc/tilespmv-*; do echo "$f ${V[x]:-}"; done > $O/cache.txt 2>&1
rm -f $O/*/*.svg
cd $OUT && tar czf rD1.tgz rD1 && rm -rf rD1
