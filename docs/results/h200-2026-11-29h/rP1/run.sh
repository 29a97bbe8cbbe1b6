#!/usr/bin/env bash
# SpMM at N = 64, 128, 256 in f32 and f64: every CSR kernel of ours and every cuSPARSE algorithm, on the corpus matrices of 8,192 rows and 100k entries or more, and on generated R-MAT, uniform and Poisson 3D matrices: where `auto` should hand wide products to cuSPARSE.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rP1; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -; xz -dc devrun/cx2/big4.tar.xz | tar -C /tmp -xf -; mv /tmp/big4/*.mtx $M/
for f in devrun/rp/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
F="--backend cuda --ops spmm --n 64,128,256 --precisions f32,f64 --formats csr --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step gen64 200 $B/spbench $F --no-corpus --large 64 --generators rmat,uniform,poisson3d --out $O/gen64
step gen256 200 $B/spbench $F --no-corpus --large 256 --generators rmat,uniform --out $O/gen256
step corpus 300 $B/spbench $F --no-corpus --large 0 --out $O/corpus $(for m in xenon1 mdual NotreDame_www dlmc_tf_mp95_embedding brack2 copter2 musae_github c-62 nsjac musae_facebook rgg_n_2_15_s0 astro-ph delaunay_n15 PROTEINS_full cage10 memplus wiki-Vote bayer10 dlmc_rn50_mp50_proj_g4; do echo $M/$m.mtx; done)
rm -f $O/*/*.svg
cd $OUT && tar czf rP1.tgz rP1 && rm -rf rP1
