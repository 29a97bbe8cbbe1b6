#!/usr/bin/env bash
# The solvers as committed (restart from b - Ax, stop when a restart no longer lowers it): the GPU
# test, CG time to solution on the GPU again, and on the CPU (16 cores) against its bound.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rB7; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; nproc; lscpu | grep -E "Model name|^CPU\(s\)"; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-solve 60 $B/test-solve --test-threads 1 --nocapture
step solvebench-gpu 150 $B/solvebench --matrices $M --poisson 128,160 --backends cuda --precond none,jacobi --check-every 1,8 --out $O/solve-gpu.csv
step solvebench-cpu 240 $B/solvebench --no-corpus --poisson 64,96 --backends cpu --precond none,jacobi --check-every 1 --repeat 2 --out $O/solve-cpu.csv
cd $OUT && tar czf rB7.tgz rB7 && rm -rf rB7
