//! Conjugate gradient with Jacobi preconditioning, kept on the backend: the matrix is planned
//! once, b and x live in the backend's memory, and the host reads a few scalars per iteration.
//!
//! `cargo run --release --example cg [N] [BACKEND]`: the 3D Poisson matrix on an N³ grid
//! (default 32) with b = A·1, so the exact solution is all ones; BACKEND defaults to
//! `$SPARSE_BACKEND`, else `auto`.

use sparse_blas::solve::{Precond, SolveOptions, Solver};
use sparse_blas::{generate, Backend, Csr, DenseRef, Executor, Layout};

fn main() -> Result<(), sparse_blas::Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map_or(Ok(32), |s| s.parse())
        .map_err(|e| sparse_blas::Error::invalid(format!("the grid size must be a number: {e}")))?;
    let backend = match args.next() {
        Some(name) => Backend::from_name(&name)?,
        None => Backend::from_env_or("auto")?,
    };
    let a: Csr<f64> = generate::poisson3d(n)?;
    let b: Vec<f64> = (0..a.rows())
        .map(|i| a.as_ref().row(i).1.iter().sum())
        .collect();

    let b = backend.upload(DenseRef::vector(&b))?;
    let mut x = backend.zeros::<f64>(a.rows(), 1, Layout::ColMajor)?;
    let options = SolveOptions::default().precond(Precond::Jacobi).tol(1e-10);
    let mut solver = Solver::new(&backend, a.as_ref(), &options)?;
    let report = solver.solve(b.as_ref(), x.as_mut())?;

    let x = backend.download(&x)?.into_host_vec()?;
    let error = x.iter().map(|v| (v - 1.0).abs()).fold(0.0, f64::max);
    println!(
        "poisson3d {n}³ ({} rows) on {}: {report}; max |x - 1| = {error:.2e}",
        a.rows(),
        backend.description()
    );
    assert!(report.converged && error < 1e-6);
    Ok(())
}
