#!/usr/bin/env bash
# Tensor-core fused attention: GPU tests, benchmark on R-MAT 2^20 / 20M edges, corpus conformance, memcheck.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rC1; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 200 $B/test-attention --test-threads=1
step bench-attention 150 $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64,128 --precisions f32,f16,bf16 --algorithms fused,fused-tc --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/attn-h1
step conformance-attention 100 $B/conformance --backend cuda --quick --corpus $M --op attention --precision f16,bf16
step memcheck 120 compute-sanitizer --tool memcheck $B/test-attention --test-threads=1 small
cd $OUT && tar czf rC1.tgz rC1 && rm -rf rC1
