//! Plan-time tuning of `auto` ([`SpmvDesc::tuned`], [`SpmmDesc::tuned`],
//! [`SddmmDesc::tuned`]): every candidate is planned and timed on the matrix itself and the
//! fastest is kept; the time that took is `PlanTime::tuning`. The candidates are this backend's
//! algorithms on the descriptor's format and, on CSR, cuSPARSE's algorithms for the operation
//! (on CSR and, for SpMV, on COO) when cuSPARSE can be used. A candidate that cannot be planned
//! or run on the timing operands (a fill limit, a shape or an odd leading dimension cuSPARSE
//! refuses) is passed over; when none can, the last error is returned.

use std::time::{Duration, Instant};

use sparse_core::{
    Accumulator, Algorithm, CsrRef, Dense, DenseMut, DenseRef, Error, Executor, Format, Layout,
    OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SddmmPlan, SpIndex, SpmmDesc, SpmmPlan,
    SpmvDesc, SpmvPlan, ValueOrder,
};

use crate::cusparse::CusparseBackend;
use crate::executor::CudaBackend;

/// Runs of a candidate timed, after two untimed ones.
const RUNS: u32 = 10;

/// One candidate: an algorithm on a format, run by this backend or, with `vendor`, by cuSPARSE.
struct Candidate<'v> {
    vendor: Option<&'v CusparseBackend>,
    format: Format,
    algorithm: Algorithm,
}

/// The candidates for `auto` of `op` on `format` in `precision` (see the module's text).
fn candidates<'v>(
    op: OpKind,
    format: Format,
    precision: Precision,
    vendor: Option<&'v CusparseBackend>,
) -> Vec<Candidate<'v>> {
    let mut all: Vec<Candidate<'v>> = CudaBackend::table(op, format, precision)
        .into_iter()
        .map(|offer| Candidate {
            vendor: None,
            format,
            algorithm: offer.algorithm,
        })
        .collect();
    if let (Some(vendor), Format::Csr) = (vendor, format) {
        let vendor_formats: &[Format] = match op {
            OpKind::Spmv => &[Format::Csr, Format::Coo],
            _ => &[Format::Csr],
        };
        for &on in vendor_formats {
            all.extend(
                CusparseBackend::table(op, on, precision)
                    .into_iter()
                    .map(|offer| Candidate {
                        vendor: Some(vendor),
                        format: on,
                        algorithm: offer.algorithm,
                    }),
            );
        }
    }
    all.retain(|c| c.algorithm != Algorithm::Auto);
    all
}

/// Mean time of one call of `run`, after two untimed ones.
fn mean_time(backend: &CudaBackend, mut run: impl FnMut() -> Result<()>) -> Result<Duration> {
    for _ in 0..2 {
        run()?;
    }
    backend.synchronize()?;
    let start = Instant::now();
    for _ in 0..RUNS {
        run()?;
    }
    backend.synchronize()?;
    Ok(start.elapsed() / RUNS)
}

/// A plan chosen by tuning: the fastest candidate, with the tuning time in its account.
struct Tuned<P> {
    plan: P,
    info: PlanInfo,
}

/// The fastest candidate for `auto` of `op` on `format` in `precision` as `plan` plans it (on
/// cuSPARSE when given it) and `time` times it, its info charged with the time since `started`
/// beyond its own planning.
fn fastest<P: ?Sized>(
    backend: &CudaBackend,
    (op, format, precision): (OpKind, Format, Precision),
    mut plan: impl FnMut(Option<&CusparseBackend>, Format, Algorithm) -> Result<Box<P>>,
    mut time: impl FnMut(&mut P) -> Result<Duration>,
    info: impl Fn(&P) -> &PlanInfo,
    started: Instant,
) -> Result<Tuned<Box<P>>> {
    let vendor = match format {
        Format::Csr => CusparseBackend::sharing(backend).ok(),
        _ => None,
    };
    let mut best: Option<(Duration, Box<P>)> = None;
    let mut last_error = None;
    for candidate in candidates(op, format, precision, vendor.as_ref()) {
        let mut planned = match plan(candidate.vendor, candidate.format, candidate.algorithm) {
            Ok(planned) => planned,
            Err(e) => {
                last_error = Some(e);
                continue;
            }
        };
        let took = match time(&mut planned) {
            Ok(took) => took,
            Err(e) => {
                last_error = Some(e);
                continue;
            }
        };
        if best.as_ref().is_none_or(|(fastest, _)| took < *fastest) {
            best = Some((took, planned));
        }
    }
    let Some((_, plan)) = best else {
        return Err(last_error.unwrap_or_else(|| {
            Error::internal(format!("tuning found no {op} candidate on {format}"))
        }));
    };
    let mut info = info(&plan).clone();
    info.plan_time.tuning = started.elapsed().saturating_sub(info.plan_time.total());
    Ok(Tuned { plan, info })
}

/// The SpMV plan tuning keeps, timed on x of ones with y written (beta = 0).
pub(crate) fn spmv<'a, T: Scalar, I: SpIndex>(
    backend: &CudaBackend,
    a: CsrRef<'a, T, I>,
    desc: &SpmvDesc,
) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
    let started = Instant::now();
    let x = backend.upload(DenseRef::vector(&vec![T::from_f64(1.0); a.cols()]))?;
    let mut y = backend.zeros::<T::Out>(a.rows(), 1, Layout::ColMajor)?;
    let (one, zero) = (T::Acc::ONE, T::Acc::ZERO);
    let tuned = fastest(
        backend,
        (OpKind::Spmv, desc.format, desc.precision),
        |vendor, format, algorithm| {
            let fixed = SpmvDesc {
                format,
                algorithm,
                tune: false,
                ..*desc
            };
            match vendor {
                Some(vendor) => vendor.plan_spmv(a, &fixed),
                None => backend.plan_spmv(a, &fixed),
            }
        },
        |plan: &mut (dyn SpmvPlan<T> + 'a)| {
            mean_time(backend, || plan.run(one, x.as_ref(), zero, y.as_mut()))
        },
        |plan| plan.info(),
        started,
    )?;
    Ok(Box::new(tuned))
}

/// The SpMM plan tuning keeps, timed on B of ones with C written (beta = 0), both row-major
/// with the reserved width.
pub(crate) fn spmm<'a, T: Scalar, I: SpIndex>(
    backend: &CudaBackend,
    a: CsrRef<'a, T, I>,
    desc: &SpmmDesc,
) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
    let started = Instant::now();
    let width = desc.reserved_width();
    let b = ones::<T>(backend, a.cols(), width)?;
    let mut c = backend.zeros::<T::Out>(a.rows(), width, Layout::RowMajor)?;
    let (one, zero) = (T::Acc::ONE, T::Acc::ZERO);
    let tuned = fastest(
        backend,
        (OpKind::Spmm, desc.format, desc.precision),
        |vendor, format, algorithm| {
            let fixed = SpmmDesc {
                format,
                algorithm,
                tune: false,
                ..*desc
            };
            match vendor {
                Some(vendor) => vendor.plan_spmm(a, &fixed),
                None => backend.plan_spmm(a, &fixed),
            }
        },
        |plan: &mut (dyn SpmmPlan<T> + 'a)| {
            mean_time(backend, || plan.run(one, b.as_ref(), zero, c.as_mut()))
        },
        |plan| plan.info(),
        started,
    )?;
    Ok(Box::new(tuned))
}

/// The SDDMM plan tuning keeps, timed on X and Y of ones (row-major, the reserved width) with
/// C written (beta = 0).
pub(crate) fn sddmm<'a, T: Scalar, I: SpIndex>(
    backend: &CudaBackend,
    s: CsrRef<'a, T, I>,
    desc: &SddmmDesc,
) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
    let started = Instant::now();
    let width = desc.reserved_width();
    let x = ones::<T>(backend, s.rows(), width)?;
    let y = ones::<T>(backend, s.cols(), width)?;
    let (one, zero) = (T::Acc::ONE, T::Acc::ZERO);
    let tuned = fastest(
        backend,
        (OpKind::Sddmm, desc.format, desc.precision),
        |vendor, format, algorithm| {
            let fixed = SddmmDesc {
                format,
                algorithm,
                tune: false,
                ..*desc
            };
            match vendor {
                Some(vendor) => vendor.plan_sddmm(s, &fixed),
                None => backend.plan_sddmm(s, &fixed),
            }
        },
        |plan: &mut (dyn SddmmPlan<T> + 'a)| {
            let values = plan.value_order().map_or(s.nnz(), ValueOrder::len);
            let mut c = backend.zeros::<T::Out>(values, 1, Layout::ColMajor)?;
            mean_time(backend, || {
                plan.run(one, x.as_ref(), y.as_ref(), zero, c.as_mut())
            })
        },
        |plan| plan.info(),
        started,
    )?;
    Ok(Box::new(tuned))
}

/// A rows x width row-major matrix of ones on the device.
fn ones<T: Scalar>(backend: &CudaBackend, rows: usize, width: usize) -> Result<Dense<T>> {
    let host = vec![T::from_f64(1.0); rows * width];
    backend.upload(DenseRef::from_slice(&host, rows, width, Layout::RowMajor)?)
}

impl<'a, T: Scalar> SpmvPlan<T> for Tuned<Box<dyn SpmvPlan<T> + 'a>> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        y: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        self.plan.run(alpha, x, beta, y)
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.plan.update_values(values)
    }
}

impl<'a, T: Scalar> SpmmPlan<T> for Tuned<Box<dyn SpmmPlan<T> + 'a>> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        self.plan.run(alpha, b, beta, c)
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.plan.update_values(values)
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.plan.reserve(width)?;
        let planned = self.plan.info();
        (self.info.bytes, self.info.reserved_width) = (planned.bytes, planned.reserved_width);
        Ok(())
    }
}

impl<'a, T: Scalar> SddmmPlan<T> for Tuned<Box<dyn SddmmPlan<T> + 'a>> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn value_order(&self) -> Option<&ValueOrder> {
        self.plan.value_order()
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        self.plan.run(alpha, x, y, beta, c)
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.plan.update_values(values)
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.plan.reserve(width)?;
        let planned = self.plan.info();
        (self.info.bytes, self.info.reserved_width) = (planned.bytes, planned.reserved_width);
        Ok(())
    }
}
