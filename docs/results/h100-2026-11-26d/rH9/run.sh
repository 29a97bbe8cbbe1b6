#!/usr/bin/env bash
# Attention conformance (forward and backward) on the generators and the 15 graph and GNN corpus
# matrices with the final build (the backward of rH1 and rH2).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH9; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step conformance-attention-graphs 400 $B/conformance --backend cuda --quick --corpus devrun/graphs --op attention --markdown $O/conformance-attention-graphs.md
cd $OUT && tar czf rH9.tgz rH9 && rm -rf rH9
