//! Runs a planned operation on the chosen backend, times it, checks it against the oracle and
//! describes the outcome as one table row.

use std::time::{Duration, Instant};

use sparse_blas::bound::{Expectation, Verdict};
use sparse_blas::cost::{self, Cost, SparseShape};
use sparse_blas::{
    AttentionDesc, Backend, Csr, Dense, DenseRef, Executor, Layout, OpKind, PlanInfo, Result,
    Scalar, SddmmDesc, SpmmDesc, SpmvDesc, ValueOrder,
};

/// How often to run an operation: `runs` timed runs, or until `budget` has passed (at least one).
#[derive(Clone, Copy, Debug)]
pub struct Repeat {
    pub runs: usize,
    pub budget: Duration,
}

/// One row of the result table.
pub struct Row {
    pub op: OpKind,
    pub info: PlanInfo,
    pub median: Duration,
    pub cost: Cost,
    pub verdict: Option<Verdict>,
}

impl Row {
    pub const HEADER: &'static str =
        "op         format    backend   precision  algorithm     time(ms)   GFLOP/s     GB/s  error/bound  pass";

    pub fn line(&self) -> String {
        let secs = self.median.as_secs_f64().max(1e-12);
        let (ratio, pass) = match &self.verdict {
            Some(v) => (
                format!("{:.3}", v.max_ratio),
                if v.passed() { "yes" } else { "NO" },
            ),
            None => ("-".to_string(), "-"),
        };
        format!(
            "{:<10} {:<9} {:<9} {:<10} {:<12} {:>9.3} {:>9.2} {:>8.2} {:>12} {:>5}",
            self.op.name(),
            self.info.format.name(),
            self.info.backend.name(),
            self.info.precision.name(),
            self.info.algorithm.name(),
            secs * 1e3,
            self.cost.flops / secs / 1e9,
            self.cost.bytes / secs / 1e9,
            ratio,
            pass
        )
    }

    pub fn passed(&self) -> bool {
        self.verdict.as_ref().is_none_or(Verdict::passed)
    }
}

fn shape<T: Scalar>(a: &Csr<T>) -> SparseShape {
    SparseShape {
        rows: a.rows(),
        cols: a.cols(),
        nnz: a.nnz(),
        value: T::DTYPE,
        index_bytes: 4,
    }
}

/// Median of timed runs after one warm-up; `once` prepares and times a single run.
fn median_time(repeat: Repeat, mut once: impl FnMut() -> Result<Duration>) -> Result<Duration> {
    once()?;
    let mut times = Vec::new();
    let start = Instant::now();
    while times.is_empty() || (times.len() < repeat.runs && start.elapsed() < repeat.budget) {
        times.push(once()?);
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// Wall time of `f` with the backend idle before and after.
fn timed(backend: &Backend, f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    backend.synchronize()?;
    let t = Instant::now();
    f()?;
    backend.synchronize()?;
    Ok(t.elapsed())
}

/// The output a run starts from: the prior values when beta reads them, else zeros.
fn initial_output<O: Scalar>(
    backend: &Backend,
    prior: Option<&Dense<O>>,
    rows: usize,
    cols: usize,
    layout: Layout,
) -> Result<Dense<O>> {
    match prior {
        Some(p) => backend.upload(p.as_ref()),
        None => backend.zeros(rows, cols, layout),
    }
}

fn to_f64<O: Scalar>(host: &Dense<O>) -> Vec<f64> {
    let mut out = Vec::with_capacity(host.rows() * host.cols());
    for i in 0..host.rows() {
        for j in 0..host.cols() {
            out.push(host.at(i, j).to_f64());
        }
    }
    out
}

fn verdict(
    check: bool,
    expectation: impl FnOnce() -> Result<Expectation>,
    got: &[f64],
) -> Result<Option<Verdict>> {
    if check {
        Ok(Some(expectation()?.check(got)?))
    } else {
        Ok(None)
    }
}

/// Scalars of an update: alpha, beta and, when beta reads it, the prior output.
pub struct Update<'a, O> {
    pub alpha: f64,
    pub beta: f64,
    pub prior: Option<&'a Dense<O>>,
}

impl<O> Update<'_, O> {
    fn reads_output(&self) -> bool {
        self.beta != 0.0
    }
}

pub fn spmv<T: Scalar>(
    backend: &Backend,
    a: &Csr<T>,
    desc: &SpmvDesc,
    x: &Dense<T>,
    update: Update<'_, T::Out>,
    repeat: Repeat,
    check: bool,
) -> Result<(Dense<T::Out>, Row)> {
    let mut plan = backend.plan_spmv(a.as_ref(), desc)?;
    let xd = backend.upload(x.as_ref())?;
    let prior = update.prior.filter(|_| update.reads_output());
    let mut y = initial_output(backend, prior, a.rows(), 1, Layout::ColMajor)?;
    let (alpha, beta) = (
        <T::Acc as sparse_blas::Accumulator>::from_f64(update.alpha),
        <T::Acc as sparse_blas::Accumulator>::from_f64(update.beta),
    );
    let median = median_time(repeat, || {
        // The output is also an input when beta reads it: restore it, outside the timing.
        if let Some(p) = prior {
            y = backend.upload(p.as_ref())?;
        }
        timed(backend, || plan.run(alpha, xd.as_ref(), beta, y.as_mut()))
    })?;
    let y = backend.download(&y)?;
    let got = to_f64(&y);
    let verdict = verdict(
        check,
        || {
            sparse_blas::bound::spmv(
                a.as_ref(),
                desc.precision,
                update.alpha,
                x.as_ref(),
                update.beta,
                prior.map(Dense::as_ref),
            )
        },
        &got,
    )?;
    let row = Row {
        op: OpKind::Spmv,
        info: plan.info().clone(),
        median,
        cost: cost::spmv(shape(a), <T::Out as Scalar>::DTYPE, update.reads_output()),
        verdict,
    };
    Ok((y, row))
}

#[allow(clippy::too_many_arguments)]
pub fn spmm<T: Scalar>(
    backend: &Backend,
    a: &Csr<T>,
    desc: &SpmmDesc,
    b: &Dense<T>,
    update: Update<'_, T::Out>,
    layout: Layout,
    repeat: Repeat,
    check: bool,
) -> Result<(Dense<T::Out>, Row)> {
    let mut plan = backend.plan_spmm(a.as_ref(), desc)?;
    let bd = backend.upload(b.as_ref())?;
    let prior = update.prior.filter(|_| update.reads_output());
    let mut c = initial_output(backend, prior, a.rows(), b.cols(), layout)?;
    let (alpha, beta) = (
        <T::Acc as sparse_blas::Accumulator>::from_f64(update.alpha),
        <T::Acc as sparse_blas::Accumulator>::from_f64(update.beta),
    );
    let median = median_time(repeat, || {
        // The output is also an input when beta reads it: restore it, outside the timing.
        if let Some(p) = prior {
            c = backend.upload(p.as_ref())?;
        }
        timed(backend, || plan.run(alpha, bd.as_ref(), beta, c.as_mut()))
    })?;
    let c = backend.download(&c)?;
    let got = to_f64(&c);
    let verdict = verdict(
        check,
        || {
            sparse_blas::bound::spmm(
                a.as_ref(),
                desc.precision,
                update.alpha,
                b.as_ref(),
                update.beta,
                prior.map(Dense::as_ref),
            )
        },
        &got,
    )?;
    let cost = cost::spmm(
        shape(a),
        b.cols(),
        <T::Out as Scalar>::DTYPE,
        update.reads_output(),
    );
    let row = Row {
        op: OpKind::Spmm,
        info: plan.info().clone(),
        median,
        cost,
        verdict,
    };
    Ok((c, row))
}

#[allow(clippy::too_many_arguments)]
pub fn sddmm<T: Scalar>(
    backend: &Backend,
    s: &Csr<T>,
    desc: &SddmmDesc,
    x: &Dense<T>,
    y: &Dense<T>,
    update: Update<'_, T::Out>,
    repeat: Repeat,
    check: bool,
) -> Result<(Dense<T::Out>, Row)> {
    let mut plan = backend.plan_sddmm(s.as_ref(), desc)?;
    let order = plan.value_order().cloned();
    let (xd, yd) = (backend.upload(x.as_ref())?, backend.upload(y.as_ref())?);
    let prior = update.prior.filter(|_| update.reads_output());
    let staged = prior.map(|p| in_value_order(p, order.as_ref()));
    let slots = order.as_ref().map_or(s.nnz(), ValueOrder::len);
    let mut c = initial_output(backend, staged.as_ref(), slots, 1, Layout::ColMajor)?;
    let (alpha, beta) = (
        <T::Acc as sparse_blas::Accumulator>::from_f64(update.alpha),
        <T::Acc as sparse_blas::Accumulator>::from_f64(update.beta),
    );
    let median = median_time(repeat, || {
        // The output is also an input when beta reads it: restore it, outside the timing.
        if let Some(p) = &staged {
            c = backend.upload(p.as_ref())?;
        }
        timed(backend, || {
            plan.run(alpha, xd.as_ref(), yd.as_ref(), beta, c.as_mut())
        })
    })?;
    let c = from_value_order(backend.download(&c)?, order.as_ref())?;
    let got = to_f64(&c);
    let verdict = verdict(
        check,
        || {
            sparse_blas::bound::sddmm(
                s.as_ref(),
                desc.precision,
                update.alpha,
                x.as_ref(),
                y.as_ref(),
                update.beta,
                prior.map(Dense::as_ref),
                desc.scale_by_values,
            )
        },
        &got,
    )?;
    let cost = cost::sddmm(
        shape(s),
        x.cols(),
        <T::Out as Scalar>::DTYPE,
        desc.scale_by_values,
        update.reads_output(),
    );
    let row = Row {
        op: OpKind::Sddmm,
        info: plan.info().clone(),
        median,
        cost,
        verdict,
    };
    Ok((c, row))
}

#[allow(clippy::too_many_arguments)]
pub fn attention<T: Scalar>(
    backend: &Backend,
    a: &Csr<T>,
    desc: &AttentionDesc,
    q: &Dense<T>,
    k: &Dense<T>,
    v: &Dense<T>,
    repeat: Repeat,
    check: bool,
) -> Result<(Dense<T::Out>, Row)> {
    let mut plan = backend.plan_attention(a.as_ref(), desc)?;
    let (qd, kd, vd) = (
        backend.upload(q.as_ref())?,
        backend.upload(k.as_ref())?,
        backend.upload(v.as_ref())?,
    );
    let mut o = backend.zeros(a.rows(), v.cols(), Layout::RowMajor)?;
    let median = median_time(repeat, || {
        timed(backend, || {
            plan.run(qd.as_ref(), kd.as_ref(), vd.as_ref(), o.as_mut())
        })
    })?;
    let o = backend.download(&o)?;
    let got = to_f64(&o);
    let heads = desc.shape(q.cols(), v.cols())?;
    let verdict = verdict(
        check,
        || {
            sparse_blas::bound::attention(
                a.as_ref(),
                desc.precision,
                q.as_ref(),
                k.as_ref(),
                v.as_ref(),
                &heads,
            )
        },
        &got,
    )?;
    let cost = cost::attention(shape(a), q.cols(), v.cols(), <T::Out as Scalar>::DTYPE);
    let row = Row {
        op: OpKind::Attention,
        info: plan.info().clone(),
        median,
        cost,
        verdict,
    };
    Ok((o, row))
}

/// SDDMM values in CSR entry order rearranged into a plan's value order (padding slots 0).
fn in_value_order<O: Scalar>(csr_order: &Dense<O>, order: Option<&ValueOrder>) -> Dense<O> {
    let (slots, at): (usize, Box<dyn Fn(usize) -> Option<usize>>) = match order {
        None => (csr_order.rows(), Box::new(Some)),
        Some(order) => (order.len(), Box::new(|s| order.entry(s))),
    };
    Dense::from_fn(slots, 1, Layout::ColMajor, |s, _| {
        at(s).map_or(O::from_f64(0.0), |e| csr_order.at(e, 0))
    })
}

/// SDDMM values in a plan's value order back in CSR entry order.
fn from_value_order<O: Scalar>(c: Dense<O>, order: Option<&ValueOrder>) -> Result<Dense<O>> {
    match order {
        None => Ok(c),
        Some(order) => {
            let values = order.to_csr_order(&c.into_host_vec()?)?;
            let n = values.len();
            Dense::from_vec(values, n, 1, n.max(1), Layout::ColMajor)
        }
    }
}

/// A dense operand converted from f64 (rounding to T).
pub fn cast_dense<T: Scalar>(d: &Dense<f64>) -> Dense<T> {
    let view: DenseRef<'_, f64> = d.as_ref();
    Dense::from_fn(d.rows(), d.cols(), d.layout(), |i, j| {
        T::from_f64(view.at(i, j))
    })
}
