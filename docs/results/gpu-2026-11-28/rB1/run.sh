#!/usr/bin/env bash
# TileSpMV and R-MAT: where the time goes (ncu), and x read straight from global memory (TILE_X_DIRECT=1) against the committed staging, same binary, bench-fem.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rB1; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
NCU="/usr/local/cuda/bin/ncu --cache-control none --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
SPARSE_EXPERIMENT_DEFINES=TILE_X_DIRECT=1 step test-tilespmv-x 120 $B/test-tilespmv --test-threads=1
step fem-base 150 $B/spbench $FEM --formats csr,coo,tiled16,bsr --out $O/fem-base $M/*.mtx.gz
SPARSE_EXPERIMENT_DEFINES=TILE_X_DIRECT=1 step fem-x 100 $B/spbench $FEM --formats tiled16 --out $O/fem-x $M/*.mtx.gz
step fem-base2 100 $B/spbench $FEM --formats tiled16 --out $O/fem-base2 $M/*.mtx.gz
ONE="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64 --runs 1 --warmup-ms 0 --batch-ms 0 --time-limit-s 1"
for m in bcsstk16 brack2; do
  step ncu-tile-$m 100 $NCU -k "regex:^tile_" --launch-count 4 $B/spbench $ONE --algorithms tilespmv --out $O/ncu-tile-$m $M/$m.mtx.gz
  SPARSE_EXPERIMENT_DEFINES=TILE_X_DIRECT=1 step ncu-tilex-$m 100 $NCU -k "regex:^tile_" --launch-count 4 $B/spbench $ONE --algorithms tilespmv --out $O/ncu-tilex-$m $M/$m.mtx.gz
  step ncu-vector-$m 100 $NCU -k "regex:^spmv_" --launch-count 2 $B/spbench $ONE --algorithms vector --out $O/ncu-vector-$m $M/$m.mtx.gz
  step ncu-vendor-$m 100 $NCU --launch-count 6 $B/spbench $ONE --algorithms vendor-default --formats csr --out $O/ncu-vendor-$m $M/$m.mtx.gz
done
RMAT="--backend cuda --no-corpus --large 256 --generators rmat --ops spmv --precisions f64,f32 --runs 1 --warmup-ms 0 --batch-ms 0 --time-limit-s 1"
step ncu-rmat 200 $NCU --launch-count 30 $B/spbench $RMAT --algorithms vector-split,merge-path,vendor-default,vendor-alg1 --formats csr,coo --out $O/ncu-rmat
rm -f $O/*/*.svg
cd $OUT && tar czf rB1.tgz rB1 && rm -rf rB1
