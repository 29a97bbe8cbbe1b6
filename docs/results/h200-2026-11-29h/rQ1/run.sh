#!/usr/bin/env bash
# SpMM auto handing wide f32 products of large skewed matrices to cuSPARSE: the RoDe test (with the new auto test), its memcheck, and auto against RoDe and cuSPARSE's default algorithm at N = 64, 128, 256.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rQ1; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cq/m.tar.xz | tar -C /tmp -xf -
for f in devrun/rq/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-rode 170 $B/test-rode --test-threads=1
F="--backend cuda --ops spmm --n 64,128,256 --precisions f32,f64 --formats csr --algorithms auto,rode-deterministic,vendor-default --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step corpus 90 $B/spbench $F --no-corpus --large 0 --out $O/corpus $M/musae_github.mtx $M/c-62.mtx $M/musae_facebook.mtx $M/NotreDame_www.mtx
step gen64 100 $B/spbench $F --no-corpus --large 64 --generators rmat --out $O/gen64
step memcheck-auto 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-rode --test-threads=1 auto_runs
rm -f $O/*/*.svg
cd $OUT && tar czf rQ1.tgz rQ1 && rm -rf rQ1
