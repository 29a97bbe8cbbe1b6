#!/usr/bin/env bash
# The large generated set (SpMV, every CSR/COO kernel and cuSPARSE) and attention at wide heads (fused vs unfused).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rS4; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step spmv-large 330 $B/spbench --backend cuda --no-corpus --large 256 --ops spmv --precisions f64,f32 --formats csr,coo --warmup-ms 20 --time-limit-s 2 --runs 10 --out $O/spmv-large
step attention-wide 200 $B/spbench --backend cuda --no-corpus --large 8 --generators rmat --ops attention --k 256,512,1024 --precisions f32,f16 --algorithms fused,fused-tc,unfused --warmup-ms 20 --time-limit-s 1 --runs 10 --out $O/attention-wide
rm -f $O/*/*.svg
cd $OUT && tar czf rS4.tgz rS4 && rm -rf rS4
