#!/usr/bin/env bash
# TileSpMV, final build (rC4's binaries) against the committed kernel before this session (spbench-base) on an H100: test-tilespmv, then bench-fem, each binary in turn, twice.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC5; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FILES=""; for m in bcsstk14 bcsstk16 nsjac bayer10 xenon1 delaunay_n15 brack2 copter2 mdual sherman3 1138_bus dwt_992 jagmesh7 bcsstk01; do FILES="$FILES $M/$m.mtx.gz"; done
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step fem-base 150 $B/spbench-base $FEM --formats csr,coo,tiled16,bsr --out $O/fem-base $FILES
for i in 1 2; do
  for bin in spbench-base spbench; do
    step fem-$bin-$i 100 $B/$bin $FEM --formats tiled16 --out $O/fem-$bin-$i $FILES
  done
done
rm -f $O/*/*.svg
cd $OUT && tar czf rC5.tgz rC5 && rm -rf rC5
