#!/usr/bin/env python3
"""Times graph attention in PyTorch, the comparison for sparse-blas's attention kernels.

The torch.sparse CSR pipeline a PyTorch user has: per head, scores by
torch.sparse.sampled_addmm on A's pattern, a segment softmax over each row's scores (scatter_reduce
for the maximum, index_add for the sums), and the CSR matmul of the weights with V. f32 only:
sampled_addmm has no f16. Useful FLOPs are 4 * nnz * d * heads.

Graphs: the R-MAT graph of sparse-blas's generator (`generate::rmat(scale, edge_factor, seed)`:
the same SplitMix64 draws, so the same pattern as spbench's and the main job's R-MAT; the default
is 2^20 nodes and 16 edges per node), and any Matrix Market files given with --mtx. Runs offline.

    python3 scripts/torch-attention.py --out torch-attention.csv [--mtx A.mtx.gz ...]

Columns: graph, nodes, nnz, d, heads, precision, median_ms, useful_tflops.
"""

import argparse
import csv
import gzip
import statistics
import sys

import torch

GAMMA = 0x9E3779B97F4A7C15
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
MASK = (1 << 64) - 1


def signed(x):
    """A 64-bit pattern as torch's int64 holds it."""
    x &= MASK
    return x - (1 << 64) if x >= 1 << 63 else x


def shr(x, k):
    """Logical right shift of int64 tensors holding 64-bit patterns."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def splitmix(first, count, seed, device):
    """Draws first .. first+count of SplitMix64(seed) as floats in [0, 1) (f64).

    The i-th draw mixes seed + (i+1)*GAMMA; int64 products wrap like the u64 ones."""
    i = torch.arange(first + 1, first + count + 1, dtype=torch.int64, device=device)
    z = i * signed(GAMMA) + signed(seed)
    z = (z ^ shr(z, 30)) * signed(M1)
    z = (z ^ shr(z, 27)) * signed(M2)
    z = z ^ shr(z, 31)
    return shr(z, 11).to(torch.float64) * (1.0 / (1 << 53))


def rmat(scale, edge_factor, seed, device, chunk=1 << 20):
    """The pattern of sparse-blas's rmat(scale, edge_factor, seed): per edge, `scale` draws
    choose the quadrant bit by bit (0.57, 0.19, 0.19, 0.05), then one draws the value."""
    n = 1 << scale
    edges = n * edge_factor
    per_edge = scale + 1
    rows, cols = [], []
    for start in range(0, edges, chunk):
        m = min(chunk, edges - start)
        u = splitmix(start * per_edge, m * per_edge, seed, device).view(m, per_edge)[:, :scale]
        down = ((u >= 0.76) & (u < 0.95)) | (u >= 0.95)
        right = ((u >= 0.57) & (u < 0.76)) | (u >= 0.95)
        weights = torch.tensor([1 << b for b in range(scale - 1, -1, -1)], device=device)
        rows.append((down.to(torch.int64) * weights).sum(1))
        cols.append((right.to(torch.int64) * weights).sum(1))
    key = torch.unique(torch.cat(rows) * n + torch.cat(cols))
    return n, key // n, key % n


def read_mtx(path, device):
    """A Matrix Market pattern (symmetric files expanded), 0-based, duplicates merged."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        header = f.readline().lower()
        symmetric = "symmetric" in header or "hermitian" in header
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        n_rows, n_cols, _ = (int(x) for x in line.split())
        r, c = [], []
        for line in f:
            parts = line.split()
            if len(parts) >= 2:
                r.append(int(parts[0]) - 1)
                c.append(int(parts[1]) - 1)
    rows = torch.tensor(r, dtype=torch.int64, device=device)
    cols = torch.tensor(c, dtype=torch.int64, device=device)
    if symmetric:
        off = rows != cols
        rows, cols = torch.cat([rows, cols[off]]), torch.cat([cols, rows[off]])
    if n_rows != n_cols:
        sys.exit(f"{path}: attention needs a square graph, got {n_rows} x {n_cols}")
    key = torch.unique(rows * n_cols + cols)
    return n_rows, key // n_cols, key % n_cols


def csr(n, rows, cols, device):
    counts = torch.bincount(rows, minlength=n)
    crow = torch.zeros(n + 1, dtype=torch.int64, device=device)
    crow[1:] = torch.cumsum(counts, 0)
    return crow, cols


def attention(crow, col, row_of, n, q, k, v, heads, d):
    """O = softmax_row(QK^T/sqrt(d) on A's pattern) V, per head, by the torch.sparse pipeline."""
    scale = d ** -0.5
    pattern = torch.sparse_csr_tensor(crow, col, torch.zeros(col.numel(), device=q.device), (n, n))
    out = []
    for h in range(heads):
        qh, kh, vh = (x[:, h * d:(h + 1) * d] for x in (q, k, v))
        s = torch.sparse.sampled_addmm(pattern, qh, kh.t(), beta=0.0, alpha=scale).values()
        row_max = torch.full((n,), float("-inf"), device=q.device)
        row_max = row_max.scatter_reduce(0, row_of, s, reduce="amax", include_self=True)
        w = torch.exp(s - row_max[row_of])
        sums = torch.zeros(n, device=q.device).index_add_(0, row_of, w)
        p = torch.sparse_csr_tensor(crow, col, w / sums[row_of], (n, n))
        out.append(p @ vh)
    return torch.cat(out, 1)


def median_ms(fn, repeat):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="CSV file to write")
    ap.add_argument("--mtx", nargs="*", default=[], help="Matrix Market graphs to time as well")
    ap.add_argument("--scale", type=int, default=20, help="R-MAT: 2^scale nodes (0: none)")
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--widths", default="64,128", help="head widths d")
    ap.add_argument("--heads", default="1,4")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda")
    graphs = []
    if args.scale > 0:
        name = f"rmat scale {args.scale}, {args.edge_factor} edges/vertex, seed {args.seed}"
        graphs.append((name, rmat(args.scale, args.edge_factor, args.seed, dev)))
    graphs += [(path, read_mtx(path, dev)) for path in args.mtx]
    with open(args.out, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["graph", "nodes", "nnz", "d", "heads", "precision", "median_ms", "useful_tflops"])
        for name, (n, rows, cols) in graphs:
            crow, col = csr(n, rows, cols, dev)
            row_of = rows
            nnz = col.numel()
            for d in (int(x) for x in args.widths.split(",")):
                for heads in (int(x) for x in args.heads.split(",")):
                    g = torch.Generator(device=dev).manual_seed(1)
                    q, k, v = (torch.rand(n, heads * d, device=dev, generator=g) * 2 - 1 for _ in range(3))
                    ms = median_ms(lambda: attention(crow, col, row_of, n, q, k, v, heads, d), args.repeat)
                    tflops = 4 * nnz * d * heads / (ms * 1e-3) / 1e12
                    out.writerow([name, n, nnz, d, heads, "f32", f"{ms:.4f}", f"{tflops:.4f}"])
                    print(f"{name}: nnz {nnz}, d {d}, heads {heads}: {ms:.3f} ms, {tflops:.3f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
