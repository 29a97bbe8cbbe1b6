#!/bin/bash
# CPU Tiled16: plans of 23c471d (the CPU code of 25e8c80) (spbench-base) against plans that defer tiles of at most 32 entries (spbench-new, the change), each binary in turn, twice, on the 2-core development machine
F="../shared/matrices/nsjac.mtx.gz ../shared/matrices/bcsstk16.mtx.gz ../shared/matrices/xenon1.mtx.gz ../shared/matrices/brack2.mtx.gz"
O=${1:-/tmp/cpu-ab}
for rep in 1 2; do
  for b in spbench-base spbench-new; do
    /tmp/$b --backend cpu --no-corpus --large 64 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --formats csr,tiled16 --runs 10 --warmup-ms 100 --time-limit-s 3 --out $O/$b-$rep $F > /dev/null 2>&1
  done
done
