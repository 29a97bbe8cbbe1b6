//! The cuda backend's RoDe SpMM and SDDMM (`rode` and `rode-deterministic`) against the oracle
//! (`sparse_cpu::bound`, built on the reference) on a matrix with empty rows, rows at every tile
//! and segment boundary and long rows of more than three segments: N (or K) = 1, 7, 32, 33, 128,
//! dense operands in both layouts, tight or padded (so vector loads meet partial spans at the end
//! of a row), `beta == 0` over NaN, `beta != 0`, `alpha == 0`; f64, f32 and f16. Then `auto` on a
//! matrix large enough to pick RoDe (and cuSPARSE for its wide f32 products), run-to-run determinism, operands without entries, new values
//! for a planned matrix, and runs wider than the plan reserved for.
//!
//! Needs a GPU; without one each test prints `skipped: <reason>` and passes, unless
//! `SPARSE_REQUIRE_GPU=1`. Every failure is collected, so one run lists everything that disagrees.

mod common;

use common::{acc, available, collect, layouts, value, Case, Failures, Host, SddmmCase, SpmmCase};
use sparse_core::{
    Algorithm, BackendKind, Dense, Error, Executor, Layout, Precision, Scalar, SddmmDesc, SpmmDesc,
    SpmmPlan,
};
use sparse_cuda::CudaBackend;
use sparse_formats::Csr;

const RODE: [Algorithm; 2] = [Algorithm::Rode, Algorithm::RodeDeterministic];
/// Widths from one lane's span to past a sub-warp's: 257 takes SDDMM's K in three chunks of
/// 32 lanes of 4 (the last one column) and SpMM's columns in three tiles.
const WIDTHS: [usize; 6] = [1, 7, 32, 33, 128, 257];
/// The widest of [`WIDTHS`], which plans are made for.
const MAX_WIDTH: usize = WIDTHS[WIDTHS.len() - 1];
/// Segment length of the plans on matrices as small as these (rode.rs's shortest), for building
/// rows around it.
const SEGMENT: usize = 64;

fn backend() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

/// `len` distinct columns of `cols` for row `i` (a stride coprime with `cols` from a row-dependent
/// start), sorted.
fn columns(i: usize, len: usize, cols: usize) -> Vec<usize> {
    let mut c: Vec<usize> = (0..len).map(|j| (i * 37 + j * 11) % cols).collect();
    c.sort_unstable();
    c
}

fn csr<T: Scalar>(rows: usize, cols: usize, lengths: impl Fn(usize) -> usize) -> Csr<T> {
    let mut triplets = Vec::new();
    for i in 0..rows {
        for j in columns(i, lengths(i), cols) {
            triplets.push((i, j, T::from_f64(value(i, j) + 0.3)));
        }
    }
    Csr::from_triplets(rows, cols, &triplets).expect("valid matrix")
}

/// 300 x 2100 (2100 is coprime with the column stride 11): rows 0 and 3 empty; rows 1..=13 at
/// the tile and segment boundaries (whether a row starts on a 4-entry boundary, which moves them,
/// varies with what precedes it; a row is split from SEGMENT + 32 entries on, counted from that
/// boundary); row 14 with 2000 entries (about 30 segments); the rest 0
/// to 40 entries.
fn matrix<T: Scalar>() -> Csr<T> {
    const SPECIAL: [usize; 14] = [
        0,
        3,
        29,
        0,
        31,
        32,
        33,
        35,
        SEGMENT - 1,
        SEGMENT,
        SEGMENT + 29,
        SEGMENT + 33,
        2 * SEGMENT + 3,
        1500,
    ];
    csr(300, 2100, |i| match i {
        0..=13 => SPECIAL[i],
        14 => 2000,
        _ => (i * 13) % 41,
    })
}

/// Paddings of a leading dimension for width `n`: none, 3 (an odd one), and up to the next
/// multiple of 4 plus 4 (vector loads with a partial span at the end of each row, for n not a
/// multiple of 4).
fn paddings(n: usize) -> [usize; 3] {
    [0, 3, (4 - n % 4) % 4 + 4]
}

/// (alpha, beta, whether the prior output is NaN): `beta == 0` must not read the output.
const SCALARS: &[(f64, f64, bool)] = &[
    (1.5, 0.0, true),
    (0.5, -2.0, false),
    (0.0, 0.5, false),
    (-1.0, 1.0, false),
];

/// Runs SpMM with every width, layout, padding and scalar pair through the plan for `algorithm`
/// and compares with the oracle.
fn spmm_cases<T: Scalar<Out = T>>(
    b: &CudaBackend,
    a: &Csr<T>,
    precision: Precision,
    algorithm: Algorithm,
    widths: &[usize],
    failures: &mut Failures,
) {
    let desc = SpmmDesc::new(precision)
        .algorithm(algorithm)
        .max_width(MAX_WIDTH);
    let mut plan = match b.plan_spmm(a.as_ref(), &desc) {
        Ok(plan) => plan,
        Err(e) => return failures.error(&format!("spmm {precision} {algorithm} plan"), e),
    };
    let info = plan.info().clone();
    if algorithm != Algorithm::Auto && info.algorithm != algorithm {
        failures.0.push(format!(
            "spmm {precision}: asked for {algorithm}, the plan reports {}",
            info.algorithm
        ));
    }
    let what = format!("spmm {} {precision}", info.algorithm);
    for &n in widths {
        for layouts in layouts() {
            for pad in paddings(n) {
                for &scalars in SCALARS {
                    let case =
                        SpmmCase::from_values((a.rows(), a.cols()), n, layouts, pad, scalars);
                    case.check(&what, b, plan.as_mut(), a, precision, failures);
                }
            }
        }
    }
}

fn sddmm_cases<T: Scalar<Out = T>>(
    b: &CudaBackend,
    s: &Csr<T>,
    precision: Precision,
    algorithm: Algorithm,
    failures: &mut Failures,
) {
    for scale_by_values in [false, true] {
        let desc = SddmmDesc::new(precision)
            .algorithm(algorithm)
            .scale_by_values(scale_by_values)
            .max_width(MAX_WIDTH);
        let mut plan = match b.plan_sddmm(s.as_ref(), &desc) {
            Ok(plan) => plan,
            Err(e) => return failures.error(&format!("sddmm {precision} {algorithm} plan"), e),
        };
        if !plan.info().deterministic || plan.info().algorithm != algorithm {
            failures.0.push(format!(
                "sddmm {precision} {algorithm}: plan reports {:?}",
                plan.info()
            ));
        }
        let what = format!("sddmm {algorithm} {precision}");
        for k in WIDTHS {
            for (x_layout, y_layout) in layouts() {
                for pad in paddings(k) {
                    let c_layout = if pad % 2 == 0 {
                        Layout::ColMajor
                    } else {
                        Layout::RowMajor
                    };
                    let layouts = (x_layout, y_layout, c_layout);
                    for &scalars in SCALARS {
                        let case =
                            SddmmCase::from_values(s, k, layouts, pad, scalars, scale_by_values);
                        case.check(&what, b, plan.as_mut(), s, precision, failures);
                    }
                }
            }
        }
    }
}

fn every_case<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    let a = matrix::<T>();
    for algorithm in RODE {
        spmm_cases(b, &a, precision, algorithm, &WIDTHS, failures);
        sddmm_cases(b, &a, precision, algorithm, failures);
    }
}

#[test]
fn rode_spmm_and_sddmm_match_the_oracle() {
    collect(backend(), |b, failures| {
        eprintln!("{}", b.description());
        every_case::<f64>(b, Precision::F64, failures);
        every_case::<f32>(b, Precision::F32, failures);
        every_case::<half::f16>(b, Precision::F16, failures);
    });
}

/// Records a disagreement unless `auto` planned `expected` for `op` on `a`.
fn check_auto_choice<T: Scalar>(
    op: &str,
    a: &Csr<T>,
    chose: Result<Algorithm, Error>,
    expected: Algorithm,
    failures: &mut Failures,
) {
    match chose {
        Ok(algorithm) if algorithm == expected => {}
        Ok(algorithm) => failures.0.push(format!(
            "{op} auto on {} entries chose {algorithm}, expected {expected}",
            a.nnz()
        )),
        Err(e) => failures.error(&format!("{op} auto"), e),
    }
}

#[test]
fn auto_picks_rode_for_long_rows_and_small_matrices() {
    collect(backend(), |b, failures| {
        // 20000 rows of 0 to 28 entries and one of 6000; 120k entries in rows of 0 to 24; 540k in
        // 9000 rows of 60; 120k in 2000 such rows, too few for `vector` SpMM to fill the
        // device; 3000 in rows of 0 to 20.
        let skewed = csr::<f32>(20_000, 8_000, |i| if i == 77 { 6000 } else { i % 29 });
        let short = csr::<f32>(10_000, 2100, |i| i % 25);
        let even = csr::<f32>(9_000, 2100, |_| 60);
        let few = csr::<f32>(2_000, 2100, |_| 60);
        let small = csr::<f32>(300, 2100, |i| i % 21);
        let rode = Algorithm::RodeDeterministic;
        for (a, spmm, sddmm) in [
            (&skewed, rode, rode),
            (&short, Algorithm::Vector, Algorithm::Vector),
            (&even, Algorithm::Vector, rode),
            (&few, rode, rode),
            (&small, rode, rode),
        ] {
            let chose = b
                .plan_spmm(a.as_ref(), &SpmmDesc::new(Precision::F32))
                .map(|plan| plan.info().algorithm);
            check_auto_choice("spmm", a, chose, spmm, failures);
            let chose = b
                .plan_sddmm(a.as_ref(), &SddmmDesc::new(Precision::F32))
                .map(|plan| plan.info().algorithm);
            check_auto_choice("sddmm", a, chose, sddmm, failures);
        }
        spmm_cases(b, &skewed, Precision::F32, Algorithm::Auto, &[32], failures);
        spmm_cases(
            b,
            &skewed,
            Precision::F32,
            Algorithm::Rode,
            &[128],
            failures,
        );
        // SDDMM in f64 on 1.2M entries in rows of 30: `vector` (RoDe in f32).
        let large64 = csr::<f64>(40_000, 2100, |_| 30);
        let chose = b
            .plan_sddmm(large64.as_ref(), &SddmmDesc::new(Precision::F64))
            .map(|plan| plan.info().algorithm);
        check_auto_choice("sddmm f64", &large64, chose, Algorithm::Vector, failures);
        // Every row split in several segments, combined by f64 atomics.
        let even64 = csr::<f64>(1000, 2100, |_| 600);
        spmm_cases(b, &even64, Precision::F64, Algorithm::Rode, &[7], failures);
    });
}

/// Runs `case` through `plan`, checks C against the oracle for `a` and records a disagreement
/// unless the run reports `expected`.
fn check_auto_run<T: Scalar<Out = T>>(
    what: &str,
    b: &CudaBackend,
    plan: &mut (dyn SpmmPlan<T> + '_),
    (case, a): (&SpmmCase<T>, &Csr<T>),
    expected: Algorithm,
    failures: &mut Failures,
) {
    let ran = case.run(b, plan);
    failures.check_run(what, &case.expected(a, Precision::F32), &case.c, ran);
    let algorithm = plan.info().algorithm;
    if algorithm != expected {
        failures
            .0
            .push(format!("{what}: ran {algorithm}, expected {expected}"));
    }
}

#[test]
fn auto_runs_wide_f32_products_of_large_skewed_matrices_on_cusparse() {
    collect(backend(), |b, failures| {
        // 600k entries, rows of 25 to 34 and every thousandth of 400.
        let lengths = |i: usize| if i % 1000 == 77 { 400 } else { 25 + i % 10 };
        let a = csr::<f32>(20_000, 8_000, lengths);
        let case = |n| {
            let layouts = (Layout::RowMajor, Layout::ColMajor);
            SpmmCase::<f32>::from_values((a.rows(), a.cols()), n, layouts, 0, (1.5, -0.5, false))
        };
        let (narrow, wide) = (case(32), case(128));
        let mut plan = match b.plan_spmm(a.as_ref(), &SpmmDesc::new(Precision::F32)) {
            Ok(plan) => plan,
            Err(e) => return failures.error("spmm auto plan", e),
        };
        let rode = Algorithm::RodeDeterministic;
        for (n, case, expected) in [(128, &wide, Algorithm::VendorDefault), (32, &narrow, rode)] {
            let what = format!("spmm auto f32 N = {n}");
            check_auto_run(&what, b, plan.as_mut(), (case, &a), expected, failures);
        }
        // Every width, layout and padding: leading dimensions cuSPARSE sized no workspace for
        // run on RoDe.
        spmm_cases(b, &a, Precision::F32, Algorithm::Auto, &[33, 128], failures);
        // New values reach both plans.
        let mut changed = a.clone();
        for (e, v) in changed.values_mut().iter_mut().enumerate() {
            *v = value(e, 5) as f32 - 0.7;
        }
        if let Err(e) = plan.update_values(sparse_core::DenseRef::vector(changed.values())) {
            return failures.error("spmm auto update_values", e);
        }
        for (n, case, expected) in [(32, &narrow, rode), (128, &wide, Algorithm::VendorDefault)] {
            let what = format!("spmm auto f32 N = {n} after update_values");
            check_auto_run(
                &what,
                b,
                plan.as_mut(),
                (case, &changed),
                expected,
                failures,
            );
        }
        // f64 keeps RoDe at every width.
        let a64 = csr::<f64>(20_000, 8_000, lengths);
        let chose = b
            .plan_spmm(a64.as_ref(), &SpmmDesc::new(Precision::F64))
            .and_then(|mut plan| {
                let case = SpmmCase::<f64>::from_values(
                    (a64.rows(), a64.cols()),
                    128,
                    (Layout::RowMajor, Layout::RowMajor),
                    0,
                    (1.0, 0.0, false),
                );
                case.run(b, plan.as_mut())?;
                Ok(plan.info().algorithm)
            });
        check_auto_choice("spmm f64 N = 128", &a64, chose, rode, failures);
    });
}

/// `auto` SDDMM on `s` at K = 32 and 128 with and without `scale_by_values`, in every layout and
/// padding, against the oracle; after an unpadded run (which cuSPARSE never refuses) the plan must
/// report cuSPARSE's SDDMM for K = 128 without `scale_by_values` and RoDe otherwise.
fn auto_sddmm_widths<T: Scalar<Out = T>>(
    b: &CudaBackend,
    s: &Csr<T>,
    precision: Precision,
    failures: &mut Failures,
) {
    for scale_by_values in [false, true] {
        let desc = SddmmDesc::new(precision).scale_by_values(scale_by_values);
        let mut plan = match b.plan_sddmm(s.as_ref(), &desc) {
            Ok(plan) => plan,
            Err(e) => return failures.error(&format!("sddmm auto {precision} plan"), e),
        };
        for k in [32, 128] {
            let what = format!("sddmm auto {precision} K = {k} scale_by_values {scale_by_values}");
            for (x_layout, y_layout) in layouts() {
                for pad in paddings(k) {
                    let layouts = (x_layout, y_layout, Layout::ColMajor);
                    for &scalars in &SCALARS[..2] {
                        let case =
                            SddmmCase::from_values(s, k, layouts, pad, scalars, scale_by_values);
                        case.check(&what, b, plan.as_mut(), s, precision, failures);
                    }
                }
            }
            let layouts = (Layout::RowMajor, Layout::RowMajor, Layout::ColMajor);
            let case = SddmmCase::from_values(s, k, layouts, 0, SCALARS[1], scale_by_values);
            case.check(&what, b, plan.as_mut(), s, precision, failures);
            let expected = if k >= 128 && !scale_by_values {
                Algorithm::VendorDefault
            } else {
                Algorithm::RodeDeterministic
            };
            let ran = plan.info().algorithm;
            if ran != expected {
                failures
                    .0
                    .push(format!("{what}: ran {ran}, expected {expected}"));
            }
        }
    }
}

#[test]
fn auto_runs_wide_sddmm_of_long_mean_rows_on_cusparse() {
    collect(backend(), |b, failures| {
        // 180k entries in rows of 30; `auto` takes RoDe for such rows at any size in f32, and
        // below 2^20 entries in f64.
        auto_sddmm_widths(
            b,
            &csr::<f64>(6_000, 2100, |_| 30),
            Precision::F64,
            failures,
        );
        auto_sddmm_widths(
            b,
            &csr::<f32>(6_000, 2100, |_| 30),
            Precision::F32,
            failures,
        );
        // Rows of 10 keep RoDe (here for the small matrix) at every K, and so do rows of 30 of a
        // matrix of 60k entries in f32.
        let short = csr::<f32>(3_000, 2100, |_| 10);
        let small = csr::<f32>(2_000, 2100, |_| 30);
        for (what, s) in [("rows of 10", &short), ("60k entries in f32", &small)] {
            let chose = b
                .plan_sddmm(s.as_ref(), &SddmmDesc::new(Precision::F32))
                .and_then(|mut plan| {
                    let layouts = (Layout::RowMajor, Layout::RowMajor, Layout::ColMajor);
                    let case = SddmmCase::from_values(s, 128, layouts, 0, SCALARS[1], false);
                    case.run(b, plan.as_mut())?;
                    Ok(plan.info().algorithm)
                });
            check_auto_choice(
                &format!("sddmm {what}, K = 128"),
                s,
                chose,
                Algorithm::RodeDeterministic,
                failures,
            );
        }
    });
}

/// C from one run of `plan` over fresh operands, as bits.
fn spmm_bits<T: Scalar<Out = T>>(
    b: &CudaBackend,
    a: &Csr<T>,
    algorithm: Algorithm,
    precision: Precision,
) -> (bool, Vec<Vec<u64>>) {
    let mut plan = b
        .plan_spmm(a.as_ref(), &SpmmDesc::new(precision).algorithm(algorithm))
        .expect("plan");
    let bh = Host::<T>::new((a.cols(), 33), Layout::RowMajor, 0, value);
    let bd = b.upload(bh.view()).expect("upload");
    let runs = (0..3)
        .map(|_| {
            let mut c = b.zeros::<T>(a.rows(), 33, Layout::RowMajor).expect("zeros");
            plan.run(acc::<T>(1.0), bd.as_ref(), acc::<T>(0.0), c.as_mut())
                .expect("run");
            bits(&b.download(&c).expect("download"))
        })
        .collect();
    (plan.info().deterministic, runs)
}

/// The elements of a host matrix, as bits.
fn bits<T: Scalar>(host: &Dense<T>) -> Vec<u64> {
    let data = host.as_ref().host("bits").expect("host").to_vec();
    data.iter().map(|v| v.to_f64().to_bits()).collect()
}

#[test]
fn deterministic_plans_repeat_bit_for_bit() {
    let Some(b) = backend() else { return };
    let a64 = matrix::<f64>();
    let a32 = matrix::<f32>();
    let a16 = matrix::<half::f16>();
    let cases = [
        (
            "f64 rode-deterministic",
            spmm_bits(&b, &a64, Algorithm::RodeDeterministic, Precision::F64),
        ),
        (
            "f32 rode-deterministic",
            spmm_bits(&b, &a32, Algorithm::RodeDeterministic, Precision::F32),
        ),
        (
            "f16 rode (combined without atomics)",
            spmm_bits(&b, &a16, Algorithm::Rode, Precision::F16),
        ),
    ];
    for (what, (deterministic, runs)) in cases {
        assert!(deterministic, "{what} must claim determinism");
        assert!(
            runs.windows(2).all(|w| w[0] == w[1]),
            "{what} claims determinism but runs differ"
        );
    }
    let (deterministic, _) = spmm_bits(&b, &a32, Algorithm::Rode, Precision::F32);
    assert!(
        !deterministic,
        "f32 rode adds split rows with atomics: it must not claim determinism"
    );
}

#[test]
fn operands_without_entries_only_scale_the_output() {
    collect(backend(), |b, failures| {
        let (alpha, beta) = (2.0, 0.5);
        for algorithm in RODE {
            // A without entries, and without rows: C = beta*C, A never read.
            for a in [Csr::<f32>::zeros(5, 4), Csr::<f32>::zeros(0, 4)] {
                let case = SpmmCase {
                    alpha,
                    b: Host::new((4, 7), Layout::RowMajor, 0, value),
                    beta,
                    c: Host::new((a.rows(), 7), Layout::ColMajor, 3, value),
                };
                let desc = SpmmDesc::new(Precision::F32).algorithm(algorithm);
                let ran = b
                    .plan_spmm(a.as_ref(), &desc)
                    .and_then(|mut plan| case.run(b, plan.as_mut()));
                let what = format!("spmm {algorithm} on {}x4 without entries", a.rows());
                case.check_ran(&what, ran, &a, Precision::F32, failures);
            }
            // SpMM with n = 0 and SDDMM on S without entries have no output element.
            let s = Csr::<f32>::zeros(6, 5);
            let result = (|| {
                let a = matrix::<f32>();
                let desc = SpmmDesc::new(Precision::F32).algorithm(algorithm);
                let mut plan = b.plan_spmm(a.as_ref(), &desc)?;
                let bd = b.zeros::<f32>(a.cols(), 0, Layout::RowMajor)?;
                let mut cd = b.zeros::<f32>(a.rows(), 0, Layout::RowMajor)?;
                plan.run(1.0, bd.as_ref(), 0.0, cd.as_mut())?;
                let desc = SddmmDesc::new(Precision::F32).algorithm(algorithm);
                let mut plan = b.plan_sddmm(s.as_ref(), &desc)?;
                let xd = b.zeros::<f32>(6, 3, Layout::RowMajor)?;
                let yd = b.zeros::<f32>(5, 3, Layout::RowMajor)?;
                let mut cd = b.zeros::<f32>(0, 1, Layout::ColMajor)?;
                plan.run(1.0, xd.as_ref(), yd.as_ref(), 0.0, cd.as_mut())
            })();
            if let Err(e) = result {
                failures.error(&format!("{algorithm} with no output element"), e);
            }
        }
    });
}

/// Records a disagreement unless `ran` holds the same bits as `fresh`.
fn check_same_bits<T: Scalar>(
    what: &str,
    fresh: &Result<Dense<T>, Error>,
    ran: &Result<Dense<T>, Error>,
    failures: &mut Failures,
) {
    if let (Ok(fresh), Ok(ran)) = (fresh, ran) {
        if bits(fresh) != bits(ran) {
            failures.0.push(format!(
                "{what}: differs from a plan made with the new values"
            ));
        }
    }
}

/// New values for every plan of `a`, from the host and from the device, contiguous and strided:
/// the output matches the oracle on the changed matrix and, for a deterministic plan, is bit
/// for bit what a plan made with the new values gives.
fn updated_values<T: Scalar<Out = T>>(
    b: &CudaBackend,
    precision: Precision,
    failures: &mut Failures,
) {
    let a = matrix::<T>();
    let mut changed = a.clone();
    for (e, v) in changed.values_mut().iter_mut().enumerate() {
        *v = T::from_f64(value(e, 5) - 0.7);
    }
    let spmm_case = SpmmCase::from_values(
        (a.rows(), a.cols()),
        33,
        (Layout::RowMajor, Layout::ColMajor),
        0,
        (1.5, -0.5, false),
    );
    let sddmm_case = SddmmCase::from_values(
        &a,
        33,
        (Layout::RowMajor, Layout::ColMajor, Layout::ColMajor),
        0,
        (1.5, -0.5, false),
        true,
    );
    let (spmm_expected, sddmm_expected) = (
        spmm_case.expected(&changed, precision),
        sddmm_case.expected(&changed, precision),
    );
    // An nnz x 1 column-major vector is contiguous; a row-major one with padding is strided.
    for (layout, pad) in [(Layout::ColMajor, 0), (Layout::RowMajor, 2)] {
        let host = Host::<T>::new((a.nnz(), 1), layout, pad, |e, _| {
            changed.values()[e].to_f64()
        });
        let device = match b.upload(host.view()) {
            Ok(device) => device,
            Err(e) => return failures.error("uploading the new values", e),
        };
        for (source, values) in [("host", host.view()), ("device", device.as_ref())] {
            for algorithm in RODE {
                let what = format!("{precision} {algorithm} {source} values {layout} pad {pad}");
                let desc = SpmmDesc::new(precision).algorithm(algorithm);
                let fresh = b
                    .plan_spmm(changed.as_ref(), &desc)
                    .map(|mut plan| (plan.info().deterministic, spmm_case.run(b, plan.as_mut())));
                let (deterministic, fresh) = match fresh {
                    Ok(fresh) => fresh,
                    Err(e) => return failures.error(&format!("spmm {what}: plan"), e),
                };
                let ran = b.plan_spmm(a.as_ref(), &desc).and_then(|mut plan| {
                    plan.update_values(values)?;
                    spmm_case.run(b, plan.as_mut())
                });
                if deterministic {
                    check_same_bits(&format!("spmm {what}"), &fresh, &ran, failures);
                }
                failures.check_run(&format!("spmm {what}"), &spmm_expected, &spmm_case.c, ran);

                let desc = SddmmDesc::new(precision)
                    .algorithm(algorithm)
                    .scale_by_values(true);
                let fresh = b
                    .plan_sddmm(changed.as_ref(), &desc)
                    .and_then(|mut plan| sddmm_case.run(b, plan.as_mut()));
                let ran = b.plan_sddmm(a.as_ref(), &desc).and_then(|mut plan| {
                    plan.update_values(values)?;
                    sddmm_case.run(b, plan.as_mut())
                });
                check_same_bits(&format!("sddmm {what}"), &fresh, &ran, failures);
                failures.check_run(
                    &format!("sddmm {what}"),
                    &sddmm_expected,
                    &sddmm_case.c,
                    ran,
                );
            }
        }
    }
}

#[test]
fn updated_values_give_what_a_fresh_plan_gives() {
    collect(backend(), |b, failures| {
        updated_values::<f64>(b, Precision::F64, failures);
        updated_values::<f32>(b, Precision::F32, failures);
        updated_values::<half::f16>(b, Precision::F16, failures);
    });
}

/// Whether `ran` failed as a run of `width` past a reservation of `reserved` must.
fn width_exceeded(ran: Result<Dense<impl Scalar>, Error>, width: usize, reserved: usize) -> bool {
    matches!(ran, Err(Error::WidthExceeded { width: w, reserved: r, .. }) if (w, r) == (width, reserved))
}

/// Plans reserved for 32 columns refuse 33 until `reserve(128)`, which grows the workspace where
/// the plan has one (rode-deterministic SpMM: split rows' partial sums) and never shrinks it;
/// then 33 and 128 match the oracle.
fn reservations<T: Scalar<Out = T>>(
    b: &CudaBackend,
    precision: Precision,
    failures: &mut Failures,
) {
    let a = matrix::<T>();
    let layouts = (Layout::RowMajor, Layout::RowMajor);
    for algorithm in RODE {
        let what = format!("spmm {precision} {algorithm}");
        let desc = SpmmDesc::new(precision).algorithm(algorithm).max_width(32);
        let mut plan = match b.plan_spmm(a.as_ref(), &desc) {
            Ok(plan) => plan,
            Err(e) => return failures.error(&format!("{what} plan"), e),
        };
        let before = plan.info().clone();
        let case =
            |n| SpmmCase::from_values((a.rows(), a.cols()), n, layouts, 0, (1.0, 0.5, false));
        let wide = case(33);
        if before.reserved_width != 32 || !width_exceeded(wide.run(b, plan.as_mut()), 33, 32) {
            failures.0.push(format!(
                "{what}: a run of 33 past a reservation of 32 was not refused"
            ));
        }
        if let Err(e) = plan.reserve(128).and_then(|()| plan.reserve(64)) {
            return failures.error(&format!("{what} reserve"), e);
        }
        let after = plan.info().clone();
        let grows = algorithm == Algorithm::RodeDeterministic;
        if after.reserved_width != 128
            || (grows && after.bytes <= before.bytes)
            || after.bytes < before.bytes
        {
            failures.0.push(format!(
                "{what}: reserve(128) then reserve(64) left {} bytes for width {} (from {} bytes)",
                after.bytes, after.reserved_width, before.bytes
            ));
        }
        for n in [33, 128] {
            let what = format!("{what} after reserve");
            case(n).check(&what, b, plan.as_mut(), &a, precision, failures);
        }

        let what = format!("sddmm {precision} {algorithm}");
        let desc = SddmmDesc::new(precision).algorithm(algorithm).max_width(32);
        let mut plan = match b.plan_sddmm(a.as_ref(), &desc) {
            Ok(plan) => plan,
            Err(e) => return failures.error(&format!("{what} plan"), e),
        };
        let case = |k| {
            SddmmCase::from_values(
                &a,
                k,
                (Layout::RowMajor, Layout::RowMajor, Layout::ColMajor),
                0,
                (1.0, 0.5, false),
                false,
            )
        };
        if !width_exceeded(case(33).run(b, plan.as_mut()), 33, 32) {
            failures.0.push(format!(
                "{what}: a run of 33 past a reservation of 32 was not refused"
            ));
        }
        if let Err(e) = plan.reserve(128) {
            return failures.error(&format!("{what} reserve"), e);
        }
        for k in [33, 128] {
            let what = format!("{what} after reserve");
            case(k).check(&what, b, plan.as_mut(), &a, precision, failures);
        }
    }
}

#[test]
fn runs_past_the_reservation_fail_until_reserve() {
    collect(backend(), |b, failures| {
        reservations::<f32>(b, Precision::F32, failures);
        reservations::<half::f16>(b, Precision::F16, failures);
    });
}
