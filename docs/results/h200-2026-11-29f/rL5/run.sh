#!/usr/bin/env bash
# The rule with rows of 64 bytes or more (spbench, test-spmv_auto): the rule's GPU test and memcheck, SpMV conformance over the generators and the four corpus matrices rL3 and rL4 could not carry, SpMV on those four as rL4 measured the others, and the large generated set again.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL5; M=/tmp/big4; mkdir -p $B $O; xz -dc devrun/cx2/big4.tar.xz | tar -C /tmp -xf -
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_auto 150 $B/test-spmv_auto --test-threads=1
step memcheck-spmv_auto 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-spmv_auto --test-threads=1
step conformance-spmv 200 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step corpus 150 $B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32,f16 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20 --out $O/corpus
step large 240 $B/spbench --backend cuda --no-corpus --large 256 --generators poisson2d,poisson3d,block-poisson3d,rmat,uniform --ops spmv --precisions f64,f32,f16 --formats csr,coo --warmup-ms 20 --time-limit-s 2 --runs 10 --out $O/large
rm -f $O/*/*.svg
cd $OUT && tar czf rL5.tgz rL5 && rm -rf rL5
