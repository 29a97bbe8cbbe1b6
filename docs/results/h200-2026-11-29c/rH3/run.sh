#!/usr/bin/env bash
# Why TileSpMV trails our CSR kernel on small FEM matrices: ncu stall reasons, instructions and cycles of tile_spmv and spmv_csr_vector (f64, caches flushed).
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rH3; M=devrun/matrices; mkdir -p $B $O
for f in devrun/bin/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
MET='gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg,smsp__inst_executed.sum,smsp__warps_launched.sum,smsp__inst_executed.max,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
NCU="/usr/local/cuda/bin/ncu --cache-control all --clock-control none --metrics $MET --section SourceCounters --section LaunchStats"
ONE="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64 --runs 1 --warmup-ms 1 --batch-ms 0.01 --time-limit-s 1"
# Warm the kernel cache so that ncu profiles the timed launches, not NVRTC.
step warm 200 $B/spbench $ONE --formats csr,tiled16 --algorithms tilespmv,vector --out $O/warm $M/*.mtx.gz
for m in bcsstk01 bcsstk14 nsjac xenon1; do
  step ncu-tile-$m 100 $NCU -k "regex:^tile_spmv" --launch-count 1 $B/spbench $ONE --formats tiled16 --algorithms tilespmv --out $O/ncu-tile-$m $M/$m.mtx.gz
  step ncu-vector-$m 100 $NCU -k "regex:^spmv_csr_vector" --launch-count 1 $B/spbench $ONE --formats csr --algorithms vector --out $O/ncu-vector-$m $M/$m.mtx.gz
done
rm -f $O/*/*.svg
cd $OUT && tar czf rH3.tgz rH3 && rm -rf rH3
