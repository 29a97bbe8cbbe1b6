#!/usr/bin/env bash
# The unfused attention pipeline in f16 and bf16, and the i8 Blocked-ELL test with B column-major.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rD3; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-blocked-ell 60 $B/test-magicube --test-threads=1 cusparse_
step test-attention 240 $B/test-attention --test-threads=1
step conformance-attention 150 $B/conformance --backend cuda --quick --corpus $M --op attention --precision f16,bf16
step conformance-spmv 150 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32
step memcheck-attention 90 compute-sanitizer --tool memcheck $B/test-attention --test-threads=1 small
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --runs 5"
step attn-f16 150 $S --large 30 --k 64 --precisions f16 --algorithms unfused,fused,fused-tc --out $O/attn-f16
cd $OUT && tar czf rD3.tgz rD3 && rm -rf rD3
