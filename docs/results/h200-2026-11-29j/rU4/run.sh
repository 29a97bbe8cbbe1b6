#!/usr/bin/env bash
# 806f307 (rU3's binaries): SDDMM conformance over 11 corpus matrices (f64, f32, f16), and RoDe SDDMM at K = 128 and 256 against the kernel before (spbench-base) on generated uniform, Poisson 3D and block-stencil matrices.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU4; M=/tmp/corpus; mkdir -p $B $O $M; cp devrun/su/*.mtx.gz $M/
for f in devrun/sd/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
F="--backend cuda --ops sddmm --k 128,256 --precisions f64,f32 --formats csr --algorithms rode-deterministic --warmup-ms 20 --time-limit-s 1 --runs 10 --no-corpus --large 15.5 --generators uniform,poisson3d,block-poisson3d"
step gen 70 $B/spbench $F --out $O/gen
SPARSE_KERNEL_CACHE_DIR=/tmp/kc-base step gen-base 70 $B/spbench-base $F --out $O/gen-base
step conformance 420 $B/conformance --backend cuda --quick --op sddmm --corpus $M
tail -c 20000 $O/conformance.log > $O/conformance-tail.log; grep -v " pass$" $O/conformance.log | head -200 > $O/conformance-not-passed.log; rm $O/conformance.log
rm -f $O/*/*.svg
cd $OUT && tar czf rU4.tgz rU4 && rm -rf rU4
