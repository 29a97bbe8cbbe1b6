#!/usr/bin/env bash
# Attention conformance with the backward checked (generators, and the graph and GNN corpus
# matrices), and the Magicube tests after the plans' phase laps were split again.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/dlmc
B=/tmp/bin; O=$OUT/rF7; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
step test-magicube 60 $B/test-magicube --test-threads=1
step test-magicube_modes 60 $B/test-magicube_modes --test-threads=1
step conformance-attention 90 $B/conformance --backend cuda --quick --no-corpus --op attention --markdown $O/conformance-attention.md
step conformance-attention-graphs 150 $B/conformance --backend cuda --quick --corpus devrun/graphs --op attention --markdown $O/conformance-attention-graphs.md
cd $OUT && tar czf rF7.tgz rF7 && rm -rf rF7
