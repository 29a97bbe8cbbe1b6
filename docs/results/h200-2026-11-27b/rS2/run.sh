#!/usr/bin/env bash
# vector-split variants A/B/C/D on the corpus (build-time switches of this binary only).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rS2; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32 --formats csr --algorithms vector-split,vector --warmup-ms 20 --time-limit-s 1 --runs 20"
step A 120 $S --out $O/A
SPARSE_EXPERIMENT_DEFINES="-DSPLIT_ROWS_LOOP" step B 120 $S --out $O/B
SPARSE_EXPERIMENT_DEFINES="-DSPLIT_ROWS_LOOP -DSPLIT_SEGS_LOOP" step C 120 $S --out $O/C
SPARSE_SPLIT_LONG=64 SPARSE_EXPERIMENT_DEFINES="-DSPLIT_ROWS_LOOP" step D 120 $S --out $O/D
SPARSE_SPLIT_LONG=256 SPARSE_EXPERIMENT_DEFINES="-DSPLIT_ROWS_LOOP" step E 120 $S --out $O/E
rm -f $O/*/*.svg
cd $OUT && tar czf rS2.tgz rS2 && rm -rf rS2
