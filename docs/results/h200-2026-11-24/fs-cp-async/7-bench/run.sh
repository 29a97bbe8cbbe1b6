#!/usr/bin/env bash
# The FlashSparse targets after the cp.async pipeline and the batched combine: every CUDA CSR
# kernel and cuSPARSE algorithm (f32, f16) with FlashSparse and its 16x1 ablation (f16, tf32),
# in one process, SpMM N = 32, 128, 256 and SDDMM K = 32, 128, on the 25 corpus matrices of
# 100k+ entries.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
M="devrun/corpus/wiki-Vote.mtx.gz devrun/corpus/dlmc_rn50_mp80_b2_g3_conv3x3.mtx.gz devrun/corpus/dnn_images1024_subset.mtx.gz devrun/corpus/memplus.mtx.gz devrun/corpus/cage10.mtx.gz devrun/corpus/PROTEINS_full.mtx.gz devrun/corpus/delaunay_n15.mtx.gz devrun/corpus/dlmc_rn50_rp90_b2_g4_conv3x3.mtx.gz devrun/corpus/astro-ph.mtx.gz devrun/corpus/dlmc_tf_vd_80_dec5_ffn2.mtx.gz devrun/corpus/bcsstk16.mtx.gz devrun/corpus/rgg_n_2_15_s0.mtx.gz devrun/corpus/musae_facebook.mtx.gz devrun/corpus/nsjac.mtx.gz devrun/corpus/dlmc_rn50_emp98_final_dense.mtx.gz devrun/corpus/facebook_MIT8.mtx.gz devrun/corpus/c-62.mtx.gz devrun/corpus/musae_github.mtx.gz devrun/corpus/copter2.mtx.gz devrun/corpus/brack2.mtx.gz devrun/corpus/dlmc_tf_mp95_embedding.mtx.gz devrun/corpus/NotreDame_www.mtx.gz devrun/corpus/mdual.mtx.gz devrun/corpus/dlmc_rn50_mp50_proj_g4.mtx.gz devrun/corpus/xenon1.mtx.gz "
timeout 560 $B/spbench --backend cuda --no-corpus $M --large 0 --ops spmm,sddmm --precisions f32,f16,tf32 --algorithms vector,rode,rode-deterministic,flashsparse,flashsparse-16x1,vendor-default,vendor-alg1,vendor-alg2,vendor-alg3 --n 32,128,256 --k 32,128 --warmup-ms 30 --runs 20 --time-limit-s 1 --out $W/b > $W/b.log 2> $W/b.err; echo "rc=$?"; tail -1 $W/b.err
cp $W/b/results.csv $OUT/results.csv; cp $W/b/summary.md $OUT/summary.md
