#!/usr/bin/env bash
# ef4e478 (spbench) against 958fca8 (spbench-base): SpMV on the corpus (45 of 49 matrices; the other four in rL5) and the large generated set with block-poisson3d, every CSR and COO kernel and cuSPARSE, f64, f32 and f16, as the README's table is measured; the base binary on the large set in f16.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL4; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step corpus 240 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32,f16 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20 --out $O/corpus
step large 240 $B/spbench --backend cuda --no-corpus --large 256 --generators poisson2d,poisson3d,block-poisson3d,rmat,uniform --ops spmv --precisions f64,f32,f16 --formats csr,coo --warmup-ms 20 --time-limit-s 2 --runs 10 --out $O/large
step large-base-f16 120 $B/spbench-base --backend cuda --no-corpus --large 256 --generators poisson3d,block-poisson3d --ops spmv --precisions f16 --formats csr --algorithms auto,scalar,vector --warmup-ms 20 --time-limit-s 2 --runs 10 --out $O/large-base-f16
rm -f $O/*/*.svg
cd $OUT && tar czf rL4.tgz rL4 && rm -rf rL4
