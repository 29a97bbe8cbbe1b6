//! The README's library example: plan an SpMV once, run it many times, give it new values.
//!
//! `cargo run --release --example library [A.mtx.gz]`; without a file it runs on a generated
//! 3D Poisson matrix (32³).

use sparse_blas::{generate, io, Backend, Csr, DenseMut, DenseRef, Executor, Precision, SpmvDesc};

fn main() -> Result<(), sparse_blas::Error> {
    let a: Csr<f64> = match std::env::args().nth(1) {
        Some(path) => io::read_csr(path)?,
        None => generate::poisson3d(32)?,
    };
    let backend = Backend::from_env_or("auto")?; // cpu | cuda | cusparse | auto
    let mut plan = backend.plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F64))?; // analysis once
    let x = vec![1.0; a.cols()];
    let mut y = vec![0.0; a.rows()];
    let start = std::time::Instant::now();
    for _ in 0..100 {
        plan.run(1.0, DenseRef::vector(&x), 0.0, DenseMut::vector(&mut y))?; // no allocation
    }
    let per_run = start.elapsed() / 100;
    plan.update_values(DenseRef::vector(a.values()))?; // new values, same pattern: no re-analysis
    let info = plan.info();
    println!(
        "{}x{} ({} entries) on {}: {} {} chose {}, {:.1} us per SpMV, sum of y = {}",
        a.rows(),
        a.cols(),
        a.nnz(),
        backend.description(),
        info.format,
        info.precision,
        info.algorithm,
        per_run.as_secs_f64() * 1e6,
        y.iter().sum::<f64>()
    );
    Ok(())
}
