#!/usr/bin/env bash
# 806f307 (rU3's binaries): SDDMM at K = 256 in f64 and f32, `auto`, `vector`, RoDe and cuSPARSE on the 11 corpus matrices: where `auto` stands against cuSPARSE with the chunked RoDe kernel.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU5; M=/tmp/corpus; mkdir -p $B $O $M; cp devrun/su/*.mtx.gz $M/
xz -dc devrun/sd/spbench.xz > $B/spbench; chmod +x $B/spbench
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
step k256 150 $B/spbench --backend cuda --ops sddmm --k 256 --precisions f64,f32 --formats csr --algorithms auto,vector,rode-deterministic,vendor-default --warmup-ms 20 --time-limit-s 1 --runs 10 --no-corpus --large 0 --out $O/k256 $M/*.mtx*
rm -f $O/*/*.svg
cd $OUT && tar czf rU5.tgz rU5 && rm -rf rU5
