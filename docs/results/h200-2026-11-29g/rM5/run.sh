#!/usr/bin/env bash
# BSR SpMV in f64 on FEM matrices (fill): a lane a slot (the committed rule) against chunks of two slots (SPARSE_BSR_F64_K2, a local switch of this build) and 4602a7d (spbench-base), two rounds in turn.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rM5; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rn/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops spmv --precisions f64 --formats bsr --algorithms vector --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1 --no-corpus --large 0"
FEM="$M/bcsstk14.mtx $M/bcsstk16.mtx $M/cage10.mtx $M/nsjac.mtx $M/xenon1.mtx $M/brack2.mtx $M/copter2.mtx $M/dlmc_rn50_mp80_b2_g3_conv3x3.mtx $M/dnn_images1024_subset.mtx"
for round in 1 2; do
  step base-$round 60 $B/spbench-base $F --out $O/base-$round $FEM
  step k1-$round 60 $B/spbench-k $F --out $O/k1-$round $FEM
  SPARSE_BSR_F64_K2=1 step k2-$round 60 $B/spbench-k $F --out $O/k2-$round $FEM
done
rm -f $O/*/*.svg
cd $OUT && tar czf rM5.tgz rM5 && rm -rf rM5
