#!/usr/bin/env bash
# Attention in f16 on the corpus graphs: `fused` (CUDA cores) against `fused-tc` (tensor cores), one and four heads, d = 64 and 128, forward and forward + backward: where `auto` should take `fused`.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rT1; mkdir -p $B $O
xz -dc devrun/ga/spbench.xz > $B/spbench; chmod +x $B/spbench
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
A="--backend cuda --no-corpus --large 0 --ops attention --k 64,128 --precisions f16 --algorithms fused,fused-tc --warmup-ms 10 --time-limit-s 0.5 --runs 10"
step h1 100 $B/spbench devrun/ga/*.mtx.gz $A --heads 1 --out $O/h1
step h4 100 $B/spbench devrun/ga/*.mtx.gz $A --heads 4 --out $O/h4
step h1-bwd 100 $B/spbench devrun/ga/*.mtx.gz $A --heads 1 --backward --out $O/h1-bwd
rm -f $O/*/*.svg
cd $OUT && tar czf rT1.tgz rT1 && rm -rf rT1
