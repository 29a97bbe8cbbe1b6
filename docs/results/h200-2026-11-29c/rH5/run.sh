#!/usr/bin/env bash
# TileSpMV on the 14 FEM and mesh matrices: tile rows of up to W tiles (SPARSE_EXP_WHOLE = 4, 6, 8, 12) on one warp, longer ones cut as the rule cuts them (segments of 2 here), against the rule (W = 2); cuSPARSE for the reference; f64 and f32, caches flushed.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH5; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step ref 200 $B/spbench $F --formats csr,coo,tiled16,bsr --out $O/ref $M/*.mtx.gz
step rule 100 $B/spbench $F --formats tiled16 --out $O/rule $M/*.mtx.gz
for n in 4 6 8 12; do SPARSE_EXP_WHOLE=$n step whole$n 100 $B/spbench $F --formats tiled16 --out $O/whole$n $M/*.mtx.gz; done
step rule2 100 $B/spbench $F --formats tiled16 --out $O/rule2 $M/*.mtx.gz
rm -f $O/*/*.svg
cd $OUT && tar czf rH5.tgz rH5 && rm -rf rH5
