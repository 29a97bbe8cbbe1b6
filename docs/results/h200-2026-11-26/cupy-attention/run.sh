#!/usr/bin/env bash
# The solver test after the restart fix, CuPy's CG on the GPU, attention forward+backward and 4 heads.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_CORPUS=$PWD/devrun/matrices
B=/tmp/bin; O=$OUT/rB3a; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-solve 60 $B/test-solve --test-threads 1 --nocapture
step cupy-cg 120 python3 scripts/solve-baselines.py --no-cpu --matrices $M --poisson 128,160 --out $O/cupy.csv
step attn-fwd-bwd 180 $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64,128 --precisions f32 --algorithms fused --backward --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/attn-bwd
step attn-h4 150 $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64 --heads 4 --precisions f32 --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/attn-h4
cd $OUT && tar czf rB3a.tgz rB3a && rm -rf rB3a
