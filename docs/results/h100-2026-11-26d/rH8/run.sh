#!/usr/bin/env bash
# TileSpMV's shortest segment: tile rows cut into segments of at least 2 (s2, the build of rH6),
# 8 (s8) or 16 (s16) tiles, FEM and large benchmarks of the three builds in one call.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH8; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FEM="bcsstk01 bcsstk14 bcsstk16 brack2 copter2 nsjac xenon1 bayer10 jagmesh7 mdual sherman3 1138_bus dwt_992 delaunay_n15"
F="--backend cuda --no-corpus --large 0 --ops spmv --formats csr,coo,tiled16,bsr --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
L="--backend cuda --formats csr,tiled16 --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
for v in s2 s8 s16; do
  export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-$v
  step bench-fem-$v 60 $B/spbench-$v $F --out $O/bench-fem-$v $(for m in $FEM; do echo $M/$m.mtx.gz; done)
  step bench-large-$v 60 $B/spbench-$v $L --out $O/bench-large-$v
done
cd $OUT && tar czf rH8.tgz rH8 && rm -rf rH8
