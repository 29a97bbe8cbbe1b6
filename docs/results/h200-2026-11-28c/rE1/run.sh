#!/usr/bin/env bash
# fused-tc backward with dQ made by the score kernel (spbench: for KC <= 4 by default, SPARSE_DQ_CHUNKS=2 for KC <= 2 only) against 44014d7's build (spbench-base): edge-case attention tests in both settings; spbench forward (base) and forward + backward (all three), R-MAT 2^20 x 16, one head, f16, d = 64 and 128.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rE1; mkdir -p $B $O
for f in devrun/bin/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-attention 150 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite
SPARSE_DQ_CHUNKS=2 step test-attention-dq2 150 $B/test-attention --test-threads=4 attention_meets
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step base-fwd-bwd 120 $B/spbench-base $S --backward --out $O/base-fwd-bwd
step new-fwd-bwd 120 $B/spbench $S --backward --out $O/new-fwd-bwd
SPARSE_DQ_CHUNKS=2 step dq2-fwd-bwd 120 $B/spbench $S --backward --out $O/dq2-fwd-bwd
step base-fwd 120 $B/spbench-base $S --out $O/base-fwd
rm -f $O/*/*.svg
cd $OUT && tar czf rE1.tgz rE1 && rm -rf rE1
