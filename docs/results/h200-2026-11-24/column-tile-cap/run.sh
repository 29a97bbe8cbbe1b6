#!/usr/bin/env bash
# Column tiles capped (experiment): SpMM N=128 f32 on the corpus matrices of 500k+ entries and
# the generated Poisson 3D and R-MAT, tiles of 128 (uncapped), 64 and 32 columns.
set -uo pipefail
W=/tmp/work; mkdir -p $W; tar xzf devrun/bin.tgz -C $W; B=$W/bin
export SPARSE_REQUIRE_GPU=1 SPARSE_KERNEL_CACHE_DIR=/tmp/kc
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u +%FT%TZ; } | tee $OUT/device.txt
FILES=$(awk -F'\t' 'NR>1 && $4>=500000 {print "devrun/corpus/"$1}' devrun/corpus/MANIFEST.tsv)
for cap in 128 64 32; do
  echo "== cap $cap"; SPARSE_EXP_TILE_COLS=$cap timeout 170 $B/spbench-exp --backend cuda --no-corpus $FILES --large 128 --generators poisson3d,rmat --ops spmm --precisions f32 --n 128 --warmup-ms 30 --runs 15 --time-limit-s 1 --out $W/cap$cap > $W/cap$cap.log 2> $W/cap$cap.err; echo rc=$?; tail -1 $W/cap$cap.err
  cp $W/cap$cap/results.csv $OUT/cap$cap.csv
done
