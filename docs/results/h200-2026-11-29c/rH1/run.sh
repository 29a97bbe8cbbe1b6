#!/usr/bin/env bash
# CSR SpMV streams (indices, values) loaded without L1 allocation, x gathers with L1/L2 eviction hints: tests, then the large set and the corpus per variant (SPARSE_EXPERIMENT_DEFINES).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=
B=/tmp/bin; O=$OUT/rH1; M=$(ls -d shared/matrices ../shared/matrices 2>/dev/null | head -1); mkdir -p $B $O; echo "matrices: $M" > $O/where.txt
export SPARSE_CORPUS=$M
for f in devrun/bin/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-spmv_formats 60 $B/test-spmv_formats --test-threads=1
step test-spmv_auto 60 $B/test-spmv_auto --test-threads=1
L="--backend cuda --no-corpus --large 256 --ops spmv --precisions f64,f32 --formats csr,coo --warmup-ms 20 --time-limit-s 2 --runs 10"
C="--backend cuda --corpus $M --large 0 --ops spmv --precisions f64,f32 --formats csr,coo --warmup-ms 20 --time-limit-s 1 --runs 20"
for v in s0:STREAM_HINT=0 s1:STREAM_HINT=1 s2:STREAM_HINT=2 s1x1:STREAM_HINT=1,X_HINT=1 s2x2:STREAM_HINT=2,X_HINT=2; do
  SPARSE_EXPERIMENT_DEFINES=${v#*:} step large-${v%%:*} 90 $B/spbench $L --out $O/large-${v%%:*}
done
for v in s0:STREAM_HINT=0 s1:STREAM_HINT=1; do
  SPARSE_EXPERIMENT_DEFINES=${v#*:} step corpus-${v%%:*} 120 $B/spbench $C --out $O/corpus-${v%%:*}
done
NCU="/usr/local/cuda/bin/ncu --cache-control all --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis"
R="--backend cuda --no-corpus --large 256 --generators rmat --ops spmv --precisions f64 --runs 1 --warmup-ms 1 --batch-ms 0.01 --time-limit-s 1 --algorithms vector-split --formats csr"
for v in s0:STREAM_HINT=0 s1:STREAM_HINT=1; do
  SPARSE_EXPERIMENT_DEFINES=${v#*:} step ncu-rmat-${v%%:*} 90 $NCU -k "regex:^spmv_" --launch-count 1 $B/spbench $R --out $O/ncu-rmat-${v%%:*}
done
rm -f $O/*/*.svg
cd $OUT && tar czf rH1.tgz rH1 && rm -rf rH1
