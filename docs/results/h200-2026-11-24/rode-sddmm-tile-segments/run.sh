#!/usr/bin/env bash
# RoDe shorter minimum segments (SDDMM, then SpMM): tests and conformance of the SDDMM change;
# benchmark of the three variants over the corpus matrices of 2.6k to 578k entries.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc PATH=$PATH:/usr/local/cuda/bin
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
echo "== tests"; { timeout 100 $B/rode-test; echo "rc=$?"; timeout 60 $B/unit-test decomposition; echo "rc=$?"; } > $OUT/tests.log 2>&1; grep -E "test result|rc=|FAIL|panick" $OUT/tests.log
echo "== conformance"; timeout 120 $B/conformance --backend cuda --op sddmm --quick --corpus devrun/corpus > $OUT/conf.log 2>&1; echo rc=$?; grep "^total" $OUT/conf.log
FILES=$(awk -F'\t' 'NR>1 && $4>=2000 && $4<=600000 {print "devrun/corpus/"$1}' devrun/corpus/MANIFEST.tsv)
run() { echo "== bench $1 $2"; timeout 200 $B/spbench-$1 --backend cuda --no-corpus $FILES --large 0 --ops $2 --precisions f32 --n 32,128 --k 32 --warmup-ms 20 --runs 20 --time-limit-s 0.5 --out $W/$1-$2 > $W/$1-$2.log 2> $W/$1-$2.err; echo rc=$?; tail -1 $W/$1-$2.err; cp $W/$1-$2/results.csv $OUT/$1-$2.csv; }
run v1 spmm,sddmm
run v0 sddmm
run v2 spmm
