#!/usr/bin/env bash
# Conformance of SpMM, SDDMM and attention on every corpus matrix (three processes side by side), then SciPy's CG.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc RAYON_NUM_THREADS=5
B=/tmp/bin; O=$OUT/rB3b; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
for op in spmm sddmm attention; do
  ( timeout 480 $B/conformance --backend cuda --quick --corpus $M --op $op > $O/conf-corpus-$op.log 2>&1; echo "conf-corpus-$op rc=$? $((SECONDS-t0))s" >> $O/steps.txt ) &
done
wait
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
left=$((560 - SECONDS))
[ $left -gt 30 ] && step scipy-cg $left python3 scripts/solve-baselines.py --no-gpu --repeat 1 --matrices $M --poisson 128 --out $O/scipy.csv
cat $O/steps.txt
cd $OUT && tar czf rB3b.tgz rB3b && rm -rf rB3b
