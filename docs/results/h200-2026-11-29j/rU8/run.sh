#!/usr/bin/env bash
# 806f307 (rU3's binaries): RoDe SDDMM at K = 512 (four chunks) against the kernel before (spbench-base), f32 and f64, on the 11 corpus matrices.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU8; M=/tmp/corpus; mkdir -p $B $O $M; cp devrun/su/*.mtx.gz $M/
for f in spbench spbench-base; do xz -dc devrun/sd/$f.xz > $B/$f; chmod +x $B/$f; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops sddmm --k 512 --precisions f64,f32 --formats csr --algorithms rode-deterministic --warmup-ms 20 --time-limit-s 1 --runs 10 --no-corpus --large 0"
SPARSE_KERNEL_CACHE_DIR=/tmp/kc step new 100 $B/spbench $F --out $O/new $M/*.mtx*
SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base step base 100 $B/spbench-base $F --out $O/base $M/*.mtx*
rm -f $O/*/*.svg
cd $OUT && tar czf rU8.tgz rU8 && rm -rf rU8
