#!/usr/bin/env bash
# TileSpMV: the segments of a tile row of at most 8 of them in consecutive warps of one block, added through shared memory, so small matrices need no second launch (spbench), against the committed kernel before this session (spbench-base): tests, SpMV conformance, memcheck and racecheck, bench-fem and bench-large twice each, ncu on bcsstk16.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rB6; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FILES=""; for m in bcsstk14 bcsstk16 nsjac bayer10 xenon1 delaunay_n15 brack2 copter2 mdual sherman3 1138_bus dwt_992 jagmesh7 bcsstk01; do FILES="$FILES $M/$m.mtx.gz"; done
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
L="--backend cuda --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 2"
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step conformance-spmv 150 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-tilespmv 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads=1
step racecheck-tilespmv 150 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-tilespmv --test-threads=1 every_tile_format
step fem-base 150 $B/spbench-base $FEM --formats csr,coo,tiled16,bsr --out $O/fem-base $FILES
step fem-new 100 $B/spbench $FEM --formats tiled16 --out $O/fem-new $FILES
step fem-base2 100 $B/spbench-base $FEM --formats tiled16 --out $O/fem-base2 $FILES
step fem-new2 100 $B/spbench $FEM --formats tiled16 --out $O/fem-new2 $FILES
step large-base 120 $B/spbench-base $L --formats csr,tiled16 --out $O/large-base
step large-new 100 $B/spbench $L --formats tiled16 --out $O/large-new
NCU="/usr/local/cuda/bin/ncu --cache-control all --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats"
ONE="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64 --runs 1 --warmup-ms 1 --batch-ms 0.01 --time-limit-s 1"
step ncu-tile-bcsstk16 100 $NCU -k "regex:^tile_(spmv|combine)" --launch-count 4 $B/spbench $ONE --algorithms tilespmv --out $O/ncu-tile-bcsstk16 $M/bcsstk16.mtx.gz
rm -f $O/*/*.svg
cd $OUT && tar czf rB6.tgz rB6 && rm -rf rB6
