#!/usr/bin/env bash
# RoDe one-launch deterministic combining and part descriptors: tests, conformance, sanitizers,
# small-matrix benchmark before/after.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc PATH=$PATH:/usr/local/cuda/bin
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
echo "== tests"; { timeout 100 $B/rode-test; echo "rc=$?"; timeout 60 $B/unit-test decomposition; echo "rc=$?"; } > $OUT/tests.log 2>&1; grep -E "test result|rc=|FAIL|panick" $OUT/tests.log
echo "== conformance"; timeout 170 $B/conformance --backend cuda --op spmm,sddmm --quick --corpus devrun/corpus > $OUT/conf.log 2>&1; echo rc=$?; grep "^total" $OUT/conf.log
echo "== memcheck"; timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $B/conformance --backend cuda --op spmm,sddmm --precision f64,f32,f16 --quick --no-corpus --max-nnz 3000 > $W/memcheck.log 2>&1; echo rc=$?; grep -E "^total|ERROR SUMMARY" $W/memcheck.log
echo "== racecheck"; timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $B/conformance --backend cuda --op spmm --precision f32,f16 --quick --no-corpus --max-nnz 3000 > $W/racecheck.log 2>&1; echo rc=$?; grep -E "^total|RACECHECK SUMMARY" $W/racecheck.log
{ grep -E "^total|ERROR SUMMARY" $W/memcheck.log; grep -E "^total|RACECHECK SUMMARY" $W/racecheck.log; } > $OUT/sanitizers.log
FILES="1138_bus Erdos971 G51 adder_dcop_05 bayer10 bcspwr10 bcsstk14 citeseer cora dlmc_rn50_vd50_b3_g2_conv1x1 dlmc_tf_mp70_dec0_selfattn_q dlmc_tf_rp_95_enc0_selfattn_k dnn_n1024_l1 dwt_992 gemat12 jagmesh7 mbeacxc rajat19 sherman3 zenios"
FILES=$(for f in $FILES; do echo devrun/corpus/$f.mtx.gz; done)
for v in prev new; do
  bin=$B/spbench; [ $v = prev ] && bin=$B/spbench-prev
  echo "== bench $v"; timeout 120 $bin --backend cuda --no-corpus $FILES --large 0 --ops spmm,sddmm --precisions f32 --n 32,128 --k 32 --warmup-ms 20 --runs 20 --time-limit-s 0.5 --out $W/$v > $W/$v.log 2> $W/$v.err; echo rc=$?; tail -1 $W/$v.err
  cp $W/$v/results.csv $OUT/small-$v.csv
done
