#!/usr/bin/env bash
# rG2: rG1 with the scores' Q and dO runs copied into shared memory by cp.async one block ahead and the terms as (m + ln l, D): forward + backward, R-MAT 2^20 x 16, one head, f16, d = 64 and 128; the edge-case attention tests; ncu kernel times at d = 64.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rG2; mkdir -p $B $O
for f in devrun/bin/spbench.xz devrun/bin/test-attention.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rG2.tgz rG2); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step new-fwd-bwd 130 $B/spbench $S --backward --out $O/new-fwd-bwd; pack
step test-attention 300 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan; pack
M=gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__throughput.avg.pct_of_peak_sustained_elapsed
step ncu-64 150 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention_tc --launch-count 9 --metrics $M $B/spbench ${S/--k 64,128/--k 64} --runs 1 --backward --out $O/ncu-64; pack
rm -rf $O
