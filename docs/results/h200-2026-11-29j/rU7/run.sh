#!/usr/bin/env bash
# f32 SDDMM `auto` on matrices under 100k entries keeps RoDe at every width: the RoDe test (its new `auto` check), memcheck of the `auto` tests, and `auto` at K = 128 and 256 against RoDe and cuSPARSE on the 15 corpus matrices of mean rows of 20 or more.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU7; M=/tmp/corpus; mkdir -p $B $O $M; cp devrun/sw/*.mtx.gz $M/
for f in devrun/se/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
step test-rode 120 $B/test-rode --test-threads=1
step memcheck-auto 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-rode --test-threads=1 auto_runs
step wide 120 $B/spbench --backend cuda --ops sddmm --k 128,256 --precisions f64,f32 --formats csr --algorithms auto,rode-deterministic,vendor-default --warmup-ms 20 --time-limit-s 1 --runs 10 --no-corpus --large 0 --out $O/wide $M/*.mtx*
rm -f $O/*/*.svg
cd $OUT && tar czf rU7.tgz rU7 && rm -rf rU7
