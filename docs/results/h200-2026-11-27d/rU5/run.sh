#!/usr/bin/env bash
# fused-tc as committed, four heads: forward and forward+backward times, R-MAT 2^18 x 16, f16, d = 64 and 128; racecheck on the small cases.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rU5; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --large 30 --generators rmat --ops attention --heads 4 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step fwd-h4 120 $S --out $O/fwd-h4
step fwd-bwd-tc-h4 120 $S --backward --out $O/fwd-bwd-tc-h4
step racecheck-small 330 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases
rm -f $O/*/*.svg
cd $OUT && tar czf rU5.tgz rU5 && rm -rf rU5
