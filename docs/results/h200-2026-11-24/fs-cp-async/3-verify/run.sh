#!/usr/bin/env bash
# FlashSparse SpMM through the two-stage cp.async pipeline: GPU tests, conformance of every CUDA
# SpMM in f16 and tf32 over the generators and the 49 corpus matrices, compute-sanitizer memcheck
# and racecheck (the shared-memory stages) over the generators up to 3,000 entries.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc PATH=$PATH:/usr/local/cuda/bin
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
echo "== tests"; { timeout 120 $B/fs-test; echo "rc=$?"; } > $OUT/tests.log 2>&1; grep -E "test result|rc=" $OUT/tests.log
echo "== conformance"; timeout 240 $B/conformance --backend cuda --op spmm --precision f16,tf32 --quick --corpus devrun/corpus > $OUT/conf.log 2>&1; echo rc=$?; grep "^total" $OUT/conf.log
echo "== memcheck"; timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $B/conformance --backend cuda --op spmm --precision f16,tf32 --quick --no-corpus --max-nnz 3000 > $W/memcheck.log 2>&1; echo rc=$?; grep -E "^total|ERROR SUMMARY" $W/memcheck.log
echo "== racecheck"; timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $B/conformance --backend cuda --op spmm --precision f16,tf32 --quick --no-corpus --max-nnz 3000 > $W/racecheck.log 2>&1; echo rc=$?; grep -E "^total|RACECHECK SUMMARY" $W/racecheck.log
{ grep -E "^total|ERROR SUMMARY" $W/memcheck.log; grep -E "^total|RACECHECK SUMMARY" $W/racecheck.log; } > $OUT/sanitizers.log
tail -c 20000 $W/racecheck.log > $OUT/racecheck-tail.log
