#!/usr/bin/env bash
# After the launch-argument refactor of rode.rs: RoDe GPU tests and SpMM/SDDMM conformance.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
echo "== tests"; { timeout 100 $B/rode-test; echo "rc=$?"; } > $OUT/tests.log 2>&1; grep -E "test result|rc=" $OUT/tests.log
echo "== conformance"; timeout 200 $B/conformance --backend cuda --op spmm,sddmm --quick --corpus devrun/corpus > $OUT/conf.log 2>&1; echo rc=$?; grep "^total" $OUT/conf.log
