#!/usr/bin/env bash
# On the GPU machine, next to binaries staged by scripts/stage-gpu-run.sh:
#   BIN_DIR=DIR/bin scripts/gpu-contract.sh OUT_DIR [STEP...]
# Steps (all when none is named):
#   tests        every staged test binary, with SPARSE_REQUIRE_GPU=1 (a skip is a failure)
#   conformance  the cuda and cusparse backends on the generated cases (quick), and on the
#                matrices in $MATRICES when set
#   coldstart    the main job with empty kernel caches (ours and the driver's), then warm;
#                the same for $BEFORE_DIR/spblas when set (binaries of an earlier commit)
#   plantime     first plans cold and warm, planning SpMV on a 26M-entry matrix, update costs
#   sanitizer    compute-sanitizer memcheck and racecheck over the quick generated cases
# Each step logs to OUT_DIR/STEP*.log; a summary of exit codes is printed last.
set -uo pipefail

out=${1:?usage: BIN_DIR=DIR/bin scripts/gpu-contract.sh OUT_DIR [STEP...]}
shift
steps=${*:-tests conformance coldstart plantime sanitizer}
bin=${BIN_DIR:?set BIN_DIR to the staged binaries}
mkdir -p "$out"
export SPARSE_REQUIRE_GPU=1
export SPARSE_KERNEL_CACHE_DIR=$out/.kernels
summary=()

run() {
  local name=$1
  shift
  echo "== $name: $*"
  local started=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 4 "$out/$name.log"
  summary+=("$name: exit $rc, $((SECONDS - started)) s")
}

# Wall time of a command with empty kernel caches, then with them filled.
cold_warm() {
  local name=$1
  shift
  local caches=$out/caches-$name
  rm -rf "$caches"
  mkdir -p "$caches"
  for state in cold warm; do
    local t0 t1 rc
    t0=$(date +%s%N)
    SPARSE_KERNEL_CACHE_DIR=$caches/kernels CUDA_CACHE_PATH=$caches/driver "$@" \
      >"$out/coldstart-$name-$state.log" 2>&1
    rc=$?
    t1=$(date +%s%N)
    echo "$name $state: exit $rc, $(((t1 - t0) / 1000000)) ms" | tee -a "$out/coldstart.txt"
  done
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  date -u +%Y-%m-%dT%H:%M:%SZ
} | tee "$out/device.txt"

for step in $steps; do
  case $step in
    tests)
      for t in "$bin"/test-*; do
        run "tests-$(basename "$t" | sed 's/^test-//')" "$t" --test-threads 1
      done
      ;;
    conformance)
      for backend in cuda cusparse; do
        run "conformance-$backend" "$bin/conformance" --backend "$backend" --quick --no-corpus \
          --markdown "$out/conformance-$backend.md"
        if [ -n "${MATRICES:-}" ]; then
          run "conformance-$backend-corpus" "$bin/conformance" --backend "$backend" --quick \
            --corpus "$MATRICES" --markdown "$out/conformance-$backend-corpus.md"
        fi
      done
      ;;
    coldstart)
      cold_warm after "$bin/spblas"
      if [ -n "${BEFORE_DIR:-}" ]; then
        cold_warm before "$BEFORE_DIR/spblas"
      fi
      ;;
    plantime)
      run plantime "$bin/plantime"
      ;;
    sanitizer)
      for tool in memcheck racecheck; do
        run "sanitizer-$tool" compute-sanitizer --tool "$tool" --error-exitcode 3 \
          "$bin/conformance" --backend cuda --quick --no-corpus --max-nnz 3000
      done
      ;;
    *)
      echo "!! unknown step $step"
      ;;
  esac
done
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
