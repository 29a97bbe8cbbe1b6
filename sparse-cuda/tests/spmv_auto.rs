//! `auto` SpMV on the cuda backend against the oracle: the rule's choice (`vector-split` for
//! skewed rows under 2^20 entries, cuSPARSE's COO SpMV in f64 and f32 and merge-path in f16
//! above; COO `atomic` for a small matrix with a long row in f64 and f32; `scalar`
//! for a large matrix of short, local rows however skewed; BSR in f32 and f16 for a large one of
//! regular, local rows made of whole 4 x 4 blocks, `vector` with a lane for about four entries
//! for one of other regular, local rows; `scalar` or `vector` otherwise) and
//! plan-time tuning, which must keep a candidate that computes the product, report what it kept
//! and what tuning cost; both plans must take value updates.
//!
//! Needs a GPU with cuSPARSE; without one each test prints `skipped: <reason>` and passes,
//! unless `SPARSE_REQUIRE_GPU=1`.

mod common;

use common::{available, collect, doubled, value, Case, Failures, Host, SpmvCase};
use sparse_core::{
    Algorithm, BackendKind, DenseRef, Executor, Format, Layout, Precision, Scalar, SpmvDesc,
    SpmvPlan,
};
use sparse_cuda::CudaBackend;
use sparse_formats::{generate, Csr};

fn backend() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

/// `rows` x 2500: row 7 holds 2,400 entries (longer than the 1,024 that make rows skewed), the
/// others `short` to `short + 3`.
fn skewed<T: Scalar>(rows: usize, short: usize) -> Csr<T> {
    let mut triplets = Vec::new();
    for i in 0..rows {
        let len = if i == 7 { 2400 } else { short + i % 4 };
        for k in 0..len {
            let j = (i * 37 + k * 1009) % 2500;
            triplets.push((i, j, T::from_f64(value(i, j))));
        }
    }
    Csr::from_triplets(rows, 2500, &triplets).expect("valid matrix")
}

/// 262,144 x 262,144, as a web graph's short rows: every fourth row holds 8 entries next to the
/// diagonal, the others none (a coefficient of variation of 1.7, the longest row 8).
fn sparse_rows<T: Scalar>() -> Csr<T> {
    let n = 1 << 18;
    let mut triplets = Vec::new();
    for i in (0..n).step_by(4) {
        for j in i..(i + 8).min(n) {
            triplets.push((i, j, T::from_f64(value(i, j))));
        }
    }
    Csr::from_triplets(n, n, &triplets).expect("valid matrix")
}

/// A tridiagonal 500 x 500 matrix.
fn banded<T: Scalar>() -> Csr<T> {
    let mut triplets = Vec::new();
    for i in 0..500usize {
        for j in i.saturating_sub(1)..(i + 2).min(500) {
            triplets.push((i, j, T::from_f64(value(i, j))));
        }
    }
    Csr::from_triplets(500, 500, &triplets).expect("valid matrix")
}

/// `n` x `n` with a band of `half` entries on each side of the diagonal: regular, local rows.
fn band<T: Scalar>(n: usize, half: usize) -> Csr<T> {
    let mut triplets = Vec::new();
    for i in 0..n {
        for j in i.saturating_sub(half)..(i + half + 1).min(n) {
            triplets.push((i, j, T::from_f64(value(i, j))));
        }
    }
    Csr::from_triplets(n, n, &triplets).expect("valid matrix")
}

fn case<T: Scalar>(a: &Csr<T>) -> SpmvCase<T> {
    SpmvCase {
        alpha: 1.5,
        x: Host::new((a.cols(), 1), Layout::ColMajor, 0, |i, _| value(i, 3)),
        beta: -0.5,
        y: Host::new((a.rows(), 1), Layout::ColMajor, 0, |i, _| value(i, 1)),
    }
}

fn check_auto<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    let f16 = precision == Precision::F16;
    let split = (BackendKind::Cuda, Format::Csr, Algorithm::VectorSplit);
    let vendor = (BackendKind::Cusparse, Format::Coo, Algorithm::VendorDefault);
    for (name, a, expected) in [
        ("skewed", skewed::<T>(4000, 8), split),
        (
            "large skewed",
            skewed::<T>(60_000, 18),
            if f16 {
                (BackendKind::Cuda, Format::Csr, Algorithm::MergePath)
            } else {
                vendor
            },
        ),
        (
            "short sparse rows",
            sparse_rows::<T>(),
            (BackendKind::Cuda, Format::Csr, Algorithm::Scalar),
        ),
        ("skewed, long mean", skewed::<T>(1200, 40), split),
        (
            "small skewed",
            skewed::<T>(300, 2),
            if f16 {
                split
            } else {
                (BackendKind::Cuda, Format::Coo, Algorithm::Atomic)
            },
        ),
        (
            "banded",
            banded::<T>(),
            (BackendKind::Cuda, Format::Csr, Algorithm::Vector),
        ),
        // Large, local and regular: `vector` with a lane for about four entries, each lane's
        // loads of four steps together; rows of 7 (two lanes, one group; in f64 only, where
        // they hold 64 bytes or more), 29 (eight lanes, one group) and 41 entries (eight lanes,
        // two groups). Made of whole 4 x 4 blocks: BSR in f32 and f16.
        (
            "3D stencil",
            generate::poisson3d(45).expect("valid matrix"),
            (
                BackendKind::Cuda,
                Format::Csr,
                if precision == Precision::F64 {
                    Algorithm::Vector
                } else {
                    Algorithm::Scalar
                },
            ),
        ),
        (
            "3D stencil of 4 x 4 blocks",
            generate::block_poisson3d(18, 4).expect("valid matrix"),
            if precision == Precision::F64 {
                (BackendKind::Cuda, Format::Csr, Algorithm::Vector)
            } else {
                (BackendKind::Cuda, Format::Bsr, Algorithm::Vector)
            },
        ),
        (
            "band",
            band::<T>(22_000, 14),
            (BackendKind::Cuda, Format::Csr, Algorithm::Vector),
        ),
        (
            "wide band",
            band::<T>(15_000, 20),
            (BackendKind::Cuda, Format::Csr, Algorithm::Vector),
        ),
    ] {
        let what = format!("auto {name} {precision}");
        match b.plan_spmv(a.as_ref(), &SpmvDesc::new(precision)) {
            Ok(mut plan) => {
                let info = plan.info();
                let chosen = (info.backend, info.format, info.algorithm);
                if chosen != expected {
                    failures.0.push(format!(
                        "{what}: chose {chosen:?}, the rule says {expected:?}"
                    ));
                }
                case(&a).check(&what, b, plan.as_mut(), &a, precision, failures);
                check_updated(&what, b, plan.as_mut(), &a, precision, failures);
            }
            Err(e) => failures.error(&what, e),
        }
    }
}

fn check_tuned<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    for (name, a) in [("skewed", skewed::<T>(300, 2)), ("banded", banded::<T>())] {
        let what = format!("tuned {name} {precision}");
        let mut plan = match b.plan_spmv(a.as_ref(), &SpmvDesc::new(precision).tuned()) {
            Ok(plan) => plan,
            Err(e) => {
                failures.error(&what, e);
                continue;
            }
        };
        let info = plan.info().clone();
        if info.algorithm == Algorithm::Auto || info.plan_time.tuning.is_zero() {
            failures.0.push(format!(
                "{what}: kept {} after {:?} of tuning",
                info.algorithm, info.plan_time.tuning
            ));
        }
        let what = format!(
            "{what} ({} {} {})",
            info.backend, info.format, info.algorithm
        );
        case(&a).check(&what, b, plan.as_mut(), &a, precision, failures);
        check_updated(&what, b, plan.as_mut(), &a, precision, failures);
    }
}

/// New values, the same pattern: the plan, in whatever format it built, must compute with them.
fn check_updated<T: Scalar<Out = T>>(
    what: &str,
    b: &CudaBackend,
    plan: &mut dyn SpmvPlan<T>,
    a: &Csr<T>,
    precision: Precision,
    failures: &mut Failures,
) {
    let revalued = doubled(a);
    let what = format!("{what} updated");
    match plan.update_values(DenseRef::vector(revalued.values())) {
        Ok(()) => case(a).check(&what, b, plan, &revalued, precision, failures),
        Err(e) => failures.error(&what, e),
    }
}

#[test]
fn auto_follows_the_rule_and_matches_the_oracle() {
    collect(backend(), |b, failures| {
        check_auto::<f64>(b, Precision::F64, failures);
        check_auto::<f32>(b, Precision::F32, failures);
        check_auto::<half::f16>(b, Precision::F16, failures);
    });
}

#[test]
fn tuning_keeps_a_candidate_that_matches_the_oracle() {
    collect(backend(), |b, failures| {
        check_tuned::<f64>(b, Precision::F64, failures);
        check_tuned::<f32>(b, Precision::F32, failures);
        check_tuned::<half::f16>(b, Precision::F16, failures);
    });
}
