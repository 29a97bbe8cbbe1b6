#!/usr/bin/env bash
# Attention kernels compiled for 6 blocks per multiprocessor (launch bounds) against the build
# before (spbench-old), on the same device in one call; the attention GPU test with the change.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
B=/tmp/bin; O=$OUT/rB6; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 120 $B/test-attention --test-threads 2
for v in old new; do
  bin=$B/spbench; [ $v = old ] && bin=$B/spbench-old
  export SPARSE_KERNEL_CACHE_DIR=/tmp/kc-$v
  step fwd-$v 80 $bin --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 128 --precisions f32 --algorithms fused --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/fwd-$v
  step bwd-$v 110 $bin --backend cuda --no-corpus --large 147 --generators rmat --ops attention --k 64,128 --precisions f32 --algorithms fused --backward --runs 5 --warmup-ms 20 --time-limit-s 2 --out $O/bwd-$v
done
step ncu-mma-probe 90 /usr/local/cuda/bin/ncu --section ComputeWorkloadAnalysis --section InstructionStats --kernel-name regex:mc_mma_probe $B/test-magicube --test-threads=1 integer_mma_rates --nocapture
cd $OUT && tar czf rB6.tgz rB6 && rm -rf rB6
