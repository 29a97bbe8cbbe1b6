#!/usr/bin/env bash
# CSR `vector` in the streaming shape (a lane for about four entries, four steps' loads together) on large, local, regular matrices, and `auto` taking it from 6 entries a row (spbench) against 958fca8 (spbench-base): GPU tests, SpMV conformance over the generators and 45 corpus matrices, memcheck, the large generated set with block-poisson3d, medium sizes, the corpus under `auto`.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL3; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step test-spmv_auto 150 $B/test-spmv_auto --test-threads=1
step test-spmv_formats 120 $B/test-spmv_formats --test-threads=1
step test-tuning 120 $B/test-tuning --test-threads=1
step conformance-spmv 200 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-spmv_auto 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-spmv_auto --test-threads=1 auto_follows
for bin in spbench spbench-base; do
  step large-$bin 150 $B/$bin $F --no-corpus --large 256 --generators poisson2d,poisson3d,block-poisson3d,rmat,uniform --formats csr,coo --out $O/large-$bin
done
for mb in 5 9.5 15.5 64; do for bin in spbench spbench-base; do
  step mid-$mb-$bin 80 $B/$bin $F --no-corpus --large $mb --generators poisson2d,poisson3d,block-poisson3d --formats csr --algorithms auto,scalar,vector --out $O/mid-$mb-$bin
done; done
for bin in spbench spbench-base; do step corpus-$bin 150 $B/$bin $F --no-corpus --large 0 --formats csr --algorithms auto --out $O/corpus-$bin $M/*.mtx; done
rm -f $O/*/*.svg
cd $OUT && tar czf rL3.tgz rL3 && rm -rf rL3
