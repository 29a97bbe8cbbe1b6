#!/usr/bin/env bash
# rG1: the tensor-core backward with dK and dV made over A^T's windows from the gathered Q and dO rows that score them (spbench): forward + backward and forward alone, R-MAT 2^20 x 16, one head, f16, d = 64 and 128; the edge-case attention tests and the NaN-row test.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rG1; mkdir -p $B $O
for f in devrun/bin/spbench.xz devrun/bin/test-attention.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { rm -f $O/*/*.svg; (cd $OUT && tar czf rG1.tgz rG1); }
S="--backend cuda --no-corpus --large 118 --generators rmat --ops attention --heads 1 --k 64,128 --precisions f16 --algorithms fused-tc --warmup-ms 20 --time-limit-s 1 --runs 5"
step new-fwd-bwd 130 $B/spbench $S --backward --out $O/new-fwd-bwd; pack
step test-attention 300 $B/test-attention --test-threads=4 attention_meets heads_that an_infinite a_nan; pack
step new-fwd 100 $B/spbench $S --out $O/new-fwd; pack
rm -rf $O
