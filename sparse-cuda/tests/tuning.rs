//! Plan-time tuning of `auto` SpMM and SDDMM on the cuda backend (`SpmmDesc::tuned`,
//! `SddmmDesc::tuned`; SpMV's is in `spmv_auto.rs`): the kept plan must be a real candidate,
//! report what tuning cost, compute the product within the oracle's bound at widths up to and
//! past the tuned one (after `reserve`), and take value updates.
//!
//! Needs a GPU with cuSPARSE; without one each test prints `skipped: <reason>` and passes,
//! unless `SPARSE_REQUIRE_GPU=1`.

mod common;

use common::{available, collect, doubled, value, Case, Failures, SddmmCase, SpmmCase};
use sparse_core::{
    Algorithm, BackendKind, DenseRef, Executor, Layout, PlanInfo, Precision, Scalar, SddmmDesc,
    SpmmDesc,
};
use sparse_cuda::CudaBackend;
use sparse_formats::Csr;

/// The width tuning times at; runs use it, a narrower one and, after `reserve`, a wider one.
/// Odd, so that cuSPARSE's SpMM algorithms that need even leading dimensions refuse to run.
const TUNED_WIDTH: usize = 47;

fn backend() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

/// A skewed 300 x 700 matrix (row 7 of 650 entries, the others 2 to 5) and a tridiagonal one.
fn matrices<T: Scalar>() -> Vec<(&'static str, Csr<T>)> {
    let skewed: Vec<_> = (0..300usize)
        .flat_map(|i| {
            let len = if i == 7 { 650 } else { 2 + i % 4 };
            (0..len).map(move |k| (i, (i * 37 + k * 101) % 700))
        })
        .collect();
    let banded: Vec<_> = (0..400usize)
        .flat_map(|i| (i.saturating_sub(1)..(i + 2).min(400)).map(move |j| (i, j)))
        .collect();
    let csr = |rows, cols, cells: Vec<(usize, usize)>| {
        let triplets: Vec<_> = cells
            .into_iter()
            .map(|(i, j)| (i, j, T::from_f64(value(i, j))))
            .collect();
        Csr::from_triplets(rows, cols, &triplets).expect("valid matrix")
    };
    vec![
        ("skewed", csr(300, 700, skewed)),
        ("banded", csr(400, 400, banded)),
    ]
}

/// Records a plan that kept `auto` or reports no tuning time; names the kept algorithm.
fn kept(what: &str, info: &PlanInfo, failures: &mut Failures) -> String {
    if info.algorithm == Algorithm::Auto || info.plan_time.tuning.is_zero() {
        failures.0.push(format!(
            "{what}: kept {} after {:?} of tuning",
            info.algorithm, info.plan_time.tuning
        ));
    }
    format!(
        "{what} ({} {} {})",
        info.backend, info.format, info.algorithm
    )
}

fn check_spmm<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    let desc = SpmmDesc::new(precision).max_width(TUNED_WIDTH).tuned();
    for (name, a) in matrices::<T>() {
        let what = format!("tuned SpMM {name} {precision}");
        let mut plan = match b.plan_spmm(a.as_ref(), &desc) {
            Ok(plan) => plan,
            Err(e) => {
                failures.error(&what, e);
                continue;
            }
        };
        let what = kept(&what, plan.info(), failures);
        let layouts = (Layout::RowMajor, Layout::ColMajor);
        for n in [TUNED_WIDTH, 5] {
            let case = SpmmCase::<T>::from_values(a.shape(), n, layouts, 1, (1.5, -0.5, false));
            case.check(&what, b, plan.as_mut(), &a, precision, failures);
        }
        let wider = 2 * TUNED_WIDTH;
        let case = SpmmCase::<T>::from_values(a.shape(), wider, layouts, 0, (1.0, 0.0, true));
        match plan.reserve(wider) {
            Ok(()) => case.check(
                &format!("{what} reserved"),
                b,
                plan.as_mut(),
                &a,
                precision,
                failures,
            ),
            Err(e) => failures.error(&format!("{what} reserved"), e),
        }
        let revalued = doubled(&a);
        match plan.update_values(DenseRef::vector(revalued.values())) {
            Ok(()) => case.check(
                &format!("{what} updated"),
                b,
                plan.as_mut(),
                &revalued,
                precision,
                failures,
            ),
            Err(e) => failures.error(&format!("{what} updated"), e),
        }
    }
}

fn check_sddmm<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    for scale_by_values in [false, true] {
        let desc = SddmmDesc::new(precision)
            .max_width(TUNED_WIDTH)
            .scale_by_values(scale_by_values)
            .tuned();
        for (name, s) in matrices::<T>() {
            let what = format!("tuned SDDMM {name} {precision} scaled {scale_by_values}");
            let mut plan = match b.plan_sddmm(s.as_ref(), &desc) {
                Ok(plan) => plan,
                Err(e) => {
                    failures.error(&what, e);
                    continue;
                }
            };
            let what = kept(&what, plan.info(), failures);
            let layouts = (Layout::RowMajor, Layout::ColMajor, Layout::ColMajor);
            let case = |s: &Csr<T>, k, nan| {
                SddmmCase::<T>::from_values(
                    s,
                    k,
                    layouts,
                    1,
                    (1.5, if nan { 0.0 } else { -0.5 }, nan),
                    scale_by_values,
                )
            };
            for k in [TUNED_WIDTH, 3] {
                case(&s, k, false).check(&what, b, plan.as_mut(), &s, precision, failures);
            }
            let wider = 2 * TUNED_WIDTH;
            match plan.reserve(wider) {
                Ok(()) => case(&s, wider, true).check(
                    &format!("{what} reserved"),
                    b,
                    plan.as_mut(),
                    &s,
                    precision,
                    failures,
                ),
                Err(e) => failures.error(&format!("{what} reserved"), e),
            }
            let revalued = doubled(&s);
            match plan.update_values(DenseRef::vector(revalued.values())) {
                Ok(()) => case(&revalued, TUNED_WIDTH, false).check(
                    &format!("{what} updated"),
                    b,
                    plan.as_mut(),
                    &revalued,
                    precision,
                    failures,
                ),
                Err(e) => failures.error(&format!("{what} updated"), e),
            }
        }
    }
}

#[test]
fn tuned_spmm_keeps_a_candidate_that_matches_the_oracle() {
    collect(backend(), |b, failures| {
        check_spmm::<f64>(b, Precision::F64, failures);
        check_spmm::<f32>(b, Precision::F32, failures);
        check_spmm::<half::f16>(b, Precision::F16, failures);
    });
}

#[test]
fn tuned_sddmm_keeps_a_candidate_that_matches_the_oracle() {
    collect(backend(), |b, failures| {
        check_sddmm::<f64>(b, Precision::F64, failures);
        check_sddmm::<f32>(b, Precision::F32, failures);
        check_sddmm::<half::f16>(b, Precision::F16, failures);
    });
}
