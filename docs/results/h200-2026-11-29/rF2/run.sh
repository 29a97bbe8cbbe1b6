#!/usr/bin/env bash
# rF2 (rF1 with the gather's last scaling kept as a branch, and the forward's loads as before): the tensor-core backward with fewer instructions a block (whole-run loads without a branch a load, no X test when the score kernel saw only finite S and dP, the factor applied once) (spbench) against 424cd15 (spbench-base): forward + backward, R-MAT 2^20 x 16, one head, f16, d = 64 and 128; then the edge-case attention tests and the NaN-row test.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rF2; mkdir -p $B $O
for f in devrun/bin/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rF2.tgz rF2); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step new-fwd-bwd 130 $B/spbench $S --backward --out $O/new-fwd-bwd; pack
step base-fwd-bwd 120 $B/spbench-base $S --backward --out $O/base-fwd-bwd; pack
step test-attention 320 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan; pack
rm -rf $O
