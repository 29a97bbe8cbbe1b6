#!/usr/bin/env bash
# TileSpMV on the 14 FEM and mesh matrices with the segment length forced (SPARSE_EXP_SEGMENT = 3, 4, 6, 8, 16) against the rule (2 on these), and cuSPARSE's CSR/COO/BSR for the reference; f64 and f32, caches flushed.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH4; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step ref 200 $B/spbench $F --formats csr,coo,tiled16,bsr --out $O/ref $M/*.mtx.gz
step rule 100 $B/spbench $F --formats tiled16 --out $O/rule $M/*.mtx.gz
for n in 3 4 6 8 16; do SPARSE_EXP_SEGMENT=$n step seg$n 100 $B/spbench $F --formats tiled16 --out $O/seg$n $M/*.mtx.gz; done
step rule2 100 $B/spbench $F --formats tiled16 --out $O/rule2 $M/*.mtx.gz
rm -f $O/*/*.svg
cd $OUT && tar czf rH4.tgz rH4 && rm -rf rH4
