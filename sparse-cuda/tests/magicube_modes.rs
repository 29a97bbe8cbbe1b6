//! The cuda backend's Magicube SpMM and SDDMM in the integer precisions with widths (`i4` and the mixed
//! modes `l8-r4 l12-r4 l16-r4 l16-r8 l16-r16`), by every Magicube algorithm that takes them
//! (`magicube`, and `magicube-s4` on the s4 MMAs for `i4` and `l8-r4`, which an H100 emulates
//! slowly but exactly): exactly the CPU backend's i32 results (the
//! oracle, wrapping on overflow as the kernels do) for every vector length on odd shapes, a
//! vector-row of thousands of vectors (cut into chunks that add with atomics), vector-sparse
//! layers, a power-law graph and every `dlmc_*` corpus matrix; values over each side's whole
//! width, its lowest and highest included; N not a multiple of anything, B and C in both
//! layouts, alpha and beta of any sign. New values give what a plan made with them gives, and
//! values past the widths a mode names are still multiplied exactly (more slowly where B needs
//! its high byte).
//!
//! Needs a GPU; without one each test prints `skipped: <reason>` and passes, unless
//! `SPARSE_REQUIRE_GPU=1`.

mod common;

use common::{available, collect, corpus_matrices, run_spmm, Failures};
use sparse_core::{
    Algorithm, BackendKind, BlockShape, Dense, Executor, Format, Layout, OpKind, Precision, Scalar,
    SddmmDesc, SpmmDesc, SpmmPlan,
};
use sparse_cpu::CpuBackend;
use sparse_cuda::CudaBackend;
use sparse_formats::{generate, Csr};

fn backend() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

/// A value of the left (`right == false`) or right width of `precision`, from a position: the
/// whole range, its ends included.
fn value(precision: Precision, right: bool, i: usize, j: usize) -> f64 {
    let (low, high) = precision.value_range(right);
    let span = (i64::from(high) - i64::from(low) + 1) as usize;
    let k = (i * 131 + j * 71 + (i * j) % 13) % (span + 2);
    // Every few positions an end of the range, so both appear on every matrix.
    let v = match k % 7 {
        0 => i64::from(low),
        1 => i64::from(high),
        _ => i64::from(low) + (k % span) as i64,
    };
    v as f64
}

fn with_values<T: Scalar>(a: &Csr<f64>, precision: Precision) -> Csr<T> {
    let mut m = a.cast::<T>();
    let (rows, _) = a.shape();
    let mut e = 0;
    for i in 0..rows {
        for &j in &a.col_idx()[a.as_ref().row_range(i)] {
            m.values_mut()[e] = T::from_f64(value(precision, false, i + 3, j as usize));
            e += 1;
        }
    }
    m
}

/// Odd sizes, one vector-row of 3000 vectors next to short ones, vector sparsity at V = 2, 4,
/// 8, a power-law graph, and the corpus' `dlmc_*` layers (`$SPARSE_CORPUS`, else
/// `../shared/matrices` beside the workspace) when `corpus`.
fn matrices(corpus: bool) -> Vec<(String, Csr<f64>)> {
    let mut long = vec![(2, 0, 1.0)];
    long.extend((0..3000).map(|j| (9, j, 1.0)));
    long.extend((0..40).map(|i| (i, (i * 13) % 3001, 1.0)));
    let mut list: Vec<(String, Csr<f64>)> = vec![
        (
            "uniform 37x19".into(),
            generate::uniform(37, 19, 5, 1).unwrap(),
        ),
        (
            "long vector-row".into(),
            Csr::from_triplets(41, 3001, &long).unwrap(),
        ),
        ("rmat 2^9".into(), generate::rmat(9, 8, 2).unwrap()),
    ];
    for v in [2, 4, 8] {
        list.push((
            format!("vectors {v}x1 203x301 20%"),
            generate::vector_sparse(203, 301, v, 0.2, v as u64).unwrap(),
        ));
    }
    if corpus {
        list.extend(corpus_matrices("dlmc_"));
    }
    list
}

fn desc(precision: Precision, algorithm: Algorithm, v: usize) -> SpmmDesc {
    SpmmDesc::new(precision)
        .format(Format::SrBcrs)
        .algorithm(algorithm)
        .block(BlockShape::new(v, 32))
        .max_width(512)
}

/// The Magicube algorithms the backend offers for `op` in `precision`.
fn algorithms(b: &CudaBackend, op: OpKind, precision: Precision) -> Vec<Algorithm> {
    b.algorithms(op, Format::SrBcrs, precision)
        .into_iter()
        .map(|o| o.algorithm)
        .collect()
}

/// A run: N, the layouts of B and C, alpha and beta.
type RunOf = (usize, (Layout, Layout), (i32, i32));

const RUNS: [RunOf; 4] = [
    (5, (Layout::ColMajor, Layout::ColMajor), (2, -3)),
    (33, (Layout::RowMajor, Layout::RowMajor), (-1, 1)),
    (128, (Layout::RowMajor, Layout::RowMajor), (1, 0)),
    (300, (Layout::RowMajor, Layout::ColMajor), (3, 1)),
];

/// Runs `plan` and the oracle's plan of the same precision on `a` and records where C differs.
#[allow(clippy::too_many_arguments)]
fn check<T: Scalar<Out = i32, Acc = i32>>(
    b: &CudaBackend,
    plan: &mut dyn SpmmPlan<T>,
    a: &Csr<T>,
    precision: Precision,
    what: &str,
    (n, layouts, (alpha, beta)): RunOf,
    failures: &mut Failures,
) {
    let (rows, cols) = a.shape();
    let bh = Dense::from_fn(cols, n, layouts.0, |i, j| {
        T::from_f64(value(precision, true, i + 1, j * 3 + 1))
    });
    let prior = |i: usize, j: usize| (i * 7 + j) as i32 - 50;
    let c0 = Dense::from_fn(rows, n, layouts.1, prior);
    let got = run_spmm(b, plan, alpha, &bh, beta, &c0);
    let got = match got {
        Ok(g) => g,
        Err(e) => return failures.error(&format!("{what} n={n}"), e),
    };
    let mut want = Dense::from_fn(rows, n, layouts.1, prior);
    let oracle = CpuBackend::new()
        .plan_spmm(a.as_ref(), &SpmmDesc::new(precision).max_width(512))
        .and_then(|mut p| p.run(alpha, bh.as_ref(), beta, want.as_mut()));
    if let Err(e) = oracle {
        return failures.error(&format!("the oracle on {what}"), e);
    }
    let mut bad = 0;
    for i in 0..rows {
        for j in 0..n {
            let (g, w) = (got.as_ref().at(i, j), want.as_ref().at(i, j));
            if g != w {
                if bad < 3 {
                    failures.0.push(format!(
                        "{what} n={n} {layouts:?} alpha {alpha} beta {beta}: C[{i}][{j}] = {g}, \
                         want {w}"
                    ));
                }
                bad += 1;
            }
        }
    }
}

fn every_mode<T: Scalar<Out = i32, Acc = i32>>(
    b: &CudaBackend,
    corpus: bool,
    failures: &mut Failures,
) {
    for precision in Precision::WITH_WIDTHS
        .into_iter()
        .filter(|p| p.storage == T::DTYPE)
    {
        for (name, pattern) in matrices(corpus) {
            let a = with_values::<T>(&pattern, precision);
            let vectors: &[usize] = if name.starts_with("dlmc") {
                &[8]
            } else {
                &[2, 4, 8]
            };
            for algorithm in algorithms(b, OpKind::Spmm, precision) {
                for &v in vectors {
                    let what = format!("{precision} {algorithm} {name} V={v}");
                    let mut plan = match b.plan_spmm(a.as_ref(), &desc(precision, algorithm, v)) {
                        Ok(p) => p,
                        Err(e) => {
                            failures.error(&format!("planning {what}"), e);
                            continue;
                        }
                    };
                    assert_eq!(plan.info().algorithm, algorithm);
                    let runs: &[RunOf] = if name.starts_with("dlmc") {
                        &RUNS[2..3]
                    } else {
                        &RUNS
                    };
                    for &run in runs {
                        check(b, plan.as_mut(), &a, precision, &what, run, failures);
                    }
                }
            }
        }
    }
}

#[test]
fn every_mode_is_exact_for_every_vector_length() {
    collect(backend(), |b, failures| {
        every_mode::<i8>(b, false, failures);
        every_mode::<i16>(b, false, failures);
    });
}

#[test]
fn every_mode_is_exact_on_the_dlmc_corpus() {
    collect(backend(), |b, failures| {
        every_mode::<i8>(b, true, failures);
        every_mode::<i16>(b, true, failures);
    });
}

/// Runs an SDDMM of `precision` on `s` (X, Y over the left and right widths, `k` columns) and
/// records where C, brought back to CSR order, differs from the oracle's, or a slot without an
/// entry is not 0.
fn check_sddmm<T: Scalar<Out = i32, Acc = i32>>(
    b: &CudaBackend,
    s: &Csr<T>,
    (precision, algorithm): (Precision, Algorithm),
    (v, k, scaled): (usize, usize, bool),
    failures: &mut Failures,
) {
    let what = format!("sddmm {precision} {algorithm} V={v} k={k} scaled {scaled}");
    let (rows, cols) = s.shape();
    let x = Dense::from_fn(rows, k, Layout::RowMajor, |i, j| {
        T::from_f64(value(precision, false, i + 2, j))
    });
    let y = Dense::from_fn(cols, k, Layout::ColMajor, |i, j| {
        T::from_f64(value(precision, true, i, j + 5))
    });
    let desc = SddmmDesc::new(precision)
        .format(Format::SrBcrs)
        .algorithm(algorithm)
        .block(BlockShape::new(v, 32))
        .scale_by_values(scaled)
        .max_width(512);
    let got = (|| -> sparse_core::Result<(Vec<i32>, sparse_core::ValueOrder)> {
        let mut plan = b.plan_sddmm(s.as_ref(), &desc)?;
        let order = plan.value_order().expect("a slot order").clone();
        let prior = Dense::from_fn(order.len(), 1, Layout::ColMajor, |i, _| i as i32 % 5 - 2);
        let (xd, yd) = (b.upload(x.as_ref())?, b.upload(y.as_ref())?);
        let mut cd = b.upload(prior.as_ref())?;
        plan.run(-2, xd.as_ref(), yd.as_ref(), 1, cd.as_mut())?;
        let c = b.download(&cd)?;
        Ok((
            (0..order.len()).map(|i| c.as_ref().at(i, 0)).collect(),
            order,
        ))
    })();
    let (got, order) = match got {
        Ok(g) => g,
        Err(e) => return failures.error(&what, e),
    };
    let prior_csr = order
        .to_csr_order(
            &(0..order.len())
                .map(|i| i as i32 % 5 - 2)
                .collect::<Vec<_>>(),
        )
        .expect("slot order");
    let mut want = Dense::from_vec(prior_csr, s.nnz(), 1, s.nnz().max(1), Layout::ColMajor)
        .expect("consistent");
    let oracle = CpuBackend::new()
        .plan_sddmm(
            s.as_ref(),
            &SddmmDesc::new(precision)
                .scale_by_values(scaled)
                .max_width(512),
        )
        .and_then(|mut p| p.run(-2, x.as_ref(), y.as_ref(), 1, want.as_mut()));
    if let Err(e) = oracle {
        return failures.error(&format!("the oracle on {what}"), e);
    }
    let mut bad = 0;
    for (slot, &g) in got.iter().enumerate() {
        let w = order.entry(slot).map_or(0, |e| want.as_ref().at(e, 0));
        if g != w {
            if bad < 3 {
                failures
                    .0
                    .push(format!("{what}: slot {slot} = {g}, want {w}"));
            }
            bad += 1;
        }
    }
}

fn every_sddmm_mode<T: Scalar<Out = i32, Acc = i32>>(b: &CudaBackend, failures: &mut Failures) {
    for precision in Precision::WITH_WIDTHS
        .into_iter()
        .filter(|p| p.storage == T::DTYPE)
    {
        for (_, pattern) in matrices(false) {
            let s = with_values::<T>(&pattern, precision);
            for algorithm in algorithms(b, OpKind::Sddmm, precision) {
                for v in [2, 4, 8] {
                    for (k, scaled) in [(19, false), (64, true), (100, false), (257, false)] {
                        check_sddmm(b, &s, (precision, algorithm), (v, k, scaled), failures);
                    }
                }
            }
        }
    }
}

#[test]
fn every_sddmm_mode_is_exact_in_slot_order() {
    collect(backend(), |b, failures| {
        every_sddmm_mode::<i8>(b, failures);
        every_sddmm_mode::<i16>(b, failures);
    });
}

#[test]
fn new_values_give_what_a_new_plan_gives() {
    collect(backend(), |b, failures| {
        let pattern = generate::vector_sparse(203, 301, 8, 0.2, 8).unwrap();
        for precision in [Precision::L12_R4, Precision::L16_R16] {
            let first = with_values::<i16>(&pattern, precision);
            let mut second = first.clone();
            second
                .values_mut()
                .iter_mut()
                .enumerate()
                .for_each(|(e, v)| {
                    *v = value(precision, false, e, 5) as i16;
                });
            update_and_check(
                b,
                (&first, &second),
                precision,
                Algorithm::Magicube,
                failures,
            );
        }
        // Values within 4 bits (one plane), then past them (two), and back.
        let small = with_values::<i8>(&pattern, Precision::I4);
        let wide = with_values::<i8>(&pattern, Precision::L8_R4);
        for (first, second) in [(&small, &wide), (&wide, &small)] {
            update_and_check(
                b,
                (first, second),
                Precision::L8_R4,
                Algorithm::MagicubeS4,
                failures,
            );
        }
    });
}

/// Plans on `first`, moves `second`'s values in and checks the plan against the oracle on
/// `second`.
fn update_and_check<T: Scalar<Out = i32, Acc = i32>>(
    b: &CudaBackend,
    (first, second): (&Csr<T>, &Csr<T>),
    precision: Precision,
    algorithm: Algorithm,
    failures: &mut Failures,
) {
    let what = format!("{precision} {algorithm} after update_values");
    let outcome = b
        .plan_spmm(first.as_ref(), &desc(precision, algorithm, 8))
        .and_then(|mut plan| {
            let values = b.upload(
                Dense::from_vec(
                    second.values().to_vec(),
                    second.nnz(),
                    1,
                    second.nnz(),
                    Layout::ColMajor,
                )?
                .as_ref(),
            )?;
            plan.update_values(values.as_ref())?;
            check(
                b,
                plan.as_mut(),
                second,
                precision,
                &what,
                RUNS[1],
                failures,
            );
            Ok(())
        });
    if let Err(e) = outcome {
        failures.error(&what, e);
    }
}

#[test]
fn values_past_a_mode_width_are_still_exact() {
    collect(backend(), |b, failures| {
        let pattern = generate::vector_sparse(64, 64, 8, 0.3, 3).unwrap();
        let mut whole = with_values::<i8>(&pattern, Precision::I4);
        whole.values_mut()[7] = 100;
        for algorithm in [Algorithm::Magicube, Algorithm::MagicubeS4] {
            match b.plan_spmm(whole.as_ref(), &desc(Precision::I4, algorithm, 8)) {
                // B drawn over i8, past 4 bits too.
                Ok(mut plan) => check(
                    b,
                    plan.as_mut(),
                    &whole,
                    Precision::I8,
                    &format!("i4 {algorithm}"),
                    RUNS[1],
                    failures,
                ),
                Err(e) => failures.error(
                    &format!("planning i4 {algorithm} with an A value of 100"),
                    e,
                ),
            }
        }
        let mut wide = with_values::<i16>(&pattern, Precision::L12_R4);
        wide.values_mut()[7] = 30000;
        // A past 12 bits, and B drawn over 16 bits: the plans promised 12 and 4, and 8.
        for promised in [Precision::L12_R4, Precision::L16_R8] {
            match b.plan_spmm(wide.as_ref(), &desc(promised, Algorithm::Magicube, 8)) {
                Ok(mut plan) => {
                    let what = format!("{promised} with 16-bit values");
                    let run = RUNS[1];
                    check(
                        b,
                        plan.as_mut(),
                        &wide,
                        Precision::L16_R16,
                        &what,
                        run,
                        failures,
                    );
                }
                Err(e) => failures.error(&format!("planning {promised} with A past 12 bits"), e),
            }
        }
    });
}
