#!/usr/bin/env bash
# Probe: R-MAT 2^21 SpMV as generated, with columns relabelled by descending degree, and with rows and columns both relabelled.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rV1; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --formats csr,coo --no-corpus --large 256 --generators rmat --ops spmv --precisions f32,f64 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step plain 150 $S --out $O/plain
PROBE_SORT=cols step cols 150 $S --out $O/cols
PROBE_SORT=both step both 150 $S --out $O/both
rm -f $O/*/*.svg
cd $OUT && tar czf rV1.tgz rV1 && rm -rf rV1
