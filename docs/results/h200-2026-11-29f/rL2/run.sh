#!/usr/bin/env bash
# CSR `vector` on large regular matrices of 16-28 entries a row: lanes a row (SPARSE_EXP_LANES) and loads issued together a lane (SUB_GROUP, for fewer than 32 lanes) through experiment hooks; block-poisson3d 41^3 and 65^3 x 4, uniform; every CSR/COO/BSR kernel and cuSPARSE for reference.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL2; mkdir -p $B $O
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --no-corpus"
for mb in 64 256; do
  step ref-$mb 120 $B/spbench-exp $F --large $mb --generators block-poisson3d,uniform,poisson3d --formats csr,coo,bsr --out $O/ref-$mb
  for w in 2 4 8 16; do for g in 1 2 4; do
    SPARSE_EXP_LANES=$w SPARSE_EXPERIMENT_DEFINES="SUB_GROUP=$g" step v$w-g$g-$mb 60 $B/spbench-exp $F --large $mb --generators block-poisson3d,uniform,poisson3d --formats csr --algorithms vector --out $O/v$w-g$g-$mb
  done; done
  SPARSE_EXP_LANES=32 step v32-$mb 60 $B/spbench-exp $F --large $mb --generators block-poisson3d,uniform,poisson3d --formats csr --algorithms vector --out $O/v32-$mb
done
rm -f $O/*/*.svg
cd $OUT && tar czf rL2.tgz rL2 && rm -rf rL2
