#!/usr/bin/env bash
# One command on the GPU machine, next to the release binaries built elsewhere:
#   scripts/gpu-bench.sh OUT_DIR [CORPUS_DIR] [SPBENCH_FLAGS...]
# 1. A quick conformance pass of the cuda and cusparse backends, so the kernels about to be
#    timed are known to be right on this machine.
# 2. spbench (all backends unless the flags name one): every kernel against cuSPARSE (and the
#    CPU kernels against sprs and faer) on the corpus and on generated matrices of >= 256 MB,
#    into OUT_DIR/bench.
# Every log goes under OUT_DIR. The binaries are taken from BIN_DIR, else the script's
# ../target/release, else the script's own directory (binaries copied next to it). No
# environment is needed: the binaries find the CUDA libraries themselves. Flags after the
# corpus go to spbench (e.g. --quick, --backend cuda, --ops spmv, --large 512).
set -uo pipefail

usage="usage: scripts/gpu-bench.sh OUT_DIR [CORPUS_DIR] [SPBENCH_FLAGS...]"
out=${1:?$usage}
shift
corpus=""
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  corpus=$1
  shift
fi

here=$(cd "$(dirname "$0")" && pwd)
if [ -n "${BIN_DIR:-}" ]; then
  bin=$BIN_DIR
elif [ -x "$here/../target/release/spbench" ]; then
  bin=$here/../target/release
else
  bin=$here
fi
for b in spbench conformance; do
  [ -x "$bin/$b" ] || { echo "!! $bin/$b not found (set BIN_DIR)"; exit 2; }
done

mkdir -p "$out"
corpus_args=()
if [ -n "$corpus" ]; then
  [ -d "$corpus" ] || { echo "!! corpus $corpus is not a directory"; exit 2; }
  corpus_args=(--corpus "$corpus")
fi

status=0
run() {
  local name=$1
  shift
  echo "== $name: $*"
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 5 "$out/$name.log"
  [ $rc -eq 0 ] || { echo "!! $name exited $rc (log: $out/$name.log)"; status=1; }
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
    --format=csv,noheader 2>&1
  date -u +%Y-%m-%dT%H:%M:%SZ
} | tee "$out/device.txt"

export SPARSE_REQUIRE_GPU=1
for backend in cuda cusparse; do
  run "conformance-$backend" "$bin/conformance" --backend "$backend" --quick "${corpus_args[@]}"
done

# The benchmark writes its own files; its log holds the progress lines and the summary.
run spbench "$bin/spbench" "${corpus_args[@]}" --out "$out/bench" "$@"

echo "report: $out/bench/summary.md (table), $out/bench/results.csv (every row), $out/bench/*.svg"
exit $status
