#!/usr/bin/env bash
# Runs the CPU benches (SpMV, then SpMM) and prints their tables and where the raw results are.
# Run it on a quiet machine: the kernels are memory-bound, so anything else running skews them.
# Extra arguments go to criterion, e.g. a filter: run-cpu-benches.sh spmv_f64
# The corpus is read from ../shared/matrices unless SPARSE_CORPUS names another directory.
set -euo pipefail
cd "$(dirname "$0")/.."

criterion_args=(--warm-up-time 1 --measurement-time 3 "$@")
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"

# Both benches measure the `bandwidth` group, so each op's tables are printed right after its
# own run, against the bandwidth measured in that run.
for op in spmv spmm; do
    echo "machine: $(nproc) cores; load before cpu_$op: $(uptime)"
    cargo bench -p benches --bench "cpu_$op" -- "${criterion_args[@]}"
    if command -v python3 >/dev/null; then
        python3 benches/cpu_bench_table.py "$target_dir/criterion" "$op" | tee "$target_dir/cpu_$op.md"
        echo "tables: $target_dir/cpu_$op.md"
    else
        echo "python3 not found: no tables (benches/cpu_bench_table.py makes them)"
    fi
done
echo "raw results (criterion): $target_dir/criterion/<group>/<function>/<matrix>/new/estimates.json"
