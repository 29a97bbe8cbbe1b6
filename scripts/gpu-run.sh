#!/usr/bin/env bash
# One command on the GPU machine, next to the release binaries built elsewhere:
#   scripts/gpu-run.sh OUT_DIR [CORPUS_DIR]
# Runs the conformance suite for the cuda and cusparse backends, the main job, and
# compute-sanitizer (memcheck, racecheck) over a quick subset; writes every log under OUT_DIR.
# No environment is needed: the binaries find the CUDA libraries themselves.
set -uo pipefail

out=${1:?usage: scripts/gpu-run.sh OUT_DIR [CORPUS_DIR]}
corpus=${2:-}
bin=${BIN_DIR:-target/release}
mkdir -p "$out"
corpus_args=()
[ -n "$corpus" ] && corpus_args=(--corpus "$corpus")

status=0
run() {
  local name=$1
  shift
  echo "== $name: $*"
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 5 "$out/$name.log"
  [ $rc -eq 0 ] || { echo "!! $name exited $rc"; status=1; }
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
date -u +%Y-%m-%dT%H:%M:%SZ >>"$out/device.txt"

export SPARSE_REQUIRE_GPU=1
for backend in cuda cusparse; do
  run "conformance-$backend" "$bin/conformance" --backend "$backend" "${corpus_args[@]}" \
    --markdown "$out/conformance-$backend.md"
done
run main-job "$bin/spblas"

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  run "sanitizer-$tool" "$sanitizer" --tool "$tool" --error-exitcode 3 \
    "$bin/conformance" --backend cuda --quick --no-corpus
done
exit $status
