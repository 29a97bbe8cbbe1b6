#!/usr/bin/env bash
# Device run 1: merge-path correctness and SpMV timings for calibration.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=devrun/bin; O=$OUT/r1; mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
$B/conformance --backend cuda --quick --no-corpus --op spmv --markdown $O/conf-gen.md > $O/conf-gen.log 2>&1; echo "conf-gen rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt
$B/conformance --backend cuda --quick --corpus devrun/matrices --op spmv --markdown $O/conf-corpus.md > $O/conf-corpus.log 2>&1; echo "conf-corpus rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt
tail -5 $O/conf-gen.log $O/conf-corpus.log
$B/spbench --backend cuda --corpus devrun/matrices --large 256 --generators poisson2d,poisson3d,rmat,uniform --ops spmv --precisions f64,f32,f16 --runs 20 --warmup-ms 50 --time-limit-s 2 --out $O/bench > $O/bench.log 2>&1; echo "bench rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt
tail -3 $O/bench.log
cd $OUT && tar czf r1.tgz r1 && rm -rf r1
