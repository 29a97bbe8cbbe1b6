#!/bin/bash
# CPU ELL: the committed ROW_BLOCK of 64 (spbench-base) against 256 (ab1) and 32 (ab2) (spbench-new), each binary in turn, three times, on the 2-core development machine
O=$1; shift
for rep in 1 2 3; do
  for b in spbench-base spbench-new; do
    /tmp/$b --backend cpu --no-corpus --large 64 --generators poisson3d,poisson2d --ops spmv --precisions f64,f32 --formats csr,ell --runs 10 --warmup-ms 100 --time-limit-s 3 --out $O/$b-$rep > /dev/null 2>&1
  done
done
