#!/bin/bash
# The CPU SpMV gather, on the 2-core development machine (2026-11-29).
# spbench-ab: a build of the change whose plans took the gather from AB_GATHER (0: direct,
# 1: prefetched, for every matrix); spbench-rule: the committed build (Gather::for_spmv).
set -e
args="--backend cpu --no-corpus --large 256 --generators poisson3d,rmat,uniform --ops spmv
      --precisions f64,f32 --algorithms nnz-split --runs 10 --warmup-ms 100 --time-limit-s 3"
for i in 1 2; do
  for g in 0 1; do AB_GATHER=$g ./spbench-ab $args --out g$g-$i > g$g-$i.log 2>&1; done
done
for i in 1 2; do ./spbench-rule $args --out rule-$i > rule-$i.log 2>&1; done
