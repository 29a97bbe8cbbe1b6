#!/usr/bin/env bash
# Where the fused attention backward's time goes at d = 128 (issue 18's backward target):
# forward alone and forward + backward on the R-MAT graph of docs/attention.md, ncu on the
# backward's row and column kernels and on the forward, and the kernels' register use.
# (The ncu step exited at once: spbench refuses --warmup-ms 0; rG7 ran it again.)
set -uo pipefail
export SPARSE_KERNEL_CACHE_DIR=/tmp/kc SPARSE_REQUIRE_GPU=1
B=/tmp/bin; O=$OUT/rG6; mkdir -p $B $O
for f in devrun/bin/*.gz; do gunzip -c $f > $B/$(basename $f .gz); chmod +x $B/$(basename $f .gz); done
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $O/device.txt 2>&1
t0=$SECONDS
step() { local name=$1 limit=$2; shift 2; timeout $limit "$@" > $O/$name.log 2>&1; echo "$name rc=$? $((SECONDS-t0))s" | tee -a $O/steps.txt; }
S="$B/spbench --backend cuda --no-corpus --large 147 --generators rmat --ops attention --precisions f32 --algorithms fused"
step forward 150 $S --k 64,128 --out $O/forward
step backward 150 $S --k 64,128 --backward --out $O/backward
step ncu 240 /usr/local/cuda/bin/ncu --kernel-name regex:"attention_(backward_rows|backward_cols|fused)" --launch-count 6 --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats $S --k 128 --backward --runs 1 --warmup-ms 0 --out $O/ncu-run
for f in /tmp/kc/*; do tail -n +2 "$f" > /tmp/k.cubin 2>/dev/null; /usr/local/cuda/bin/cuobjdump -res-usage /tmp/k.cubin 2>/dev/null | grep -A1 attention; done > $O/res-usage.txt
cd $OUT && tar czf rG6.tgz rG6 && rm -rf rG6
