//! Mixed-precision iterative refinement: the residual and the solution in f64, the correction
//! solved in f32 (an f32 SpMV plan and f32 vectors move half the bytes per iteration).
//!
//! Each refinement computes `r = b - Ax` in f64, rounds it to f32, solves `A d = r` to the inner
//! tolerance with the f32 solver (from d = 0) and adds d to x in f64, until ‖r‖ <= tol·‖b‖.
//! The residual is not rescaled before rounding, so a residual below f32's normal range
//! (about 1e-38) would lose digits; the tolerances of practice stay far above it.

use std::time::{Duration, Instant};

use sparse_core::{
    Coef, CsrRef, Dense, DenseMut, DenseRef, Error, Layout, Precision, Result, SpIndex, SpmvDesc,
    VectorOps,
};

use crate::options::SolveOptions;
use crate::solver::Solver;

/// Options of a refinement.
#[derive(Clone, Debug, PartialEq)]
pub struct RefineOptions {
    /// Stop when ‖b - Ax‖ <= tol·‖b‖, computed in f64.
    pub tol: f64,
    pub max_refinements: usize,
    /// The f32 solve of each correction (its `tol` is relative to that refinement's residual).
    pub inner: SolveOptions,
}

impl Default for RefineOptions {
    fn default() -> Self {
        RefineOptions {
            tol: 1e-10,
            max_refinements: 20,
            inner: SolveOptions::default().tol(1e-4),
        }
    }
}

/// What a refinement did.
#[derive(Clone, Debug, PartialEq)]
pub struct RefineReport {
    pub refinements: usize,
    /// Iterations of the f32 solves, summed.
    pub inner_iterations: usize,
    pub converged: bool,
    /// ‖b - Ax‖/‖b‖ of the x returned, in f64.
    pub relative_residual: f64,
    /// Every refinement and residual (planning excluded).
    pub time: Duration,
    /// The relative residual before each refinement and at the end.
    pub history: Vec<f64>,
}

const BB: usize = 0;
const RR: usize = 1;

/// Solves `A x = b` in f64 by refining with f32 solves of `a32` (`a` rounded to f32, same
/// pattern), from the initial guess in `x`.
pub fn refine<E: VectorOps, I: SpIndex>(
    backend: &E,
    a: CsrRef<'_, f64, I>,
    a32: CsrRef<'_, f32, I>,
    b: DenseRef<'_, f64>,
    mut x: DenseMut<'_, f64>,
    options: &RefineOptions,
) -> Result<RefineReport> {
    if a32.shape() != a.shape() || a32.nnz() != a.nnz() {
        return Err(Error::invalid(format!(
            "the f32 matrix ({}x{}, {} entries) is not the f64 one ({}x{}, {} entries)",
            a32.rows(),
            a32.cols(),
            a32.nnz(),
            a.rows(),
            a.cols(),
            a.nnz()
        )));
    }
    let mut inner = Solver::new(backend, a32, &options.inner)?;
    let n = a.rows();
    b.expect_shape("refine b", (n, 1))?;
    x.expect_shape("refine x", (n, 1))?;
    let mut plan = backend.plan_spmv(a, &SpmvDesc::new(Precision::F64))?;
    let vector64 = || backend.zeros::<f64>(n, 1, Layout::ColMajor);
    let vector32 = || backend.zeros::<f32>(n, 1, Layout::ColMajor);
    let (mut r, mut d) = (vector64()?, vector64()?);
    let (mut r32, mut d32, zero32) = (vector32()?, vector32()?, vector32()?);
    let mut s: Dense<f64> = backend.zeros(2, 1, Layout::ColMajor)?;
    let start = Instant::now();
    backend.dot(b, b, None, s.as_mut(), [BB, BB])?;
    let mut history = Vec::new();
    let mut inner_iterations = 0;
    let mut refinements = 0;
    loop {
        backend.copy(b, r.as_mut())?;
        plan.run(-1.0, x.as_ref(), 1.0, r.as_mut())?;
        backend.dot(r.as_ref(), r.as_ref(), None, s.as_mut(), [RR, RR])?;
        let mut v = [0.0; 2];
        backend.read_scalars(s.as_ref(), &mut v)?;
        let rel = if v[BB] == 0.0 {
            v[RR].sqrt()
        } else {
            (v[RR] / v[BB]).sqrt()
        };
        history.push(rel);
        if rel <= options.tol || refinements == options.max_refinements {
            return Ok(RefineReport {
                refinements,
                inner_iterations,
                converged: rel <= options.tol,
                relative_residual: rel,
                time: start.elapsed(),
                history,
            });
        }
        backend.convert(r.as_ref(), r32.as_mut())?;
        backend.copy(zero32.as_ref(), d32.as_mut())?;
        inner_iterations += inner.solve(r32.as_ref(), d32.as_mut())?.iterations;
        backend.convert(d32.as_ref(), d.as_mut())?;
        backend.axpy(Coef::one(), d.as_ref(), x.reborrow(), s.as_ref())?;
        refinements += 1;
    }
}
