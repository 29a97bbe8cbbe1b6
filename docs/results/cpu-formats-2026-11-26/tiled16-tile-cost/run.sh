#!/usr/bin/env bash
# Tiled16 on the CPU: the committed tile selection (tiles of at most 32 entries deferred) against
# every tile deferred: one build of 7be71c2 whose DEFERRED_TILE_MAX was read from EXP_DEF (32 when
# unset, as committed; 256 defers every tile; not committed), two rounds in turn on the 2-core machine.
M=../shared/matrices
F="--backend cpu --no-corpus --large 0 --ops spmv --precisions f64,f32 --runs 10 --warmup-ms 100 --time-limit-s 3"
FILES="$M/brack2.mtx.gz $M/xenon1.mtx.gz $M/bcsstk16.mtx.gz $M/nsjac.mtx.gz"
for i in 1 2; do
  spbench $F --formats csr,tiled16 --out base-$i $FILES
  EXP_DEF=256 spbench $F --formats tiled16 --out all-$i $FILES
done
