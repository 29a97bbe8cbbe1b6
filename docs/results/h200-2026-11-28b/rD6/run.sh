#!/usr/bin/env bash
# TileSpMV on an H100: 2d442f8 (spbench-rs: three row-start byte loads a lane), and two loads a lane with a HYB tile's COO count read in its branch (spbench). Tests, SpMV conformance and memcheck on the last, then bench-fem (with cuSPARSE and our CSR kernels from spbench-rs) and bench-large twice, the other corpus matrices once.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rD6; M=devrun/corpus; mkdir -p $B $O
for f in devrun/bin/*.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
FEM_M="bcsstk14 bcsstk16 nsjac bayer10 xenon1 delaunay_n15 brack2 copter2 mdual sherman3 1138_bus dwt_992 jagmesh7 bcsstk01"
FILES=""; for m in $FEM_M; do FILES="$FILES $M/$m.mtx.gz"; done
OTHER=""; for f in $M/*.mtx.gz; do case " $FEM_M " in *" $(basename $f .mtx.gz) "*) ;; *) OTHER="$OTHER $f";; esac; done
FEM="--backend cuda --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 1"
L="--backend cuda --no-corpus --large 256 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 20 --batch-ms 0.5 --time-limit-s 2"
step test-tilespmv 120 $B/test-tilespmv --test-threads=1
step conformance-spmv 150 $B/conformance --backend cuda --quick --corpus $M --op spmv --precision f64,f32,f16
step memcheck-tilespmv 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-tilespmv --test-threads=1
step fem-base 150 $B/spbench-rs $FEM --formats csr,coo,tiled16,bsr --out $O/fem-base $FILES
for i in 1 2; do
  for bin in spbench-rs spbench; do
    step fem-$bin-$i 100 $B/$bin $FEM --formats tiled16 --out $O/fem-$bin-$i $FILES
    step large-$bin-$i 100 $B/$bin $L --formats tiled16 --out $O/large-$bin-$i
  done
done
step other-base 200 $B/spbench-rs $FEM --formats csr,coo,tiled16 --out $O/other-base $OTHER
step other-spbench 120 $B/spbench $FEM --formats tiled16 --out $O/other-spbench $OTHER
rm -f $O/*/*.svg
cd $OUT && tar czf rD6.tgz rD6 && rm -rf rD6
