#!/usr/bin/env bash
# RoDe SDDMM with every chunk of K pipelined, one chunk and many in kernels of their own: the RoDe test (K = 257 added, plans made for it), SDDMM conformance over the generators, memcheck of the RoDe test, and SDDMM at K = 64, 128, 256 against the kernel before (spbench-base) on 11 FEM, mesh and graph corpus matrices.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU3; M=/tmp/corpus; mkdir -p $B $O $M; cp devrun/su/*.mtx.gz $M/
for f in devrun/sd/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
step test-rode 100 $B/test-rode --test-threads=1
F="--backend cuda --ops sddmm --k 64,128,256 --precisions f64,f32 --formats csr --algorithms rode-deterministic --warmup-ms 20 --time-limit-s 1 --runs 10 --no-corpus --large 0"
step new 70 $B/spbench $F --out $O/new $M/*.mtx*
SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base step base 70 $B/spbench-base $F --out $O/base $M/*.mtx*
step conformance 130 $B/conformance --backend cuda --quick --op sddmm --no-corpus
step memcheck 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-rode --test-threads=1 rode_spmm_and_sddmm_match_the_oracle
rm -f $O/*/*.svg
cd $OUT && tar czf rU3.tgz rU3 && rm -rf rU3
