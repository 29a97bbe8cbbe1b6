#!/usr/bin/env bash
# The split-window combine loading its partials 8 at a time, one block row per row: GPU tests,
# conformance (f16, tf32 SpMM), memcheck and racecheck; then FlashSparse alone (f16, tf32;
# N = 32, 128, 256) against the commit before (spbench-base), and with tasks down to 32
# vectors (spbench-min32), on the 25 corpus matrices of 100k+ entries.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc PATH=$PATH:/usr/local/cuda/bin
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
echo "== tests"; { timeout 120 $B/fs-test; echo "rc=$?"; } > $OUT/tests.log 2>&1; grep -E "test result|rc=" $OUT/tests.log
echo "== conformance"; timeout 240 $B/conformance --backend cuda --op spmm --precision f16,tf32 --quick --corpus devrun/corpus > $OUT/conf.log 2>&1; echo rc=$?; grep "^total" $OUT/conf.log
echo "== memcheck"; timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $B/conformance --backend cuda --op spmm --precision f16,tf32 --quick --no-corpus --max-nnz 3000 > $W/memcheck.log 2>&1; echo rc=$?; grep -E "^total|ERROR SUMMARY" $W/memcheck.log
echo "== racecheck"; timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $B/conformance --backend cuda --op spmm --precision f16,tf32 --quick --no-corpus --max-nnz 3000 > $W/racecheck.log 2>&1; echo rc=$?; grep -E "^total|RACECHECK SUMMARY" $W/racecheck.log
{ grep -E "^total|ERROR SUMMARY" $W/memcheck.log; grep -E "^total|RACECHECK SUMMARY" $W/racecheck.log; } > $OUT/sanitizers.log
M="devrun/corpus/wiki-Vote.mtx.gz devrun/corpus/dlmc_rn50_mp80_b2_g3_conv3x3.mtx.gz devrun/corpus/dnn_images1024_subset.mtx.gz devrun/corpus/memplus.mtx.gz devrun/corpus/cage10.mtx.gz devrun/corpus/PROTEINS_full.mtx.gz devrun/corpus/delaunay_n15.mtx.gz devrun/corpus/dlmc_rn50_rp90_b2_g4_conv3x3.mtx.gz devrun/corpus/astro-ph.mtx.gz devrun/corpus/dlmc_tf_vd_80_dec5_ffn2.mtx.gz devrun/corpus/bcsstk16.mtx.gz devrun/corpus/rgg_n_2_15_s0.mtx.gz devrun/corpus/musae_facebook.mtx.gz devrun/corpus/nsjac.mtx.gz devrun/corpus/dlmc_rn50_emp98_final_dense.mtx.gz devrun/corpus/facebook_MIT8.mtx.gz devrun/corpus/c-62.mtx.gz devrun/corpus/musae_github.mtx.gz devrun/corpus/copter2.mtx.gz devrun/corpus/brack2.mtx.gz devrun/corpus/dlmc_tf_mp95_embedding.mtx.gz devrun/corpus/NotreDame_www.mtx.gz devrun/corpus/mdual.mtx.gz devrun/corpus/dlmc_rn50_mp50_proj_g4.mtx.gz devrun/corpus/xenon1.mtx.gz "
for v in spbench spbench-base spbench-min32; do
  timeout 100 $B/$v --backend cuda --no-corpus $M --large 0 --ops spmm --precisions f16,tf32 --algorithms flashsparse --n 32,128,256 --warmup-ms 30 --runs 20 --time-limit-s 1 --out $W/$v > $W/$v.log 2> $W/$v.err; echo "$v rc=$?"; tail -1 $W/$v.err
  cp $W/$v/results.csv $OUT/$v-results.csv
done
