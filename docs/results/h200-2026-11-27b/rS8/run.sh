#!/usr/bin/env bash
# fused-tc at d = 128 (two warps sharing the scores) on every corpus matrix, f16 and bf16, checked against the oracle.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rS8; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step corpus-tc-d128 400 $B/spbench --backend cuda --corpus $M --large 0 --ops attention --k 128 --heads 2 --precisions f16,bf16 --algorithms fused-tc --runs 3 --warmup-ms 1 --time-limit-s 0.2 --out $O/corpus-tc-d128
rm -f $O/*/*.svg
cd $OUT && tar czf rS8.tgz rS8 && rm -rf rS8
