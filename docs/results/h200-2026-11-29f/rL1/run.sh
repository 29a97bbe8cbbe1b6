#!/usr/bin/env bash
# TileSpMV with CSR, COO, ELL and HYB tiles on one path (spbench) against 958fca8 (spbench-base): tests, SpMV conformance over the generators and 45 corpus matrices (all but c-62, NotreDame_www, dlmc_rn50_mp50_proj_g4, dlmc_tf_mp95_embedding), memcheck and racecheck, bench-fem twice each, block-poisson3d (not in the corpus) at six sizes, the large Poisson stencils, the other corpus matrices.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rL1; M=/tmp/corpus; mkdir -p $B $O; xz -dc devrun/cx/corpus.tar.xz | tar -C /tmp -xf -
for f in devrun/rl/*.xz; do xz -dc $f > $B/$(basename $f .xz); chmod +x $B/$(basename $f .xz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FEM_M="bcsstk14 bcsstk16 nsjac bayer10 xenon1 delaunay_n15 brack2 copter2 mdual sherman3 1138_bus dwt_992 jagmesh7 bcsstk01"
FILES=""; for m in $FEM_M; do FILES="$FILES $M/$m.mtx"; done
OTHER=""; for f in $M/*.mtx; do case " $FEM_M " in *" $(basename $f .mtx) "*) ;; *) OTHER="$OTHER $f";; esac; done
F="--backend cuda --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step test-spmv_formats 120 $B/test-spmv_formats --test-threads=1
step conformance-spmv 200 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-tilespmv 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads=1
step racecheck-tilespmv 150 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-tilespmv --test-threads=1 every_tile_format
step fem-ref 150 $B/spbench-base $F --no-corpus --large 0 --formats csr,coo,tiled16,bsr --out $O/fem-ref $FILES
for i in 1 2; do
  for bin in spbench-base spbench; do step fem-$bin-$i 100 $B/$bin $F --no-corpus --large 0 --formats tiled16 --out $O/fem-$bin-$i $FILES; done
done
for mb in 5 9.5 12.5 15.5 64 256; do
  step bp-ref-$mb 100 $B/spbench-base $F --no-corpus --large $mb --generators block-poisson3d --formats csr,coo,tiled16,bsr --out $O/bp-ref-$mb
  step bp-new-$mb 100 $B/spbench $F --no-corpus --large $mb --generators block-poisson3d --formats tiled16 --out $O/bp-new-$mb
done
for bin in spbench-base spbench; do step large-$bin 100 $B/$bin $F --no-corpus --large 256 --generators poisson3d,poisson2d --formats tiled16 --out $O/large-$bin; done
step other-base 200 $B/spbench-base $F --no-corpus --large 0 --formats csr,coo,tiled16 --out $O/other-base $OTHER
step other-new 150 $B/spbench $F --no-corpus --large 0 --formats tiled16 --out $O/other-new $OTHER
rm -f $O/*/*.svg
cd $OUT && tar czf rL1.tgz rL1 && rm -rf rL1
