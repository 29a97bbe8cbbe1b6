#!/usr/bin/env bash
# SpMM and SDDMM auto handing wide products to cuSPARSE: the RoDe test (both auto tests), memcheck of the auto tests, and SDDMM auto at K = 64, 128, 256 and SpMM auto on R-MAT at N = 64, 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rQ2; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cs/m.tar.xz | tar -C /tmp -xf -
for f in devrun/rq/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-rode 150 $B/test-rode --test-threads=1
step memcheck-auto 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-rode --test-threads=1 auto_runs
F="--backend cuda --ops sddmm --k 64,128,256 --precisions f64,f32 --formats csr --algorithms auto --warmup-ms 20 --time-limit-s 1 --runs 10"
step sddmm 100 $B/spbench $F --no-corpus --large 15.5 --generators block-poisson3d,uniform --out $O/sddmm $M/*.mtx
rm -f $O/*/*.svg
cd $OUT && tar czf rQ2.tgz rQ2 && rm -rf rQ2
