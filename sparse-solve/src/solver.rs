//! A solver planned once for a matrix: the SpMV plan, the inverse diagonal, the work vectors and
//! the scalar workspace, reused by every solve.

use std::time::{Duration, Instant};

use sparse_core::{
    CsrRef, DType, Dense, DenseMut, DenseRef, Error, Layout, Precision, Real, Result, SpIndex,
    SpmvDesc, SpmvPlan, VectorOps,
};

use crate::options::{Method, Precond, SolveOptions, SolveReport};
use crate::{bicgstab, cg};

/// Slots of the scalar workspace (the methods lay out theirs below this count).
pub(crate) const SLOTS: usize = 12;
/// ‖b‖², the first slot of every method.
pub(crate) const BB: usize = 0;
/// ‖b - Ax‖² of the final x, the last slot of every method.
pub(crate) const TRUE_RR: usize = SLOTS - 1;

/// How an iteration ended.
pub(crate) struct Outcome {
    pub iterations: usize,
    pub converged: bool,
    pub history: Vec<f64>,
}

/// What a method's iteration works with.
pub(crate) struct Parts<'s, 'a, E, T: Real> {
    pub backend: &'s E,
    pub plan: &'s mut (dyn SpmvPlan<T> + 'a),
    pub inv_diag: Option<&'s Dense<T>>,
    pub s: &'s mut Dense<f64>,
    pub options: &'s SolveOptions,
}

impl<E: VectorOps, T: Real> Parts<'_, '_, E, T> {
    /// Reads the scalar workspace (one transfer, which waits for the work before it).
    pub fn read(&self) -> Result<[f64; SLOTS]> {
        let mut v = [0.0; SLOTS];
        self.backend.read_scalars(self.s.as_ref(), &mut v)?;
        Ok(v)
    }

    /// The residual's relative norm from the workspace, kept in the history when asked.
    pub fn relative(&self, v: &[f64; SLOTS], rr: usize, history: &mut Vec<f64>) -> f64 {
        let rel = (v[rr].max(0.0) / v[BB]).sqrt();
        if self.options.history {
            history.push(rel);
        }
        rel
    }

    /// Whether iteration `k` ends with a test.
    pub fn test_at(&self, k: usize) -> bool {
        k % self.options.check_every == 0 || k == self.options.max_iter
    }
}

/// Where a method stands across its restarts. The recurrence's residual drifts from b - Ax: a
/// solve ends only when the residual recomputed from x meets the tolerance, restarts from it
/// when it does not, and stops (not converged) when a restart no longer lowers it.
pub(crate) struct Restarts {
    /// Iterations run before the current restart.
    pub done: usize,
    /// The relative b - Ax at the last restart.
    last: f64,
    pub history: Vec<f64>,
}

impl Restarts {
    pub fn new() -> Self {
        Restarts {
            done: 0,
            last: f64::INFINITY,
            history: Vec::new(),
        }
    }

    pub fn outcome(&mut self, iterations: usize, converged: bool) -> Outcome {
        Outcome {
            iterations,
            converged,
            history: std::mem::take(&mut self.history),
        }
    }

    /// Tests b - Ax (slot `rr` of the workspace `w`) at a start: the outcome when the solve
    /// ends there.
    pub fn test_start<E: VectorOps, T: Real>(
        &mut self,
        parts: &Parts<'_, '_, E, T>,
        w: &[f64; SLOTS],
        rr: usize,
    ) -> Option<Outcome> {
        let rel = parts.relative(w, rr, &mut self.history);
        let converged = rel <= parts.options.tol;
        // A restart that did not lower b - Ax: the tolerance is below what this precision
        // attains.
        if converged || rel >= self.last {
            return Some(self.outcome(self.done, converged));
        }
        self.last = rel;
        None
    }

    /// After the recurrence: it met the tolerance at iteration `k` (restart from b - Ax), or
    /// ran out of iterations (the outcome).
    pub fn after(&mut self, met_at: Option<usize>, max_iter: usize) -> Option<Outcome> {
        match met_at {
            Some(k) => {
                self.done = k;
                None
            }
            None => Some(self.outcome(max_iter, false)),
        }
    }
}

/// A residual that is not a number: the recurrence overflowed or divided by zero.
pub(crate) fn not_finite(method: Method, iteration: usize) -> Error {
    Error::Breakdown {
        method: method.name(),
        iteration,
        quantity: "the residual is not finite".to_string(),
    }
}

/// A solver for `A x = b` with one matrix and many right-hand sides.
pub struct Solver<'a, E: VectorOps, T: Real> {
    backend: &'a E,
    plan: Box<dyn SpmvPlan<T> + 'a>,
    inv_diag: Option<Dense<T>>,
    work: Vec<Dense<T>>,
    s: Dense<f64>,
    options: SolveOptions,
    n: usize,
}

impl<'a, E: VectorOps, T: Real> Solver<'a, E, T> {
    /// Plans the SpMV, computes and uploads the inverse diagonal (Jacobi) and allocates the
    /// work vectors. `a` must be square; under Jacobi its diagonal must have no zero.
    pub fn new<I: SpIndex>(
        backend: &'a E,
        a: CsrRef<'a, T, I>,
        options: &SolveOptions,
    ) -> Result<Self> {
        options.validate()?;
        let (rows, cols) = a.shape();
        if rows != cols {
            return Err(Error::NotSquare { rows, cols });
        }
        let inv_diag = match options.precond {
            Precond::None => None,
            Precond::Jacobi => Some(backend.upload(DenseRef::vector(&inverse_diagonal(a)?))?),
        };
        let precision = if T::DTYPE == DType::F64 {
            Precision::F64
        } else {
            Precision::F32
        };
        let desc = options.spmv.unwrap_or(SpmvDesc::new(precision));
        let plan = backend.plan_spmv(a, &desc)?;
        let vectors = match options.method {
            Method::Cg => cg::VECTORS,
            Method::Bicgstab => bicgstab::VECTORS,
        };
        let work = (0..vectors)
            .map(|_| backend.zeros::<T>(rows, 1, Layout::ColMajor))
            .collect::<Result<Vec<_>>>()?;
        Ok(Solver {
            backend,
            plan,
            inv_diag,
            work,
            s: backend.zeros::<f64>(SLOTS, 1, Layout::ColMajor)?,
            options: options.clone(),
            n: rows,
        })
    }

    pub fn options(&self) -> &SolveOptions {
        &self.options
    }

    /// Solves `A x = b` from the initial guess in `x` (n x 1, in the backend's memory, as `b`).
    /// On an error other than running out of iterations, x holds unspecified values.
    pub fn solve(&mut self, b: DenseRef<'_, T>, mut x: DenseMut<'_, T>) -> Result<SolveReport> {
        b.expect_shape("solve b", (self.n, 1))?;
        x.expect_shape("solve x", (self.n, 1))?;
        let mut parts = Parts {
            backend: self.backend,
            plan: self.plan.as_mut(),
            inv_diag: self.inv_diag.as_ref(),
            s: &mut self.s,
            options: &self.options,
        };
        let start = Instant::now();
        let outcome = match self.options.method {
            Method::Cg => cg::run(&mut parts, &mut self.work, b, x.reborrow())?,
            Method::Bicgstab => bicgstab::run(&mut parts, &mut self.work, b, x.reborrow())?,
        };
        let time = start.elapsed();
        let relative_residual = true_residual(&mut parts, &mut self.work[0], b, x.as_ref())?;
        let spmv_time = spmv_time(&mut parts, &mut self.work)?;
        let time_per_iteration = time / outcome.iterations.max(1) as u32;
        let spmvs = self.options.method.spmvs_per_iteration() as f64;
        let spmv_share = if outcome.iterations == 0 {
            0.0
        } else {
            (spmvs * spmv_time.as_secs_f64() / time_per_iteration.as_secs_f64()).min(1.0)
        };
        Ok(SolveReport {
            method: self.options.method,
            precond: self.options.precond,
            iterations: outcome.iterations,
            converged: outcome.converged,
            relative_residual,
            time,
            time_per_iteration,
            spmv_time,
            spmv_share,
            history: outcome.history,
        })
    }
}

/// Plans and solves `A x = b` once: [`Solver::new`] then [`Solver::solve`].
pub fn solve<E: VectorOps, T: Real, I: SpIndex>(
    backend: &E,
    a: CsrRef<'_, T, I>,
    b: DenseRef<'_, T>,
    x: DenseMut<'_, T>,
    options: &SolveOptions,
) -> Result<SolveReport> {
    Solver::new(backend, a, options)?.solve(b, x)
}

/// 1/a_ii for every row, or [`Error::ZeroDiagonal`] naming the first row without one.
fn inverse_diagonal<T: Real, I: SpIndex>(a: CsrRef<'_, T, I>) -> Result<Vec<T>> {
    (0..a.rows())
        .map(|i| {
            let (cols, values) = a.row(i);
            cols.iter()
                .position(|c| c.to_usize() == i)
                .map(|k| values[k])
                .filter(|&d| d != T::zero())
                .map(|d| T::one() / d)
                .ok_or(Error::ZeroDiagonal { row: i })
        })
        .collect()
}

/// ‖b - Ax‖/‖b‖, into the first work vector (whose contents the method no longer needs).
fn true_residual<E: VectorOps, T: Real>(
    parts: &mut Parts<'_, '_, E, T>,
    w: &mut Dense<T>,
    b: DenseRef<'_, T>,
    x: DenseRef<'_, T>,
) -> Result<f64> {
    parts.backend.copy(b, w.as_mut())?;
    parts.plan.run(-T::one(), x, T::one(), w.as_mut())?;
    parts.backend.dot(
        w.as_ref(),
        w.as_ref(),
        None,
        parts.s.as_mut(),
        [TRUE_RR, TRUE_RR],
    )?;
    let v = parts.read()?;
    Ok(if v[BB] == 0.0 {
        v[TRUE_RR].sqrt()
    } else {
        (v[TRUE_RR] / v[BB]).sqrt()
    })
}

/// Runs of the plan timed after a solve, waiting for each.
const SPMV_RUNS: u32 = 10;

/// One SpMV's time, on the first two work vectors.
fn spmv_time<E: VectorOps, T: Real>(
    parts: &mut Parts<'_, '_, E, T>,
    work: &mut [Dense<T>],
) -> Result<Duration> {
    let [x, y, ..] = work else {
        return Err(Error::internal("a method with fewer than two work vectors"));
    };
    parts.backend.synchronize()?;
    let start = Instant::now();
    for _ in 0..SPMV_RUNS {
        parts
            .plan
            .run(T::one(), x.as_ref(), T::zero(), y.as_mut())?;
    }
    parts.backend.synchronize()?;
    Ok(start.elapsed() / SPMV_RUNS)
}
