#!/usr/bin/env bash
# After merging the solvers, attention and Magicube: every GPU test, conformance, sanitizers.
set -uo pipefail
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_CORPUS=$PWD/devrun/matrices
B=/tmp/bin; O=$OUT/rB1; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
CS=/usr/local/cuda/bin/compute-sanitizer
for t in solve attention magicube; do step test-$t 120 $B/test-$t --test-threads 2 --nocapture; done
for t in spmv_auto spmv_formats tilespmv rode flashsparse cusparse_spmv; do step test-$t 60 $B/test-$t --test-threads 4; done
step conf-cuda-gen 150 $B/conformance --backend cuda --quick --no-corpus
step conf-cuda-corpus 150 $B/conformance --backend cuda --quick --corpus $M --op spmm,sddmm,attention
step memcheck-attention 90 $CS --tool memcheck --error-exitcode 9 $B/test-attention small --test-threads 1
step memcheck-magicube 90 $CS --tool memcheck --error-exitcode 9 $B/test-magicube spmm_is_exact --test-threads 1
step memcheck-solve 90 $CS --tool memcheck --error-exitcode 9 $B/test-solve vector_operations --test-threads 1
step racecheck-attention 90 $CS --tool racecheck --error-exitcode 9 $B/test-attention small --test-threads 1
cd $OUT && tar czf rB1.tgz rB1 && rm -rf rB1
