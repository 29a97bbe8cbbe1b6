#!/usr/bin/env bash
# fused-tc (f16) and fused (f32) with 4 heads of 64 columns on R-MAT 2^20 x 20, same machine.
# Run twice on the warm machine: the first call's f16 step ran out of its 170 s and the f32 step
# passed; the second ran the f16 step alone with 255 s.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rT3; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --generators rmat --ops attention --warmup-ms 20 --time-limit-s 2 --runs 10 --large 147 --k 64 --heads 4"
step e20-h4-f16 255 $S --precisions f16 --algorithms fused-tc --out $O/e20-h4-f16
step e20-h4-f32 170 $S --precisions f32 --algorithms fused --out $O/e20-h4-f32
rm -f $O/*/*.svg
cd $OUT && tar czf rT3.tgz rT3 && rm -rf rT3
