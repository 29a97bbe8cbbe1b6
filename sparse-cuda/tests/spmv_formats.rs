//! SpMV against the oracle (`sparse_cpu::bound`, built on the reference): the cuda backend's
//! CSR kernels, `scalar` (ELL, HYB) and `vector` (BSR) kernels and cuSPARSE's BSR SpMV, in
//! f64, f32 and f16, on matrices with empty rows, a dense row of more than 1,024 entries (HYB
//! overflow spread over several segments), rows of mixed length, short rows among rows just
//! under, at and over `vector-split`'s whole-warp limits, sizes no block shape divides, and no
//! entries at all; BSR blocks 1x1 to 16x16, square and not. x and y in both layouts,
//! tight or strided; `beta == 0` over NaN, `beta != 0`, `alpha == 0`. The plan contract: runs
//! repeat bit for bit, `update_values` gives what a fresh plan of the new values gives, `auto`
//! picks the table's algorithm, and block shapes a backend cannot run are typed refusals.
//!
//! Needs a GPU; without one each test prints `skipped: <reason>` and passes, unless
//! `SPARSE_REQUIRE_GPU=1`. Every failure is collected, so one run lists everything that disagrees.

mod common;

use common::{available, collect, layouts, value, Case, Failures, Host, SpmvCase};
use sparse_core::{
    Algorithm, BackendKind, BlockShape, Dense, Error, Executor, Format, Layout, Precision, Scalar,
    SpmvDesc, SpmvPlan,
};
use sparse_cuda::{CudaBackend, CusparseBackend};
use sparse_formats::Csr;

/// Extra elements per leading dimension of a strided operand.
const PAD: usize = 3;

/// (alpha, beta, whether the prior y is NaN): `beta == 0` must not read y.
const SCALARS: &[(f64, f64, bool)] = &[
    (1.5, 0.0, true),
    (0.5, -2.0, false),
    (0.0, 0.5, false),
    (-1.0, 1.0, false),
];

/// Every block shape the BSR kernel is checked on; cuSPARSE runs the square ones.
const BLOCKS: [(usize, usize); 9] = [
    (1, 1),
    (2, 2),
    (4, 4),
    (8, 8),
    (16, 16),
    (2, 8),
    (8, 2),
    (1, 16),
    (16, 1),
];

fn cuda() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

fn cusparse() -> Option<CusparseBackend> {
    available(BackendKind::Cusparse, CusparseBackend::new(0))
}

/// A `rows x cols` matrix with `lengths(i)` entries in row i, spread over the columns.
fn csr<T: Scalar>(rows: usize, cols: usize, lengths: impl Fn(usize) -> usize) -> Csr<T> {
    let mut triplets = Vec::new();
    for i in 0..rows {
        let mut c: Vec<usize> = (0..lengths(i)).map(|j| (i * 37 + j * 11) % cols).collect();
        c.sort_unstable();
        c.dedup();
        triplets.extend(
            c.into_iter()
                .map(|j| (i, j, T::from_f64(value(i, j) + 0.3))),
        );
    }
    Csr::from_triplets(rows, cols, &triplets).expect("valid matrix")
}

/// The matrices every format runs on, named: 300 x 2100 with rows 0 and 3 empty, row 14 dense
/// over 1,100 columns and the rest 0 to 40 entries; 45 x 37 (no block size divides either) with
/// row 3 empty, row 10 full and the rest about one entry in four; many overflowing rows of
/// 60 entries among rows of 1; rows of 2 entries with every tenth one of 17 to 3,000 (one
/// segment of `vector-split` and up to 12); a 5 x 4 matrix without entries; and one without
/// rows.
fn matrices<T: Scalar>() -> Vec<(&'static str, Csr<T>)> {
    vec![
        (
            "long row",
            csr(300, 2100, |i| match i {
                0 | 3 => 0,
                14 => 1100,
                _ => (i * 13) % 41,
            }),
        ),
        (
            "45x37",
            csr(45, 37, |i| match i {
                3 => 0,
                10 => 37,
                _ => 9 + i % 3,
            }),
        ),
        (
            "overflowing rows",
            csr(200, 300, |i| if i % 7 == 2 { 60 } else { 1 }),
        ),
        (
            "split rows",
            csr(120, 3100, |i| {
                const LONG: [usize; 12] = [17, 32, 33, 64, 65, 255, 256, 257, 512, 513, 1100, 3000];
                if i % 10 == 9 {
                    LONG[i / 10]
                } else {
                    2
                }
            }),
        ),
        ("no entries", Csr::zeros(5, 4)),
        ("no rows", Csr::zeros(0, 4)),
    ]
}

/// y from one run of `case` on `plan`, as bits.
fn bits<T: Scalar>(ran: &Result<Dense<T>, Error>) -> Option<Vec<u64>> {
    let y = ran.as_ref().ok()?;
    let data = y.as_ref().host("bits").expect("host").to_vec();
    Some(data.iter().map(|v| v.to_f64().to_bits()).collect())
}

/// The SpMV of `a` planned by `desc` on `b` against the oracle for every operand case; two runs
/// agree bit for bit when the plan claims determinism; new values give what a fresh plan of them
/// gives.
fn check_plan<T: Scalar<Out = T>, B: Executor>(
    b: &B,
    (name, a): (&str, &Csr<T>),
    desc: SpmvDesc,
    expected: Algorithm,
    failures: &mut Failures,
) {
    let block = desc.block.map_or(String::new(), |s| format!(" {s}"));
    let what = format!(
        "{} spmv {}{block} {} on {name}",
        b.kind(),
        desc.format,
        desc.precision
    );
    let mut plan = match b.plan_spmv(a.as_ref(), &desc) {
        Ok(plan) => plan,
        // Scattered entries in large blocks: refused as the cpu backend refuses them.
        Err(Error::FillLimit { .. }) => return,
        Err(e) => return failures.error(&format!("{what}: plan"), e),
    };
    let info = plan.info().clone();
    if info.algorithm != expected || info.format != desc.format {
        failures.0.push(format!(
            "{what}: planned {} {}, expected {expected}",
            info.format, info.algorithm
        ));
    }
    if a.nnz() > 0 && info.bytes == 0 {
        failures
            .0
            .push(format!("{what}: the plan reports no bytes"));
    }
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
            let first = case.run(b, plan.as_mut());
            let second = case.run(b, plan.as_mut());
            if info.deterministic && bits(&first) != bits(&second) {
                failures.0.push(format!(
                    "{what} {case}: claims determinism, but two runs differ"
                ));
            }
            case.check_ran(&what, first, a, desc.precision, failures);
        }
    }
    if plan.info().bytes != info.bytes {
        failures
            .0
            .push(format!("{what}: runs changed the plan's bytes"));
    }
    check_update(b, (&what, a), desc, plan.as_mut(), failures);
}

/// New values (from the host, then from the device) for `plan` of `a`: the oracle on the changed
/// matrix and, for a deterministic plan, the bits of a fresh plan of it.
fn check_update<T: Scalar<Out = T>, B: Executor>(
    b: &B,
    (what, a): (&str, &Csr<T>),
    desc: SpmvDesc,
    plan: &mut (dyn SpmvPlan<T> + '_),
    failures: &mut Failures,
) {
    let mut changed = a.clone();
    for (e, v) in changed.values_mut().iter_mut().enumerate() {
        *v = T::from_f64(value(e, 5) - 0.7);
    }
    let case = SpmvCase {
        alpha: 1.5,
        x: Host::new((a.cols(), 1), Layout::RowMajor, 0, |i, _| value(i, 1)),
        beta: -0.5,
        y: Host::new((a.rows(), 1), Layout::ColMajor, 0, |i, _| value(i, 3)),
    };
    let fresh = b
        .plan_spmv(changed.as_ref(), &desc)
        .and_then(|mut fresh| case.run(b, fresh.as_mut()));
    let host = Host::<T>::new((a.nnz(), 1), Layout::ColMajor, 0, |e, _| {
        changed.values()[e].to_f64()
    });
    let device = match b.upload(host.view()) {
        Ok(device) => device,
        Err(e) => return failures.error(&format!("{what}: uploading new values"), e),
    };
    for (source, values) in [("host", host.view()), ("device", device.as_ref())] {
        let what = format!("{what} after update_values from the {source}");
        let ran = plan
            .update_values(values)
            .and_then(|()| case.run(b, &mut *plan));
        if plan.info().deterministic && bits(&ran) != bits(&fresh) {
            failures.0.push(format!(
                "{what}: differs from a plan made with the new values"
            ));
        }
        case.check_ran(&what, ran, &changed, desc.precision, failures);
    }
}

fn csr_kernels<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    for (name, a) in matrices::<T>() {
        for algorithm in [
            Algorithm::Scalar,
            Algorithm::Vector,
            Algorithm::VectorSplit,
            Algorithm::MergePath,
        ] {
            let desc = SpmvDesc::new(precision).algorithm(algorithm);
            check_plan(b, (name, &a), desc, algorithm, failures);
        }
    }
}

fn ell_and_hyb<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    for (name, a) in matrices::<T>() {
        for format in [Format::Ell, Format::Hyb] {
            for algorithm in [Algorithm::Auto, Algorithm::Scalar] {
                let desc = SpmvDesc::new(precision).format(format).algorithm(algorithm);
                check_plan(b, (name, &a), desc, Algorithm::Scalar, failures);
            }
        }
    }
}

fn bsr<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, failures: &mut Failures) {
    for (name, a) in matrices::<T>() {
        for (r, c) in BLOCKS {
            let desc = SpmvDesc::new(precision)
                .format(Format::Bsr)
                .block(BlockShape::new(r, c));
            check_plan(b, (name, &a), desc, Algorithm::Vector, failures);
        }
        let default = SpmvDesc::new(precision)
            .format(Format::Bsr)
            .algorithm(Algorithm::Vector);
        check_plan(b, (name, &a), default, Algorithm::Vector, failures);
    }
}

/// Descriptors both backends must refuse with a typed error, as the cpu backend does: a block
/// shape BSR cannot hold, a block shape for a format without one, and an algorithm the table
/// does not list.
fn refusals<B: Executor>(b: &B, failures: &mut Failures) {
    let a = csr::<f32>(45, 37, |i| 3 + i % 5);
    let desc = SpmvDesc::new(Precision::F32);
    for (what, desc) in [
        (
            "3x3 blocks",
            desc.format(Format::Bsr).block(BlockShape::new(3, 3)),
        ),
        (
            "ell with a block",
            desc.format(Format::Ell).block(BlockShape::new(2, 2)),
        ),
        (
            "hyb vector",
            desc.format(Format::Hyb).algorithm(Algorithm::Vector),
        ),
    ] {
        match b.plan_spmv(a.as_ref(), &desc) {
            Err(Error::InvalidArgument { .. } | Error::Unsupported { .. }) => {}
            Err(e) => failures.error(&format!("{} {what}: not a typed refusal", b.kind()), e),
            Ok(_) => failures.0.push(format!("{} {what}: planned", b.kind())),
        }
    }
}

#[test]
fn csr_kernels_match_the_oracle() {
    collect(cuda(), |b, failures| {
        csr_kernels::<f64>(b, Precision::F64, failures);
        csr_kernels::<f32>(b, Precision::F32, failures);
        csr_kernels::<half::f16>(b, Precision::F16, failures);
    });
}

#[test]
fn ell_and_hyb_match_the_oracle() {
    collect(cuda(), |b, failures| {
        ell_and_hyb::<f64>(b, Precision::F64, failures);
        ell_and_hyb::<f32>(b, Precision::F32, failures);
        ell_and_hyb::<half::f16>(b, Precision::F16, failures);
    });
}

#[test]
fn bsr_matches_the_oracle_for_every_block_shape() {
    collect(cuda(), |b, failures| {
        bsr::<f64>(b, Precision::F64, failures);
        bsr::<f32>(b, Precision::F32, failures);
        bsr::<half::f16>(b, Precision::F16, failures);
        refusals(b, failures);
    });
}

/// cuSPARSE's BSR SpMV on `a` in every block shape: the square ones from 2x2 run, the others
/// are refused as Unsupported.
fn cusparse_bsr<T: Scalar<Out = T>>(
    b: &CusparseBackend,
    precision: Precision,
    failures: &mut Failures,
) {
    for (name, a) in matrices::<T>() {
        for (r, c) in BLOCKS {
            let desc = SpmvDesc::new(precision)
                .format(Format::Bsr)
                .block(BlockShape::new(r, c));
            match (r == c && r > 1, b.plan_spmv(a.as_ref(), &desc)) {
                (true, Ok(_)) => {
                    check_plan(b, (name, &a), desc, Algorithm::VendorDefault, failures)
                }
                (false, Err(Error::Unsupported { .. })) | (true, Err(Error::FillLimit { .. })) => {}
                (_, Err(e)) => failures.error(&format!("cusparse bsr {r}x{c} on {name}"), e),
                (false, Ok(_)) => failures.0.push(format!(
                    "cusparse bsr {r}x{c}: planned, but the table refuses it"
                )),
            }
        }
    }
}

#[test]
fn cusparse_bsr_matches_the_oracle() {
    collect(cusparse(), |b, failures| {
        cusparse_bsr::<f64>(b, Precision::F64, failures);
        cusparse_bsr::<f32>(b, Precision::F32, failures);
        refusals(b, failures);
    });
}
