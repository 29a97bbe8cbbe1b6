#!/usr/bin/env bash
# rK2: the f32 `fused` forward with K and V rows taking predicated vector loads chosen once per tile (spbench-new), against the first build of pieces and groups (spbench-p1, rK1) and the committed build before both (spbench-base): R-MAT 2^20 x 20 and x 16, d = 64 and 128, one head, and four heads of 64 on R-MAT 2^18 x 16; tests, memcheck, conformance.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=$PWD/devrun/graphs
B=/tmp/bin; O=$OUT/rK2; mkdir -p $B $O
for f in devrun/at/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rK2.tgz rK2); }
S="--backend cuda --no-corpus --generators rmat --ops attention --algorithms fused --precisions f32 --warmup-ms 20 --time-limit-s 1 --runs 5"
step new-e20 130 $B/spbench-new $S --heads 1 --large 147 --k 64,128 --out $O/new-e20; pack
step p1-e20 110 $B/spbench-p1 $S --heads 1 --large 147 --k 128 --out $O/p1-e20; pack
step test-attention 230 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan every_corpus_graph_meets_the_oracle_forward_and_backward_in_f32 auto_in_f32; pack
step memcheck 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases; pack
step conformance 60 $B/conformance --backend cuda --quick --op attention --precision f32,f16 --no-corpus; pack
rm -rf $O
