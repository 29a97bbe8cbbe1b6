#!/usr/bin/env python3
"""Baselines for `solvebench`: conjugate gradient by CuPy (cupyx.scipy.sparse.linalg.cg) on the
GPU and by SciPy on the CPU, on the systems solvebench solves.

The systems are the same: 3D Poisson matrices (the 7-point Laplacian, 6 on the diagonal and -1
off it, the first grid index varying fastest, as sparse-formats' `generate::poisson3d`) and the
corpus's real symmetric matrices with a positive diagonal, read from the .mtx.gz files; b = A*1,
x0 = 0, and the tolerance is relative: stop when ||b - Ax|| <= tol*||b||. Each solve is run once
to warm up and count iterations (by a callback), then timed `--repeat` times without the
callback; the fastest is kept. Needs no network.

    scripts/solve-baselines.py [--matrices DIR] [--poisson 128,160] [--tol 1e-8]
        [--precond none,jacobi] [--precisions f64] [--repeat 3] [--no-gpu] [--no-cpu]
        [--out baselines.csv]
"""

import argparse
import gzip
import inspect
import os
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp
import scipy.sparse.linalg as spla

HEADER = ("matrix,rows,nnz,impl,device,precision,precond,tol,iterations,converged,"
          "relative_residual,time_s,note")


def poisson3d(n):
    """The 7-point Laplacian on an n^3 grid, rows ordered with the first index fastest."""
    t = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1], format="csr")
    i = sp.identity(n, format="csr")
    a = sp.kron(i, sp.kron(i, t)) + sp.kron(i, sp.kron(t, i)) + sp.kron(t, sp.kron(i, i))
    return a.tocsr()


def read(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        return sp.csr_matrix(scipy.io.mmread(f), dtype=np.float64)


def header(path):
    """(field, symmetry, rows, cols) from the Matrix Market banner and size line."""
    with gzip.open(path, "rt") if path.endswith(".gz") else open(path) as f:
        banner = f.readline().lower().split()
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        rows, cols = (int(v) for v in line.split()[:2])
    return banner[3], banner[4], rows, cols


def corpus(directory):
    """The real symmetric matrices with a positive diagonal, by file name."""
    cases = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".mtx.gz"):
            continue
        path = os.path.join(directory, name)
        field, symmetry, rows, cols = header(path)
        if field not in ("real", "integer") or symmetry != "symmetric" or rows != cols:
            continue
        a = read(path)
        a.sum_duplicates()
        if np.all(a.diagonal() > 0):
            cases.append((name[: -len(".mtx.gz")], a))
    return cases


def tol_keyword(cg):
    """SciPy >= 1.12 and newer CuPy call the relative tolerance rtol; older ones tol."""
    return "rtol" if "rtol" in inspect.signature(cg).parameters else "tol"


def run_cg(cg, a, b, tol, maxiter, m, sync, repeat):
    """(iterations, x, best seconds) of cg from x0 = 0."""
    kw = {tol_keyword(cg): tol, "maxiter": maxiter, "M": m}
    if "atol" in inspect.signature(cg).parameters:
        kw["atol"] = 0.0
    count = [0]

    def callback(_):
        count[0] += 1

    x, _ = cg(a, b, callback=callback, **kw)
    sync()
    best = float("inf")
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        x, _ = cg(a, b, **kw)
        sync()
        best = min(best, time.perf_counter() - start)
    return count[0], x, best


def jacobi(a, xsp):
    return xsp.diags(1.0 / a.diagonal(), format="csr")


def row(name, a, impl, device, precision, precond, tol, iterations, converged, residual, seconds,
        note=""):
    return (f"{name},{a.shape[0]},{a.nnz},{impl},{device},{precision},{precond},{tol:e},"
            f"{iterations},{str(converged).lower()},{residual:.3e},{seconds:.6f},{note}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_dir = os.environ.get("SPARSE_CORPUS", os.path.join(os.path.dirname(__file__), "../../shared/matrices"))
    p.add_argument("--matrices", default=default_dir)
    p.add_argument("--no-corpus", action="store_true")
    p.add_argument("--poisson", default="128,160")
    p.add_argument("--tol", type=float, default=1e-8)
    p.add_argument("--max-iter", type=int, default=20000)
    p.add_argument("--precond", default="none,jacobi")
    p.add_argument("--precisions", default="f64")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-gpu", action="store_true")
    p.add_argument("--no-cpu", action="store_true")
    p.add_argument("--out", default="baselines.csv")
    args = p.parse_args()

    cases = [(f"poisson3d_{n}", poisson3d(int(n))) for n in args.poisson.split(",") if n]
    if not args.no_corpus:
        cases += corpus(args.matrices)
    dtypes = {"f64": np.float64, "f32": np.float32}

    impls = []
    if not args.no_gpu:
        try:
            import cupy as cp
            import cupyx.scipy.sparse as csp
            import cupyx.scipy.sparse.linalg as cspla
            device = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
            impls.append(("cupy", device, cspla.cg, lambda a: csp.csr_matrix(a), cp, csp,
                          cp.cuda.Stream.null.synchronize))
        except Exception as e:  # no CuPy or no GPU: say so and go on with SciPy
            print(f"cupy skipped: {e}", file=sys.stderr)
    if not args.no_cpu:
        impls.append(("scipy", "cpu", spla.cg, lambda a: a, np, sp, lambda: None))

    lines = [HEADER]
    print(HEADER, flush=True)
    for name, a64 in cases:
        for precision in args.precisions.split(","):
            a_host = a64.astype(dtypes[precision])
            b_host = a_host @ np.ones(a_host.shape[0], dtype=a_host.dtype)
            for impl, device, cg, to_dev, xp, xsp, sync in impls:
                a = to_dev(a_host)
                b = xp.asarray(b_host)
                for precond in args.precond.split(","):
                    m = jacobi(a, xsp) if precond == "jacobi" else None
                    try:
                        iterations, x, seconds = run_cg(cg, a, b, args.tol, args.max_iter, m, sync, args.repeat)
                        r = b - a @ x
                        residual = float(xp.linalg.norm(r) / xp.linalg.norm(b))
                        line = row(name, a_host, impl, device, precision, precond, args.tol,
                                   iterations, iterations < args.max_iter, residual, seconds)
                    except Exception as e:
                        line = row(name, a_host, impl, device, precision, precond, args.tol,
                                   0, False, float("nan"), float("nan"), f'"{e}"')
                    print(line, flush=True)
                    lines.append(line)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
