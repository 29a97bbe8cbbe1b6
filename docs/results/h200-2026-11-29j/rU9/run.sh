#!/usr/bin/env bash
# `vector` SDDMM issuing the loads of K past W*V before the first span's products: SDDMM conformance over the generators, and `vector` at K = 128 and 256 against the kernel before (spbench-base) on the 11 corpus matrices.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU9; M=/tmp/corpus; mkdir -p $B $O $M; cp devrun/su/*.mtx.gz $M/
for f in devrun/sv/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops sddmm --k 128,256 --precisions f64,f32 --formats csr --algorithms vector --warmup-ms 20 --time-limit-s 1 --runs 10 --no-corpus --large 0"
SPARSE_KERNEL_CACHE_DIR=/tmp/kc step new 70 $B/spbench $F --out $O/new $M/*.mtx*
SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base step base 70 $B/spbench-base $F --out $O/base $M/*.mtx*
SPARSE_KERNEL_CACHE_DIR=/tmp/kc step conformance 80 $B/conformance --backend cuda --quick --op sddmm --no-corpus
rm -f $O/*/*.svg
cd $OUT && tar czf rU9.tgz rU9 && rm -rf rU9
