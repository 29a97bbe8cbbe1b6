#!/usr/bin/env bash
# rK1: the f32 `fused` forward with long rows cut into pieces of 256 entries (a warp each, combined in order) and the scores by groups of lanes with 16-byte loads, against the committed build (spbench-base): tests, memcheck, conformance, R-MAT 2^20 x 20 and x 16 forward (and forward + backward at d = 64).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=$PWD/devrun/graphs
B=/tmp/bin; O=$OUT/rK1; mkdir -p $B $O
for f in devrun/at/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rK1.tgz rK1); }
S="--backend cuda --no-corpus --generators rmat --ops attention --heads 1 --algorithms fused --precisions f32 --warmup-ms 20 --time-limit-s 1 --runs 5"
step base-e20 90 $B/spbench-base $S --large 147 --k 64,128 --out $O/base-e20; pack
step new-e20 90 $B/spbench-new $S --large 147 --k 64,128 --out $O/new-e20; pack
step new-e16 70 $B/spbench-new $S --large 118 --k 64,128 --out $O/new-e16; pack
step test-attention 240 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan every_corpus_graph_meets_the_oracle_forward_and_backward_in_f32 auto_in_f32; pack
step memcheck 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases; pack
step conformance 120 $B/conformance --backend cuda --quick --op attention --precision f32,f16 --no-corpus; pack
step new-e20-bwd 60 $B/spbench-new $S --large 147 --k 64 --backward --out $O/new-e20-bwd; pack
step base-e20-bwd 60 $B/spbench-base $S --large 147 --k 64 --backward --out $O/base-e20-bwd; pack
rm -rf $O
