#!/usr/bin/env bash
# Where the packed TileSpMV kernel's time goes (rB8's spbench): ncu on bcsstk16, nsjac, brack2 and xenon1 (f64), the tile kernels and the deferred pass, against `vector` and cuSPARSE.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rB9; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/spbench.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
NCU="/usr/local/cuda/bin/ncu --cache-control all --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
ONE="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64 --runs 1 --warmup-ms 1 --batch-ms 0.01 --time-limit-s 1"
for m in bcsstk16 nsjac brack2 xenon1; do
  step ncu-tile-$m 100 $NCU -k "regex:^(tile_spmv|tile_combine|spmv_)" --launch-count 3 $B/spbench $ONE --algorithms tilespmv --out $O/ncu-tile-$m $M/$m.mtx.gz
  step ncu-vector-$m 100 $NCU -k "regex:^spmv_" --launch-count 1 $B/spbench $ONE --algorithms vector --out $O/ncu-vector-$m $M/$m.mtx.gz
  step ncu-vendor-$m 100 $NCU -k "regex:csrmv|partition" --launch-count 2 $B/spbench $ONE --algorithms vendor-default --formats csr --out $O/ncu-vendor-$m $M/$m.mtx.gz
done
rm -f $O/*/*.svg
cd $OUT && tar czf rB9.tgz rB9 && rm -rf rB9
