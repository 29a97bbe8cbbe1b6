#!/usr/bin/env bash
# rG5: the committed code (bfa8daf's kernels, at b335379): the attention tests on every graph and GNN corpus matrix in f16 and bf16 (every algorithm, forward and backward, two heads of 32, the bias); compute-sanitizer memcheck and racecheck on the small cases.
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1 SPARSE_CORPUS=devrun/matrices
B=/tmp/bin; O=$OUT/rG5; mkdir -p $B $O
for f in devrun/bin/test-attention.xz; do n=$B/$(basename $f .xz); xz -dc $f > $n 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" $f > $n; chmod +x $n; done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
pack() { (cd $OUT && tar czf rG5.tgz rG5); }
step test-attention-corpus 220 $B/test-attention --test-threads=2 every_corpus_graph_meets_the_oracle_forward_and_backward_in_f16 every_corpus_graph_meets_the_oracle_forward_and_backward_in_bf16; pack
step memcheck-small 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases; pack
step racecheck-small $((440 - (SECONDS - t0))) /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 $B/test-attention --test-threads=1 small_cases; pack
