#!/usr/bin/env bash
# rJ3: the weighted sums with slices of 128 columns reading X's chunks from shared memory one at a time, held to 1 (no bound), 3 and 4 blocks a multiprocessor (ATTN_TC_GATHER_WIDE_BLOCKS): forward + backward at d = 128, R-MAT 2^20 x 16, one head, f16; ncu of the sums held to 3 and 4.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rJ3; mkdir -p $B $O
for f in devrun/bin/spbench.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rJ3.tgz rJ3); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
for n in 1 3 4; do
  SPARSE_EXPERIMENT_DEFINES="ATTN_TC_GATHER_WIDE_BLOCKS=$n" step wide$n 120 $B/spbench $S --backward --out $O/wide$n; pack
done
M=gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,local_load_bytes:l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum
S1="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 128 --precisions f16 --algorithms fused-tc --warmup-ms 1 --time-limit-s 0.1 --runs 1"
for n in 3 4; do
  SPARSE_EXPERIMENT_DEFINES="ATTN_TC_GATHER_WIDE_BLOCKS=$n" step ncu$n 100 /usr/local/cuda/bin/ncu --cache-control none --clock-control none -k regex:attention_tc_gather --launch-count 1 --metrics ${M/local_load_bytes:/} $B/spbench $S1 --backward --out $O/ncu$n; pack
done
rm -rf $O
