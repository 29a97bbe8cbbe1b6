#!/usr/bin/env bash
# The attention backward's row pass capped at 64 registers for heads up to 128 columns: forward
# alone and forward + backward on the R-MAT graph of docs/attention.md (as in rG6), the kernels'
# register use, and the attention conformance on the generators.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rG8; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --precisions f32 --algorithms fused"
step forward 150 $S --k 64,128 --out $O/forward
step backward 150 $S --k 64,128 --backward --out $O/backward
for f in /tmp/kc/*; do tail -n +2 "$f" > /tmp/k.cubin 2>/dev/null; /usr/local/cuda/bin/cuobjdump -res-usage /tmp/k.cubin 2>/dev/null | grep -A1 attention; done > $O/res-usage.txt
step conformance-attention 150 $B/conformance --backend cuda --quick --no-corpus --op attention --markdown $O/conformance-attention.md
cd $OUT && tar czf rG8.tgz rG8 && rm -rf rG8
