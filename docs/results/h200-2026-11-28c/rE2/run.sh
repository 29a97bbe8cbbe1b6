#!/usr/bin/env bash
# rE1's pair again, the CSVs kept: 44014d7's build (spbench-base) and dQ made by the score kernel for KC <= 4 (spbench), forward + backward, R-MAT 2^20 x 16, one head, f16, d = 64 and 128; per-kernel times (ncu) of the new build at d = 64.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rE2; mkdir -p $B $O
for f in devrun/bin/spbench*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rE2.tgz rE2); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step base-fwd-bwd 120 $B/spbench-base $S --backward --out $O/base-fwd-bwd; pack
step new-fwd-bwd 120 $B/spbench $S --backward --out $O/new-fwd-bwd; pack
N="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64 --precisions f16 --algorithms fused-tc --backward --runs 3 --warmup-ms 0.01 --time-limit-s 0.01"
M="gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active"
step ncu-new-64 150 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention --launch-count 30 --metrics $M $B/spbench $N --out $O/ncu-new-64; pack
rm -rf $O
