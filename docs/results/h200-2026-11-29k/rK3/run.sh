#!/usr/bin/env bash
# rK3: `fused` (c143b2a, spbench-new) against the unfused pipeline on the graphs where `auto` in f32 takes the pipeline (rows and columns of at most 64 entries, 2^20 entries or more): uniform and Poisson 3D (--large 30), f32, one head, forward at d = 64 and 128, forward + backward at d = 64.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rK3; mkdir -p $B $O
xz -dc devrun/at/spbench-new.xz > $B/spbench; chmod +x $B/spbench
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rK3.tgz rK3); }
A="--backend cuda --no-corpus --large 30 --generators uniform,poisson3d --ops attention --precisions f32 --algorithms fused,unfused,auto --heads 1 --warmup-ms 10 --time-limit-s 0.4 --runs 5"
step fwd 120 $B/spbench $A --k 64,128 --out $O/fwd; pack
step bwd 120 $B/spbench $A --k 64 --backward --out $O/bwd; pack
rm -rf $O
