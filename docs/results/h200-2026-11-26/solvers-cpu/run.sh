#!/usr/bin/env bash
# CG on the CPU (16 cores) against its bound, three runs in a row, the fastest of 5 solves each.
set -uo pipefail
B=/tmp/bin; O=$OUT/rB9; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ date -u; lscpu | grep -E "Model name|^CPU\(s\)|L3"; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
for i in 1 2 3; do
  step solvebench-cpu-$i 150 $B/solvebench --no-corpus --poisson 64,96,128 --backends cpu --precond none,jacobi --check-every 1 --repeat 5 --out $O/solve-cpu-$i.csv
done
cd $OUT && tar czf rB9.tgz rB9 && rm -rf rB9
