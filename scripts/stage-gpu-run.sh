#!/usr/bin/env bash
# Builds what a GPU machine without Rust runs, and stages it in one directory:
#   scripts/stage-gpu-run.sh DIR [CORPUS_DIR MATRIX...]
# DIR/bin gets the release binaries (spblas, conformance, spbench, plantime, solvebench,
# intbench) and the integration tests of sparse-cuda and conformance (as test-NAME), stripped; DIR/matrices gets the named corpus files. Then, on the GPU machine:
#   BIN_DIR=DIR/bin scripts/gpu-contract.sh OUT_DIR
set -euo pipefail

usage="usage: scripts/stage-gpu-run.sh DIR [CORPUS_DIR MATRIX...]"
dir=${1:?$usage}
shift
cd "$(dirname "$0")/.."
mkdir -p "$dir/bin"

cargo build --release --workspace --bins
for b in spblas conformance spbench plantime solvebench intbench; do
  cp "target/release/$b" "$dir/bin/$b"
done

# Test binaries: cargo names them NAME-HASH; the JSON messages say which file is which test.
cargo test --release -p sparse-cuda -p conformance --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, shutil, sys
out = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        shutil.copy(m["executable"], out + "/test-" + m["target"]["name"])
' "$dir/bin"
strip "$dir"/bin/*

if [ $# -gt 0 ]; then
  corpus=$1
  shift
  mkdir -p "$dir/matrices"
  for m in "$@"; do
    cp "$corpus/$m" "$dir/matrices/"
  done
fi
du -sh "$dir"
