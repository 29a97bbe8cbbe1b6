#!/usr/bin/env bash
# FlashSparse f16 SpMM: the cp.async pipeline with 4, 3 and 2 stages against the register
# pipeline (spbench-base), N = 128 and 256, 25 corpus matrices of 100k+ entries + 2 generated.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
M="devrun/corpus/wiki-Vote.mtx.gz devrun/corpus/dlmc_rn50_mp80_b2_g3_conv3x3.mtx.gz devrun/corpus/dnn_images1024_subset.mtx.gz devrun/corpus/memplus.mtx.gz devrun/corpus/cage10.mtx.gz devrun/corpus/PROTEINS_full.mtx.gz devrun/corpus/delaunay_n15.mtx.gz devrun/corpus/dlmc_rn50_rp90_b2_g4_conv3x3.mtx.gz devrun/corpus/astro-ph.mtx.gz devrun/corpus/dlmc_tf_vd_80_dec5_ffn2.mtx.gz devrun/corpus/bcsstk16.mtx.gz devrun/corpus/rgg_n_2_15_s0.mtx.gz devrun/corpus/musae_facebook.mtx.gz devrun/corpus/nsjac.mtx.gz devrun/corpus/dlmc_rn50_emp98_final_dense.mtx.gz devrun/corpus/facebook_MIT8.mtx.gz devrun/corpus/c-62.mtx.gz devrun/corpus/musae_github.mtx.gz devrun/corpus/copter2.mtx.gz devrun/corpus/brack2.mtx.gz devrun/corpus/dlmc_tf_mp95_embedding.mtx.gz devrun/corpus/NotreDame_www.mtx.gz devrun/corpus/mdual.mtx.gz devrun/corpus/dlmc_rn50_mp50_proj_g4.mtx.gz devrun/corpus/xenon1.mtx.gz "
for v in spbench spbench-s3 spbench-s2 spbench-base; do
  timeout 140 $B/$v --backend cuda --no-corpus $M --large 64 --generators poisson3d,rmat --ops spmm --precisions f16 --algorithms flashsparse --n 128,256 --warmup-ms 30 --runs 20 --time-limit-s 1 --out $W/$v > $W/$v.log 2> $W/$v.err; echo "$v rc=$?"; tail -1 $W/$v.err
  cp $W/$v/results.csv $OUT/$v-results.csv
done
