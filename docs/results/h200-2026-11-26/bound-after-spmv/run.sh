#!/usr/bin/env bash
# CG against its bound with the vector operations timed after an SpMV (as in a solve), on the CPU
# (16 cores, the CG update and Jacobi scaling now one pass each) and the GPU; the GPU solve test.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rB8; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; lscpu | grep -E "Model name|^CPU\(s\)|L3"; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-solve 60 $B/test-solve --test-threads 1
step solvebench-cpu 200 $B/solvebench --no-corpus --poisson 64,96,128 --backends cpu --precond none,jacobi --check-every 1 --repeat 2 --out $O/solve-cpu.csv
step solvebench-gpu 150 $B/solvebench --no-corpus --poisson 128,160 --backends cuda --precond none,jacobi --check-every 1,8 --out $O/solve-gpu.csv
cd $OUT && tar czf rB8.tgz rB8 && rm -rf rB8
