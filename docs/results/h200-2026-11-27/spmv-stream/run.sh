#!/bin/bash
# A/B of cache hints on the SpMV kernels' matrix loads, through a switch of that build only
# (SPARSE_STREAM_MODE, passed to NVRTC as -DSTREAM_MODE): 0 as committed (ld.global.nc), 1 the
# values, column indices and row pointers of every CSR/COO kernel loaded with
# ld.global.nc.L1::no_allocate.L2::cache_hint under an L2 evict_first policy, x as before.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export SPARSE_KERNEL_CACHE_DIR=$PWD/kcache SPARSE_REQUIRE_GPU=1
mkdir -p bin-x && for f in bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > bin-x/$b; chmod +x bin-x/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt
LOG=$OUT/logs; mkdir -p $LOG
for m in 0 1; do
  SPARSE_STREAM_MODE=$m timeout 280 ./bin-x/spbench --backend cuda --no-corpus --large 256 --generators poisson3d,rmat,uniform,poisson2d \
    --ops spmv --precisions f32,f64 --formats csr,coo --runs 20 --out $LOG/mode$m > $LOG/mode$m.txt 2>&1
  echo "mode $m rc $?" >> $LOG/rc.txt
  rm -f $LOG/mode$m/*.svg
done
tar czf $OUT/run.tgz -C $OUT logs gpu.txt
