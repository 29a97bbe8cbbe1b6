#!/usr/bin/env bash
# The unfused attention backward (f32, f16, bf16): tests, memcheck, and its time beside fused's.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rD4; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 300 $B/test-attention --test-threads=1
step memcheck-attention 120 compute-sanitizer --tool memcheck $B/test-attention --test-threads=1 small
step racecheck-attention 120 compute-sanitizer --tool racecheck $B/test-attention --test-threads=1 small
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --runs 5 --large 30 --k 64"
step attn-f32-fwd 100 $S --precisions f32 --algorithms unfused,fused --out $O/attn-f32-fwd
step attn-f32-bwd 100 $S --precisions f32 --algorithms unfused,fused --backward --out $O/attn-f32-bwd
cd $OUT && tar czf rD4.tgz rD4 && rm -rf rD4
