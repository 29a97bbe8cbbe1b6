#!/usr/bin/env bash
# rK4: the build of rK2 (7be71c2): bf16 forward alone at d = 64 and 128 on R-MAT 2^20 x 16, one head; four heads on R-MAT 2^18 x 16, f16 and bf16, forward alone and forward + backward.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rK4; mkdir -p $B $O
xz -dc devrun/bin4/spbench.xz > $B/spbench; chmod +x $B/spbench
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rK4.tgz rK4); }
S="--backend cuda --no-corpus --generators rmat --ops attention --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5 --k 64,128"
step h1-bf16-fwd 100 $B/spbench $S --large 118 --heads 1 --precisions bf16 --out $O/h1-bf16-fwd; pack
step h4-fwd 110 $B/spbench $S --large 30 --heads 4 --precisions f16,bf16 --out $O/h4-fwd; pack
step h4-fwd-bwd 140 $B/spbench $S --large 30 --heads 4 --precisions f16,bf16 --backward --out $O/h4-fwd-bwd; pack
rm -rf $O
