#!/usr/bin/env bash
# TileSpMV on the large Poisson matrices (bench-large: --large 256, Poisson 2D and 3D, f64 and f32), the committed kernel (spbench-base) and the new one (spbench), twice each in turn; then the 14 FEM matrices again.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rB5; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
L="--backend cuda --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 2"
step large-base 120 $B/spbench-base $L --formats csr,tiled16 --out $O/large-base
step large-new 100 $B/spbench $L --formats tiled16 --out $O/large-new
step large-base2 100 $B/spbench-base $L --formats tiled16 --out $O/large-base2
step large-new2 100 $B/spbench $L --formats tiled16 --out $O/large-new2
rm -f $O/*/*.svg
cd $OUT && tar czf rB5.tgz rB5 && rm -rf rB5
