#!/usr/bin/env python3
"""Markdown tables of the CPU benches from criterion's files (target/criterion by default).

Every figure is the median time of the samples (robust to the odd preempted sample), turned into
GB/s (10^9 bytes/s) of the minimal bytes each bench declared as its throughput. Fractions are of
the bandwidths measured in the same run (group `bandwidth`): our parallel kernels against the
rayon copy (bytes read + written) and the rayon read, serial sprs against the one-thread read.
Both benches write the `bandwidth` group, so print each op's tables right after its own run.
Usage: cpu_bench_table.py [criterion-dir] [spmv|spmm]
"""

import json
import pathlib
import re
import sys


def load(root):
    """{group: {function: {value_str: (median_ns, bytes)}}} for every finished benchmark."""
    results = {}
    for bench in root.glob("**/new/benchmark.json"):
        meta = json.loads(bench.read_text())
        estimates = json.loads((bench.parent / "estimates.json").read_text())
        throughput = meta.get("throughput") or {}
        results.setdefault(meta["group_id"], {}).setdefault(meta["function_id"], {})[
            meta["value_str"]
        ] = (estimates["median"]["point_estimate"], throughput.get("Bytes"))
    return results


def gbs(entry):
    """GB/s of an entry (bytes per nanosecond)."""
    return entry[1] / entry[0] if entry and entry[1] else None


def fmt(value, pattern="{:.2f}"):
    return "-" if value is None else pattern.format(value)


def ratio(a, b):
    return a / b if a is not None and b else None


def pct(a, b):
    return fmt(ratio(a, b), "{:.0%}")


def matrix_key(value):
    """(name, rows, cols, nnz) from a label `name RxC nnz=N`."""
    m = re.fullmatch(r"(\S+) (\d+)x(\d+) nnz=(\d+)", value)
    return (m[1], int(m[2]), int(m[3]), int(m[4])) if m else (value, 0, 0, 0)


def spmv_table(group):
    print(f"\n### {group}\n")
    print("| matrix | rows | nnz | ours GB/s | sprs GB/s | ours/sprs | ours / copy (all threads) "
          "| ours / read (all threads) | sprs / read (1 thread) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ours, sprs = group_data[group].get("ours", {}), group_data[group].get("sprs", {})
    for value in sorted(ours, key=lambda v: matrix_key(v)[3]):
        name, rows, _, nnz = matrix_key(value)
        o, s = gbs(ours[value]), gbs(sprs.get(value))
        print(f"| {name} | {rows:,} | {nnz:,} | {fmt(o)} | {fmt(s)} | {fmt(ratio(o, s))}x "
              f"| {pct(o, bw['copy-rayon'])} | {pct(o, bw['read-rayon'])} "
              f"| {pct(s, bw['read-serial'])} |")


def spmm_table(precision):
    """One row per (matrix, N, layout); GFLOP/s counts 2*nnz*N."""
    groups = sorted(
        (g for g in group_data if g.startswith(f"spmm_{precision}_")),
        key=lambda g: (int(re.search(r"_n(\d+)_", g)[1]), g),
    )
    if not groups:
        return
    print(f"\n### spmm_{precision}\n")
    print("| matrix | rows | nnz | N | B, C | ours GB/s | sprs GB/s | ours/sprs | ours / copy "
          "| sprs-colmaj GB/s | ours GFLOP/s | ours ms | faer dense GEMM ms | dense time / ours time |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows_out = []
    for group in groups:
        _, _, n, layout = group.split("_", 3)
        data = group_data[group]
        for value, entry in data.get("ours", {}).items():
            name, rows, _, nnz = matrix_key(value)
            o, s = gbs(entry), gbs(data.get("sprs", {}).get(value))
            colmaj = gbs(data.get("sprs-colmaj", {}).get(value))
            dense = data.get("faer-dense", {}).get(value)
            dense_ms = dense[0] / 1e6 if dense else None
            rows_out.append((nnz, name, int(n[1:]), layout, (
                f"| {name} | {rows:,} | {nnz:,} | {n[1:]} | {layout} | {fmt(o)} | {fmt(s)} "
                f"| {fmt(ratio(o, s))}x | {pct(o, bw['copy-rayon'])} | {fmt(colmaj)} "
                f"| {2 * nnz * int(n[1:]) / entry[0]:.2f} | {entry[0] / 1e6:.3f} | {fmt(dense_ms, '{:.3f}')} "
                f"| {fmt(ratio(dense_ms, entry[0] / 1e6))} |")))
    for row in sorted(rows_out):
        print(row[-1])


root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
ops = sys.argv[2:3] or ["spmv", "spmm"]
group_data = load(root)
bw = {name: gbs(data.get(None)) for name, data in group_data.get("bandwidth", {}).items()}
for name in ("copy-serial", "copy-rayon", "read-serial", "read-rayon"):
    bw.setdefault(name, None)
print("bandwidth, 256 MiB buffers (GB/s): "
      + ", ".join(f"{name} {fmt(value)}" for name, value in bw.items())
      + " (copy counts bytes read + written)")
if "spmv" in ops:
    for group in sorted(g for g in group_data if g.startswith("spmv_")):
        spmv_table(group)
if "spmm" in ops:
    for precision in ("f64", "f32"):
        spmm_table(precision)
