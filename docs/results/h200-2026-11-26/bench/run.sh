#!/usr/bin/env bash
# Benchmarks: CG against CuPy and SciPy, attention against torch.sparse, the integer path.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rB2; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; python3 -c 'import cupy, scipy; print("cupy", cupy.__version__, "scipy", scipy.__version__)'; python3 -c 'import torch; print("torch", torch.__version__)'; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step solvebench 150 $B/solvebench --matrices $M --poisson 128,160 --backends cuda,cusparse --precond none,jacobi --check-every 1,8 --out $O/solve.csv
step solve-baselines 120 python3 scripts/solve-baselines.py --matrices $M --poisson 128,160 --out $O/solve-baselines.csv
step bench-attention 120 $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64,128 --precisions f32,f16,bf16 --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/attn-h1
step bench-attention-h4 90 $B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64,128 --heads 4 --precisions f32,f16 --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/attn-h4
step torch-attention 90 python3 scripts/torch-attention.py --edge-factor 20 --out $O/torch-attention.csv
step intbench 120 $B/intbench $O/intbench --corpus $M
cd $OUT && tar czf rB2.tgz rB2 && rm -rf rB2
