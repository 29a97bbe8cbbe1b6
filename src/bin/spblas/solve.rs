//! `spblas solve`: A x = b by conjugate gradient or BiCGSTAB on any backend, from Matrix Market
//! files; without b, b = A·1 so that the error against the exact solution (all ones) is known.

use std::path::{Path, PathBuf};

use clap::Args;
use sparse_blas::solve::{refine, Method, Precond, RefineOptions, SolveOptions, Solver};
use sparse_blas::{
    io, Backend, BackendRequest, Csr, DenseRef, Error, Executor, Layout, Precision, Real, Result,
    Scalar,
};

/// The options of `spblas solve`.
#[derive(Args)]
pub struct SolveArgs {
    /// The matrix (square).
    a: PathBuf,
    /// The right-hand side (n x 1); b = A·1 when absent, whose solution is all ones.
    b: Option<PathBuf>,
    /// Where x goes (Matrix Market array).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// cg (symmetric positive definite) or bicgstab (general).
    #[arg(long, default_value = "cg")]
    method: Method,
    /// none or jacobi.
    #[arg(long, default_value = "none")]
    precond: Precond,
    /// Stop when ‖b - Ax‖ <= tol·‖b‖.
    #[arg(long, default_value_t = 1e-10)]
    tol: f64,
    #[arg(long, default_value_t = 10_000)]
    max_iter: usize,
    /// Test for convergence every this many iterations (one host read each).
    #[arg(long, default_value_t = 1)]
    check_every: usize,
    /// cpu, cuda, cusparse or auto (default: $SPARSE_BACKEND, else auto).
    #[arg(long)]
    backend: Option<BackendRequest>,
    /// f64 or f32: the precision of the matrix, the vectors and the iteration.
    #[arg(long, default_value = "f64")]
    precision: Precision,
    /// Mixed precision: f64 iterative refinement around f32 solves (with --precision f64).
    #[arg(long)]
    refine: bool,
}

/// Solves, prints the report (and the error when b = A·1) and writes x; `Ok(false)` when the
/// iteration ran out before the tolerance.
pub fn run(args: &SolveArgs) -> Result<bool> {
    let backend = match args.backend {
        Some(request) => Backend::new(request)?,
        None => Backend::from_env_or("auto")?,
    };
    let a = io::read_csr::<f64, u32>(&args.a)?;
    if a.rows() != a.cols() {
        return Err(Error::NotSquare {
            rows: a.rows(),
            cols: a.cols(),
        });
    }
    let b = match &args.b {
        Some(path) => rhs(path, a.rows())?,
        None => (0..a.rows())
            .map(|i| a.as_ref().row(i).1.iter().sum())
            .collect(),
    };
    let options = SolveOptions::default()
        .method(args.method)
        .precond(args.precond)
        .tol(args.tol)
        .max_iter(args.max_iter)
        .check_every(args.check_every);
    let what = format!(
        "{} {}x{} ({} entries) on {}",
        args.a.display(),
        a.rows(),
        a.cols(),
        a.nnz(),
        backend.description()
    );
    let (x, converged) = match (args.precision, args.refine) {
        (p, false) if p == Precision::F64 => typed::<f64>(&backend, &a, &b, &options, &what)?,
        (p, false) if p == Precision::F32 => typed::<f32>(&backend, &a, &b, &options, &what)?,
        (p, true) if p == Precision::F64 => refined(&backend, &a, &b, &options, &what)?,
        (p, refine) => {
            return Err(Error::invalid(format!(
                "solve runs in f64 or f32{}, not {p}",
                if refine { " (--refine: f64)" } else { "" }
            )))
        }
    };
    if args.b.is_none() {
        let error = x.iter().map(|v| (v - 1.0).abs()).fold(0.0, f64::max);
        println!("error against the exact solution (all ones): max |x - 1| = {error:.3e}");
    }
    io::write_dense(&args.output, DenseRef::vector(&x))?;
    Ok(converged)
}

/// The right-hand side in `path`, which must be n x 1.
fn rhs(path: &Path, n: usize) -> Result<Vec<f64>> {
    let b = io::read_dense::<f64>(path)?;
    b.expect_shape("the right-hand side", (n, 1))?;
    Ok((0..n).map(|i| b.at(i, 0)).collect())
}

/// A solve in T: x (in f64) and whether it converged.
fn typed<T: Real>(
    backend: &Backend,
    a: &Csr<f64, u32>,
    b: &[f64],
    options: &SolveOptions,
    what: &str,
) -> Result<(Vec<f64>, bool)> {
    let a = a.cast::<T>();
    let b: Vec<T> = b.iter().map(|&v| T::from_f64(v)).collect();
    let b = backend.upload(DenseRef::vector(&b))?;
    let mut x = backend.zeros::<T>(a.rows(), 1, Layout::ColMajor)?;
    let mut solver = Solver::new(backend, a.as_ref(), options)?;
    let report = solver.solve(b.as_ref(), x.as_mut())?;
    println!("{what}, {}: {report}", T::DTYPE);
    let x = backend.download(&x)?.into_host_vec()?;
    Ok((
        x.into_iter().map(Scalar::to_f64).collect(),
        report.converged,
    ))
}

/// f64 refinement around f32 solves with `options` (their tolerance: 1e-4 of each residual).
fn refined(
    backend: &Backend,
    a: &Csr<f64, u32>,
    b: &[f64],
    options: &SolveOptions,
    what: &str,
) -> Result<(Vec<f64>, bool)> {
    let a32 = a.cast::<f32>();
    let b = backend.upload(DenseRef::vector(b))?;
    let mut x = backend.zeros::<f64>(a.rows(), 1, Layout::ColMajor)?;
    let refine_options = RefineOptions {
        tol: options.tol,
        inner: options.clone().tol(RefineOptions::default().inner.tol),
        ..RefineOptions::default()
    };
    let report = refine(
        backend,
        a.as_ref(),
        a32.as_ref(),
        b.as_ref(),
        x.as_mut(),
        &refine_options,
    )?;
    println!(
        "{what}, f64 refinement of f32 {} (preconditioner: {}): {} after {} refinements \
         ({} f32 iterations), relative residual {:.3e}, {:.3} ms",
        options.method,
        options.precond,
        if report.converged {
            "converged"
        } else {
            "not converged"
        },
        report.refinements,
        report.inner_iterations,
        report.relative_residual,
        report.time.as_secs_f64() * 1e3
    );
    Ok((backend.download(&x)?.into_host_vec()?, report.converged))
}
