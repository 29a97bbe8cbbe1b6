//! The cusparse backend against the oracle (`sparse_cpu::bound`, built on the reference) on a
//! small matrix with an empty row and a long row: SpMV, SpMM and SDDMM for every algorithm of
//! the backend's table in f64, f32 and f16, dense operands in both layouts, padded and strided;
//! `beta == 0` over NaN, `alpha == 0`; plus cuBLAS GEMM. The plan contract: `update_values`
//! gives what a fresh plan of the new values gives, a run wider than the reservation is refused
//! until `reserve`, and runs never change a plan's bytes.
//!
//! Needs a GPU with cuSPARSE; without one each test prints `skipped: <reason>` and passes,
//! unless `SPARSE_REQUIRE_GPU=1`. Every failure is collected, so one run lists everything that
//! disagrees (or that cuSPARSE refused).

mod common;

use common::{
    acc, available, collect, layouts, value, Case, Failures, Host, SddmmCase, SpmmCase, SpmvCase,
};
use sparse_core::{
    Algorithm, BackendKind, Dense, Error, Executor, Format, Layout, OpKind, Precision, Scalar,
    SddmmDesc, SpmmDesc, SpmvDesc, Support,
};
use sparse_cuda::CusparseBackend;
use sparse_formats::{csr_from_dense, Csr};

/// Extra elements per leading dimension of a padded operand.
const PAD: usize = 3;

fn backend() -> Option<CusparseBackend> {
    available(BackendKind::Cusparse, CusparseBackend::new(0))
}

/// 45 x 37: row 3 empty, row 10 full, the rest about one entry in four.
fn matrix<T: Scalar>() -> Csr<T> {
    let mut triplets = Vec::new();
    for i in 0..45 {
        for j in 0..37 {
            if i != 3 && (i == 10 || (i * 13 + j * 5) % 4 == 0) {
                triplets.push((i, j, T::from_f64(value(i, j) + 0.3)));
            }
        }
    }
    Csr::from_triplets(45, 37, &triplets).expect("valid matrix")
}

/// (alpha, beta, whether the prior output is NaN): `beta == 0` must not read the output.
const SCALARS: &[(f64, f64, bool)] = &[
    (1.5, 0.0, true),
    (0.5, -2.0, false),
    (0.0, 0.5, false),
    (0.0, 0.0, true),
];

/// The algorithms the backend plans for (op, format) at `precision`: each plans or refuses
/// with Unsupported, and refuses everything when capability says Unsupported.
fn algorithms(
    b: &CusparseBackend,
    op: OpKind,
    format: Format,
    precision: Precision,
    plans: impl Fn(Algorithm) -> Result<(), Error>,
    failures: &mut Failures,
) -> Vec<Algorithm> {
    let native = b.capability(op, format, precision) != Support::Unsupported;
    let mut ran = Vec::new();
    for &algorithm in Algorithm::ALL {
        match plans(algorithm) {
            Ok(()) if native => ran.push(algorithm),
            Ok(()) => failures.0.push(format!(
                "{op} {format} {precision} {algorithm} planned though capability is Unsupported"
            )),
            Err(Error::Unsupported { .. }) => {}
            Err(e) => failures.error(&format!("{op} {format} {precision} {algorithm}"), e),
        }
    }
    if native && !ran.contains(&Algorithm::Auto) {
        failures.0.push(format!(
            "{op} {format} {precision}: native, but auto does not plan"
        ));
    }
    ran
}

fn spmv<T: Scalar<Out = T>>(b: &CusparseBackend, precision: Precision, failures: &mut Failures) {
    let a = matrix::<T>();
    for format in [Format::Csr, Format::Coo] {
        let desc = SpmvDesc::new(precision).format(format);
        let plan_for = |alg| b.plan_spmv(a.as_ref(), &desc.algorithm(alg)).map(drop);
        for alg in algorithms(b, OpKind::Spmv, format, precision, plan_for, failures) {
            let mut plan = b
                .plan_spmv(a.as_ref(), &desc.algorithm(alg))
                .expect("planned above");
            let info = plan.info().clone();
            assert_eq!(info.backend, BackendKind::Cusparse);
            assert_ne!(info.algorithm, Algorithm::Auto);
            let what = format!("spmv {format} {} {precision}", info.algorithm);
            for ((x_layout, y_layout), pad) in layouts().zip([PAD, 0, PAD, 0]) {
                for &(alpha, beta, nan) in SCALARS {
                    let case = SpmvCase {
                        alpha,
                        x: Host::new((a.cols(), 1), x_layout, pad, |i, _| value(i, 5)),
                        beta,
                        y: Host::new((a.rows(), 1), y_layout, pad, |i, _| {
                            if nan {
                                f64::NAN
                            } else {
                                value(i, 2)
                            }
                        }),
                    };
                    case.check(&what, b, plan.as_mut(), &a, precision, failures);
                }
            }
        }
    }
}

fn spmm<T: Scalar<Out = T>>(b: &CusparseBackend, precision: Precision, failures: &mut Failures) {
    let a = matrix::<T>();
    let desc = SpmmDesc::new(precision);
    let plan_for = |alg| b.plan_spmm(a.as_ref(), &desc.algorithm(alg)).map(drop);
    for alg in algorithms(b, OpKind::Spmm, Format::Csr, precision, plan_for, failures) {
        let mut plan = b
            .plan_spmm(a.as_ref(), &desc.algorithm(alg))
            .expect("planned above");
        let what = format!("spmm csr {} {precision}", plan.info().algorithm);
        for n in [33, 8, 1] {
            for (layouts, pad) in layouts().flat_map(|l| [(l, 0), (l, PAD)]) {
                for &scalars in SCALARS {
                    let case =
                        SpmmCase::from_values((a.rows(), a.cols()), n, layouts, pad, scalars);
                    let ran = case.run(b, plan.as_mut());
                    // The table's guard against an algorithm that faults on odd leading
                    // dimensions: a typed refusal, never a poisoned context.
                    if matches!(&ran, Err(Error::Unsupported { supported, .. })
                        if supported.contains("even leading dimensions"))
                    {
                        continue;
                    }
                    case.check_ran(&what, ran, &a, precision, failures);
                }
            }
        }
    }
}

fn sddmm<T: Scalar<Out = T>>(b: &CusparseBackend, precision: Precision, failures: &mut Failures) {
    let s = matrix::<T>();
    let desc = SddmmDesc::new(precision);
    match b.plan_sddmm(s.as_ref(), &desc.scale_by_values(true)) {
        Err(Error::Unsupported { supported, .. }) if supported.contains("scale_by_values") => {}
        Err(e) => failures.error("sddmm scale_by_values must be Unsupported", e),
        Ok(_) => failures
            .0
            .push("sddmm scale_by_values planned, but cuSPARSE cannot".into()),
    }
    let plan_for = |alg| b.plan_sddmm(s.as_ref(), &desc.algorithm(alg)).map(drop);
    for alg in algorithms(b, OpKind::Sddmm, Format::Csr, precision, plan_for, failures) {
        let mut plan = b
            .plan_sddmm(s.as_ref(), &desc.algorithm(alg))
            .expect("planned above");
        let what = format!("sddmm csr {precision}");
        for k in [8, 1] {
            for ((x_layout, y_layout), pad) in layouts().zip([PAD, 0, PAD, 0]) {
                let c_layout = if pad > 0 {
                    Layout::RowMajor
                } else {
                    Layout::ColMajor
                };
                let layouts = (x_layout, y_layout, c_layout);
                for &scalars in SCALARS {
                    let case = SddmmCase::from_values(&s, k, layouts, pad, scalars, false);
                    case.check(&what, b, plan.as_mut(), &s, precision, failures);
                }
            }
        }
    }
}

fn gemm<T: Scalar<Out = T>>(b: &CusparseBackend, precision: Precision, failures: &mut Failures) {
    let (m, k, n) = (19, 23, 7);
    for (a_layout, b_layout) in layouts() {
        for (c_layout, pad) in [(Layout::RowMajor, PAD), (Layout::ColMajor, 0)] {
            for &(alpha, beta, nan) in SCALARS {
                let what = format!("gemm {precision} A {a_layout} pad {pad}");
                let ah = Host::<T>::new((m, k), a_layout, pad, |i, j| value(i, j) + 0.125);
                let case =
                    SpmmCase::from_values((m, k), n, (b_layout, c_layout), pad, (alpha, beta, nan));
                let ran = (|| {
                    let ad = b.upload(ah.view())?;
                    let bd = b.upload(case.b.view())?;
                    let mut cd = b.upload(case.c.view())?;
                    b.gemm(
                        acc::<T>(alpha),
                        ad.as_ref(),
                        bd.as_ref(),
                        acc::<T>(beta),
                        cd.as_mut(),
                    )?;
                    b.download(&cd)
                })();
                let dense_a: Csr<T> = csr_from_dense(ah.view()).expect("dense A");
                case.check_ran(&what, ran, &dense_a, precision, failures);
            }
        }
    }
}

#[test]
fn spmv_spmm_sddmm_match_the_oracle() {
    collect(backend(), |b, failures| {
        eprintln!("{}", b.description());
        spmv::<f64>(b, Precision::F64, failures);
        spmv::<f32>(b, Precision::F32, failures);
        spmv::<half::f16>(b, Precision::F16, failures);
        spmm::<f64>(b, Precision::F64, failures);
        spmm::<f32>(b, Precision::F32, failures);
        spmm::<half::f16>(b, Precision::F16, failures);
        sddmm::<f64>(b, Precision::F64, failures);
        sddmm::<f32>(b, Precision::F32, failures);
        sddmm::<half::f16>(b, Precision::F16, failures);
    });
}

#[test]
fn cublas_gemm_matches_the_oracle() {
    collect(backend(), |b, failures| {
        gemm::<f64>(b, Precision::F64, failures);
        gemm::<f32>(b, Precision::F32, failures);
        gemm::<half::f16>(b, Precision::F16, failures);
    });
}

#[test]
fn deterministic_algorithms_repeat_bit_for_bit() {
    let Some(b) = backend() else { return };
    let a = matrix::<f32>();
    let x = Host::<f32>::new((a.cols(), 1), Layout::ColMajor, 0, |i, _| value(i, 1) / 3.0);
    for format in [Format::Csr, Format::Coo] {
        for alg in Algorithm::ALL {
            let desc = SpmvDesc::new(Precision::F32).format(format).algorithm(*alg);
            let Ok(mut plan) = b.plan_spmv(a.as_ref(), &desc) else {
                continue;
            };
            if !plan.info().deterministic {
                continue;
            }
            let xd = b.upload(x.view()).expect("upload");
            let mut runs = Vec::new();
            for _ in 0..3 {
                let mut y = b
                    .zeros::<f32>(a.rows(), 1, Layout::ColMajor)
                    .expect("zeros");
                plan.run(1.0, xd.as_ref(), 0.0, y.as_mut()).expect("run");
                let host = b
                    .download(&y)
                    .expect("download")
                    .into_host_vec()
                    .expect("host");
                runs.push(host.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
            }
            assert!(
                runs.windows(2).all(|w| w[0] == w[1]),
                "{format} {alg} claims determinism but runs differ"
            );
        }
    }
}

#[test]
fn empty_operands_only_scale_the_output() {
    collect(backend(), |b, failures| {
        let (alpha, beta) = (2.0, 0.5);
        // A without entries (and without rows): y = beta*y, A never read.
        for a in [Csr::<f32>::zeros(5, 4), Csr::<f32>::zeros(0, 4)] {
            let case = SpmvCase {
                alpha,
                x: Host::new((4, 1), Layout::ColMajor, 0, |i, _| value(i, 0)),
                beta,
                y: Host::new((a.rows(), 1), Layout::RowMajor, PAD, |i, _| value(i, 1)),
            };
            let ran = b
                .plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F32))
                .and_then(|mut plan| case.run(b, plan.as_mut()));
            let what = format!("spmv {}x4 without entries", a.rows());
            case.check_ran(&what, ran, &a, Precision::F32, failures);
        }
        // SDDMM with k = 0: every dot product is empty, C = beta*C.
        let s = matrix::<f32>();
        let case = SddmmCase {
            alpha,
            x: Host::new((s.rows(), 0), Layout::RowMajor, 0, value),
            y: Host::new((s.cols(), 0), Layout::ColMajor, 0, value),
            beta,
            c: Host::new((s.nnz(), 1), Layout::RowMajor, PAD, |e, _| value(e, 2)),
            scale_by_values: false,
        };
        let ran = b
            .plan_sddmm(s.as_ref(), &SddmmDesc::new(Precision::F32))
            .and_then(|mut plan| case.run(b, plan.as_mut()));
        case.check_ran("sddmm k = 0", ran, &s, Precision::F32, failures);
        // SpMM with n = 0 has no output element: it must simply succeed.
        let result = (|| {
            let mut plan = b.plan_spmm(s.as_ref(), &SpmmDesc::new(Precision::F32))?;
            let bd = b.zeros::<f32>(s.cols(), 0, Layout::RowMajor)?;
            let mut cd = b.zeros::<f32>(s.rows(), 0, Layout::RowMajor)?;
            plan.run(alpha as f32, bd.as_ref(), beta as f32, cd.as_mut())
        })();
        if let Err(e) = result {
            failures.error("spmm n = 0", e);
        }
    });
}

/// `a` with other values on the same pattern, and those values as an nnz x 1 host operand.
fn revalued(a: &Csr<f32>) -> (Csr<f32>, Host<f32>) {
    let mut b = a.clone();
    for (e, v) in b.values_mut().iter_mut().enumerate() {
        *v = (value(e, 4) * 2.0 - 0.7) as f32;
    }
    let new = Host::new((a.nnz(), 1), Layout::ColMajor, 0, |e, _| {
        f64::from(b.values()[e])
    });
    (b, new)
}

/// Bit patterns of a downloaded output, to compare two plans that promise determinism.
fn bits(d: &Dense<f32>) -> Vec<u32> {
    let host = d.as_ref().host("bits").expect("downloaded").to_vec();
    host.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn updated_values_give_what_a_fresh_plan_gives() {
    collect(backend(), |b, failures| {
        let a = matrix::<f32>();
        let (new_a, new_values) = revalued(&a);
        let precision = Precision::F32;
        for format in [Format::Csr, Format::Coo] {
            for alg in [Algorithm::Auto, Algorithm::VendorAlg2] {
                let desc = SpmvDesc::new(precision).format(format).algorithm(alg);
                let what = format!("spmv {format} {alg} after update_values");
                let case = SpmvCase {
                    alpha: 1.25,
                    x: Host::new((a.cols(), 1), Layout::RowMajor, PAD, |i, _| value(i, 5)),
                    beta: 0.5,
                    y: Host::new((a.rows(), 1), Layout::ColMajor, 0, |i, _| value(i, 2)),
                };
                let runs = (|| {
                    let mut updated = b.plan_spmv(a.as_ref(), &desc)?;
                    // A run before the update, so that cuSPARSE's analysis of the old values exists.
                    case.run(b, updated.as_mut())?;
                    updated.update_values(new_values.view())?;
                    let mut fresh = b.plan_spmv(new_a.as_ref(), &desc)?;
                    let deterministic = fresh.info().deterministic;
                    Ok((
                        case.run(b, updated.as_mut())?,
                        case.run(b, fresh.as_mut())?,
                        deterministic,
                    ))
                })();
                match runs {
                    Ok((updated, fresh, deterministic)) => {
                        if deterministic && bits(&updated) != bits(&fresh) {
                            failures
                                .0
                                .push(format!("{what}: differs from a fresh plan"));
                        }
                        case.check_ran(&what, Ok(updated), &new_a, precision, failures);
                    }
                    Err(e) => failures.error(&what, e),
                }
            }
        }
        // SpMM, the new values uploaded to the device first.
        let case = SpmmCase::from_values(
            (a.rows(), a.cols()),
            8,
            (Layout::RowMajor, Layout::RowMajor),
            0,
            (1.5, -0.5, false),
        );
        let ran = (|| {
            let mut plan = b.plan_spmm(a.as_ref(), &SpmmDesc::new(precision))?;
            case.run(b, plan.as_mut())?;
            let on_device = b.upload(new_values.view())?;
            plan.update_values(on_device.as_ref())?;
            case.run(b, plan.as_mut())
        })();
        case.check_ran("spmm after update_values", ran, &new_a, precision, failures);
        // SDDMM multiplies by S's pattern only: an update changes nothing, and must break nothing.
        let case = SddmmCase::from_values(
            &a,
            8,
            (Layout::RowMajor, Layout::ColMajor, Layout::RowMajor),
            PAD,
            (1.5, -0.5, false),
            false,
        );
        let ran = (|| {
            let mut plan = b.plan_sddmm(a.as_ref(), &SddmmDesc::new(precision))?;
            case.run(b, plan.as_mut())?;
            plan.update_values(new_values.view())?;
            case.run(b, plan.as_mut())
        })();
        case.check_ran(
            "sddmm after update_values",
            ran,
            &new_a,
            precision,
            failures,
        );
    });
}

#[test]
fn runs_past_the_reservation_wait_for_reserve() {
    collect(backend(), |b, failures| {
        let a = matrix::<f32>();
        let precision = Precision::F32;
        let (narrow, wide) = (8, 40);
        let width_exceeded =
            |ran: Result<Dense<f32>, Error>, what: &str, failures: &mut Failures| match ran {
                Err(Error::WidthExceeded {
                    width, reserved, ..
                }) if (width, reserved) == (wide, narrow) => {}
                Err(e) => failures.error(&format!("{what} past the reservation"), e),
                Ok(_) => failures
                    .0
                    .push(format!("{what}: a run past the reservation ran")),
            };
        let layouts = (Layout::RowMajor, Layout::ColMajor);
        let spmm = SpmmCase::from_values((a.rows(), a.cols()), wide, layouts, 0, (1.0, 0.5, false));
        let mut plan = b
            .plan_spmm(a.as_ref(), &SpmmDesc::new(precision).max_width(narrow))
            .expect("spmm plan");
        assert_eq!(plan.info().reserved_width, narrow);
        width_exceeded(spmm.run(b, plan.as_mut()), "spmm", failures);
        let before = plan.info().bytes;
        plan.reserve(wide).expect("reserve");
        assert_eq!(plan.info().reserved_width, wide);
        assert!(plan.info().bytes >= before);
        spmm.check(
            "spmm after reserve",
            b,
            plan.as_mut(),
            &a,
            precision,
            failures,
        );

        let layouts = (Layout::ColMajor, Layout::RowMajor, Layout::ColMajor);
        let sddmm = SddmmCase::from_values(&a, wide, layouts, 0, (1.0, 0.5, false), false);
        let mut plan = b
            .plan_sddmm(a.as_ref(), &SddmmDesc::new(precision).max_width(narrow))
            .expect("sddmm plan");
        width_exceeded(sddmm.run(b, plan.as_mut()), "sddmm", failures);
        plan.reserve(wide).expect("reserve");
        assert_eq!(plan.info().reserved_width, wide);
        sddmm.check(
            "sddmm after reserve",
            b,
            plan.as_mut(),
            &a,
            precision,
            failures,
        );
    });
}

#[test]
fn runs_leave_the_plan_bytes_as_planned() {
    let Some(b) = backend() else { return };
    let a = matrix::<f32>();
    let precision = Precision::F32;
    for format in [Format::Csr, Format::Coo] {
        let mut plan = b
            .plan_spmv(a.as_ref(), &SpmvDesc::new(precision).format(format))
            .expect("spmv plan");
        let bytes = plan.info().bytes;
        for ((x_layout, y_layout), pad) in layouts().zip([PAD, 0, PAD, 0]) {
            let case = SpmvCase {
                alpha: 1.0,
                x: Host::new((a.cols(), 1), x_layout, pad, |i, _| value(i, 5)),
                beta: 0.0,
                y: Host::new((a.rows(), 1), y_layout, pad, |i, _| value(i, 2)),
            };
            case.run(&b, plan.as_mut()).expect("spmv run");
            assert_eq!(
                plan.info().bytes,
                bytes,
                "spmv {format}: bytes changed by a run"
            );
        }
    }
    let mut plan = b
        .plan_spmm(a.as_ref(), &SpmmDesc::new(precision))
        .expect("spmm plan");
    let bytes = plan.info().bytes;
    for n in [1, 8, 33, 256] {
        for ((b_layout, c_layout), pad) in layouts().zip([0, PAD, 0, PAD]) {
            let case = SpmmCase::from_values(
                (a.rows(), a.cols()),
                n,
                (b_layout, c_layout),
                pad,
                (1.0, 0.0, true),
            );
            case.run(&b, plan.as_mut()).expect("spmm run");
            assert_eq!(
                plan.info().bytes,
                bytes,
                "spmm n {n}: bytes changed by a run"
            );
        }
    }
    let mut plan = b
        .plan_sddmm(a.as_ref(), &SddmmDesc::new(precision))
        .expect("sddmm plan");
    let bytes = plan.info().bytes;
    for k in [1, 32, 256] {
        for ((x_layout, y_layout), pad) in layouts().zip([PAD, 0, PAD, 0]) {
            let layouts = (x_layout, y_layout, Layout::RowMajor);
            let case = SddmmCase::from_values(&a, k, layouts, pad, (1.0, 0.0, true), false);
            case.run(&b, plan.as_mut()).expect("sddmm run");
            assert_eq!(
                plan.info().bytes,
                bytes,
                "sddmm k {k}: bytes changed by a run"
            );
        }
    }
}
