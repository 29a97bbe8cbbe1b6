#!/usr/bin/env bash
# TileSpMV with each lane's loads issued four entries at a time (spbench) against the committed kernel (spbench-base), bench-fem in f64 and f32; group of 2 and x read from global memory as variants; ncu of the new tile kernels on bcsstk16.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rB3; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step fem-base 150 $B/spbench-base $FEM --formats csr,coo,tiled16,bsr --out $O/fem-base $M/*.mtx.gz
step fem-new 100 $B/spbench $FEM --formats tiled16 --out $O/fem-new $M/*.mtx.gz
SPARSE_EXPERIMENT_DEFINES=TILE_GROUP=2 step fem-g2 100 $B/spbench $FEM --formats tiled16 --out $O/fem-g2 $M/*.mtx.gz
SPARSE_EXPERIMENT_DEFINES=TILE_X_DIRECT=1 step fem-x 100 $B/spbench $FEM --formats tiled16 --out $O/fem-x $M/*.mtx.gz
step fem-base2 100 $B/spbench-base $FEM --formats tiled16 --out $O/fem-base2 $M/*.mtx.gz
step fem-new2 100 $B/spbench $FEM --formats tiled16 --out $O/fem-new2 $M/*.mtx.gz
NCU="/usr/local/cuda/bin/ncu --cache-control all --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
ONE="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64 --runs 1 --warmup-ms 1 --batch-ms 0.01 --time-limit-s 1"
step ncu-tile-bcsstk16 100 $NCU -k "regex:^tile_(spmv|combine)" --launch-count 4 $B/spbench $ONE --algorithms tilespmv --out $O/ncu-tile-bcsstk16 $M/bcsstk16.mtx.gz
rm -f $O/*/*.svg
cd $OUT && tar czf rB3.tgz rB3 && rm -rf rB3
