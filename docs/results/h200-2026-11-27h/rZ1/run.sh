#!/usr/bin/env bash
# Experiment: R-MAT SpMV with columns relabelled by descending degree (SPBENCH_SORT_COLS) against the generator's labels, every CSR/COO kernel and cuSPARSE.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rZ1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for mb in 256 96; do
  S="--backend cuda --formats csr,coo --no-corpus --large $mb --generators rmat --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
  step rmat-$mb 150 $B/spbench $S --out $O/rmat-$mb
  step rmat-sorted-$mb 150 env SPBENCH_SORT_COLS=1 $B/spbench $S --out $O/rmat-sorted-$mb
done
rm -f $O/*/*.svg
cd $OUT && tar czf rZ1.tgz rZ1 && rm -rf rZ1
