//! The cuda backend's FlashSparse kernels (ME-BCRS on tensor cores): the device-built ME-BCRS
//! equals sparse-formats' host conversion; SpMM and SDDMM in f16 and tf32, 8x1 and 16x1 vectors,
//! agree with an f64 product of the same (rounded) inputs on matrices with odd sizes, empty
//! windows, a window of thousands of vectors (cut into chunks) and a power-law graph; N and K
//! not multiples of 8 or 16, dense operands in both layouts, beta != 0 and alpha == 0; SDDMM
//! leaves 0 in every padding slot, alpha == 0 included. New
//! values given to a plan (from the host or the device) give what a plan made with them gives;
//! a run wider than the plan reserved for is refused until `reserve`.
//!
//! Needs a GPU; without one each test prints `skipped: <reason>` and passes, unless
//! `SPARSE_REQUIRE_GPU=1`.

mod common;

use common::{available, collect, Failures};
use sparse_core::{
    Algorithm, BackendKind, Dense, DenseRef, Error, Executor, Layout, OpKind, Precision, Scalar,
    SddmmDesc, SddmmPlan, SpmmDesc, SpmmPlan,
};
use sparse_cuda::{flashsparse::me_bcrs_on_device, CudaBackend};
use sparse_formats::{generate, Csr, FillLimit, MeBcrs, MeBcrsShape};

const ALGORITHMS: [Algorithm; 2] = [Algorithm::FlashSparse, Algorithm::FlashSparse16x1];

fn backend() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

/// Values in [-1, 1] with few mantissa bits, exact in f16 and tf32.
fn value(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 3) % 17) as f64 / 8.0 - 1.0
}

fn with_values(a: Csr<f64>) -> Csr<f64> {
    let (rows, cols) = a.shape();
    let mut triplets = Vec::new();
    for i in 0..rows {
        let range = a.as_ref().row_range(i);
        for &j in &a.col_idx()[range] {
            triplets.push((i, j as usize, value(i, j as usize)));
        }
    }
    Csr::from_triplets(rows, cols, &triplets).expect("valid")
}

/// Odd sizes; empty windows; one window of 3000 vectors (row 9) next to short ones; a power-law
/// graph; no rows.
fn matrices() -> Vec<(&'static str, Csr<f64>)> {
    let mut long = vec![(2, 0, 1.0)];
    long.extend((0..3000).map(|j| (9, j, 0.0)));
    long.extend((0..40).map(|i| (i, (i * 13) % 3001, 0.0)));
    let mut sparse_windows = Vec::new();
    for i in (0..130).filter(|i| (i / 16) % 3 == 1) {
        sparse_windows.push((i, (i * 7) % 45, 0.0));
    }
    vec![
        ("uniform 37x53", generate::uniform(37, 53, 5, 1).unwrap()),
        ("rmat 2^10", generate::rmat(10, 8, 2).unwrap()),
        ("long window", Csr::from_triplets(41, 3001, &long).unwrap()),
        (
            "empty windows",
            Csr::from_triplets(130, 45, &sparse_windows).unwrap(),
        ),
        ("0x5", Csr::zeros(0, 5)),
    ]
    .into_iter()
    .map(|(n, a)| (n, with_values(a)))
    .collect()
}

fn dense<T: Scalar>(rows: usize, cols: usize, layout: Layout, seed: usize) -> Dense<T> {
    let ld = match layout {
        Layout::RowMajor => cols,
        Layout::ColMajor => rows,
    }
    .max(1);
    let mut data = vec![
        T::default();
        ld * if layout == Layout::RowMajor {
            rows
        } else {
            cols
        }
    ];
    for i in 0..rows {
        for j in 0..cols {
            let at = match layout {
                Layout::RowMajor => i * ld + j,
                Layout::ColMajor => i + j * ld,
            };
            data[at] = T::from_f64(value(i + seed, j * 5 + seed));
        }
    }
    Dense::from_vec(data, rows, cols, ld, layout).expect("consistent")
}

fn get<T: Scalar>(d: &DenseRef<'_, T>, i: usize, j: usize) -> f64 {
    let data = d.host("read").expect("host");
    let at = match d.layout() {
        Layout::RowMajor => i * d.ld() + j,
        Layout::ColMajor => i + j * d.ld(),
    };
    data[at].to_f64()
}

/// |got - want| within what f32 accumulation and the output rounding (`dtype_eps`: `F16_EPS`,
/// `TF32_EPS`) allow.
fn close(got: f64, want: f64, magnitude: f64, dtype_eps: f64) -> bool {
    (got - want).abs() <= 1e-5 * magnitude + dtype_eps * want.abs() + 1e-6
}

const F16_EPS: f64 = 1e-3;
const TF32_EPS: f64 = 1e-6;

#[test]
fn device_built_me_bcrs_equals_the_host_conversion() {
    let Some(b) = backend() else { return };
    for (name, a) in matrices() {
        for shape in [
            MeBcrsShape::f16(),
            MeBcrsShape::tf32(),
            MeBcrsShape::new(16, 8).unwrap(),
            MeBcrsShape::new(16, 4).unwrap(),
        ] {
            let a = a.cast::<f32>();
            let host = MeBcrs::from_csr(a.as_ref(), shape, FillLimit::UNLIMITED).unwrap();
            let device = me_bcrs_on_device(&b, a.as_ref(), shape)
                .unwrap_or_else(|e| panic!("{name} {shape:?}: {e}"));
            assert!(
                device == host,
                "{name} {shape:?}: device and host ME-BCRS differ"
            );
        }
    }
}

fn spmm_case<T: Scalar<Acc = f32, Out = T>>(
    b: &CudaBackend,
    precision: Precision,
    eps: f64,
    failures: &mut Failures,
) {
    for (name, a64) in matrices() {
        let a = a64.cast::<T>();
        for algorithm in ALGORITHMS {
            let desc = SpmmDesc::new(precision)
                .format(sparse_core::Format::MeBcrs)
                .algorithm(algorithm);
            let mut plan = b.plan_spmm(a.as_ref(), &desc).expect("plan");
            assert_eq!(plan.info().algorithm, algorithm);
            for (n, layouts, alpha, beta) in [
                (1, (Layout::RowMajor, Layout::RowMajor), 1.0, 0.0),
                (7, (Layout::ColMajor, Layout::ColMajor), 1.5, 0.5),
                (16, (Layout::RowMajor, Layout::ColMajor), 1.0, 0.0),
                (33, (Layout::RowMajor, Layout::RowMajor), -1.0, 1.0),
                (128, (Layout::RowMajor, Layout::RowMajor), 1.0, 0.0),
                (40, (Layout::ColMajor, Layout::RowMajor), 0.0, 2.0),
            ] {
                let (rows, cols) = a.shape();
                let bh = dense::<T>(cols, n, layouts.0, 1);
                let c0 = dense::<T>(rows, n, layouts.1, 2);
                let got = (|| -> sparse_core::Result<Dense<T>> {
                    let bd = b.upload(bh.as_ref())?;
                    let mut cd = b.upload(c0.as_ref())?;
                    plan.run(alpha, bd.as_ref(), beta, cd.as_mut())?;
                    b.download(&cd)
                })();
                let got = match got {
                    Ok(g) => g,
                    Err(e) => {
                        failures
                            .0
                            .push(format!("spmm {name} {algorithm} {precision} n={n}: {e}"));
                        continue;
                    }
                };
                let (bv, cv, gv) = (bh.as_ref(), c0.as_ref(), got.as_ref());
                let mut bad = 0;
                for i in 0..rows {
                    for j in 0..n {
                        let (mut sum, mut mag) = (0.0, 0.0);
                        let range = a.as_ref().row_range(i);
                        for e in range {
                            let col = a.col_idx()[e] as usize;
                            let t = a.values()[e].to_f64() * get(&bv, col, j);
                            sum += t;
                            mag += t.abs();
                        }
                        let want = f64::from(alpha) * sum + f64::from(beta) * get(&cv, i, j);
                        if !close(get(&gv, i, j), want, mag + get(&cv, i, j).abs(), eps) {
                            if bad < 3 {
                                failures.0.push(format!(
                                    "spmm {name} {algorithm} {precision} n={n} {layouts:?}: \
                                     C[{i}][{j}] = {} , want {want}",
                                    get(&gv, i, j)
                                ));
                            }
                            bad += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn spmm_agrees_with_the_f64_product() {
    collect(backend(), |b, failures| {
        spmm_case::<sparse_core::f16>(b, Precision::F16, F16_EPS, failures);
        spmm_case::<f32>(b, Precision::TF32, TF32_EPS, failures);
    });
}

fn sddmm_case<T: Scalar<Acc = f32, Out = T>>(
    b: &CudaBackend,
    precision: Precision,
    eps: f64,
    failures: &mut Failures,
) {
    for (name, a64) in matrices() {
        let s = a64.cast::<T>();
        for algorithm in ALGORITHMS {
            for scaled in [false, true] {
                let desc = SddmmDesc::new(precision)
                    .format(sparse_core::Format::MeBcrs)
                    .algorithm(algorithm)
                    .scale_by_values(scaled);
                let mut plan = b.plan_sddmm(s.as_ref(), &desc).expect("plan");
                let order = plan.value_order().expect("a slot order").clone();
                for (k, layouts, alpha, beta) in [
                    (1, (Layout::RowMajor, Layout::RowMajor), 1.0, 0.0),
                    (7, (Layout::ColMajor, Layout::RowMajor), 1.5, 0.5),
                    (32, (Layout::RowMajor, Layout::RowMajor), 1.0, 0.0),
                    (33, (Layout::RowMajor, Layout::ColMajor), -1.0, 1.0),
                    (20, (Layout::RowMajor, Layout::RowMajor), 0.0, 2.0),
                ] {
                    let (rows, cols) = s.shape();
                    let xh = dense::<T>(rows, k, layouts.0, 3);
                    let yh = dense::<T>(cols, k, layouts.1, 4);
                    // Padding slots start at 1 so a kernel that skips them is caught.
                    let prior: Vec<T> = (0..order.len())
                        .map(|slot| T::from_f64(order.entry(slot).map_or(1.0, |e| value(e, 1))))
                        .collect();
                    let c0 = Dense::from_vec(
                        prior.clone(),
                        order.len(),
                        1,
                        order.len().max(1),
                        Layout::ColMajor,
                    )
                    .expect("consistent");
                    let got = (|| -> sparse_core::Result<Dense<T>> {
                        let xd = b.upload(xh.as_ref())?;
                        let yd = b.upload(yh.as_ref())?;
                        let mut cd = b.upload(c0.as_ref())?;
                        plan.run(alpha, xd.as_ref(), yd.as_ref(), beta, cd.as_mut())?;
                        b.download(&cd)
                    })();
                    let got = match got {
                        Ok(g) => g,
                        Err(e) => {
                            failures
                                .0
                                .push(format!("sddmm {name} {algorithm} {precision} k={k}: {e}"));
                            continue;
                        }
                    };
                    let gv = got.as_ref();
                    let (xv, yv) = (xh.as_ref(), yh.as_ref());
                    let mut bad = 0;
                    for (slot, before) in prior.iter().enumerate() {
                        let g = get(&gv, slot, 0);
                        let Some(e) = order.entry(slot) else {
                            let want = 0.0;
                            if g != want && bad < 3 {
                                failures.0.push(format!(
                                    "sddmm {name} {algorithm} {precision} k={k}: padding slot \
                                     {slot} = {g}, want {want}"
                                ));
                                bad += 1;
                            }
                            continue;
                        };
                        let i = s.row_ptr().partition_point(|&p| p as usize <= e) - 1;
                        let j = s.col_idx()[e] as usize;
                        let (mut dot, mut mag) = (0.0, 0.0);
                        for t in 0..k {
                            let p = get(&xv, i, t) * get(&yv, j, t);
                            dot += p;
                            mag += p.abs();
                        }
                        let v = if scaled { s.values()[e].to_f64() } else { 1.0 };
                        let before = before.to_f64();
                        let want = f64::from(alpha) * dot * v + f64::from(beta) * before;
                        if !close(g, want, mag + before.abs(), eps) && bad < 3 {
                            failures.0.push(format!(
                                "sddmm {name} {algorithm} {precision} k={k} scaled={scaled}: \
                                 slot {slot} (entry {e}: {i},{j}) = {g}, want {want}"
                            ));
                            bad += 1;
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn sddmm_agrees_with_the_f64_product_in_slot_order() {
    collect(backend(), |b, failures| {
        sddmm_case::<sparse_core::f16>(b, Precision::F16, F16_EPS, failures);
        sddmm_case::<f32>(b, Precision::TF32, TF32_EPS, failures);
    });
}

#[test]
fn unsupported_requests_are_typed_errors() {
    let Some(b) = backend() else { return };
    let a = with_values(generate::uniform(20, 20, 3, 5).unwrap());
    let f32s = a.cast::<f32>();
    let me = SpmmDesc::new(Precision::F32).format(sparse_core::Format::MeBcrs);
    assert!(matches!(
        b.plan_spmm(f32s.as_ref(), &me).map(drop),
        Err(Error::Unsupported { .. })
    ));
    let tf32 = SpmmDesc::new(Precision::TF32)
        .format(sparse_core::Format::MeBcrs)
        .block(sparse_core::BlockShape::new(8, 8));
    assert!(matches!(
        b.plan_spmm(f32s.as_ref(), &tf32).map(drop),
        Err(Error::InvalidArgument { .. })
    ));
}

/// `a`'s pattern with other values (f16- and tf32-exact too).
fn revalued(a: &Csr<f64>) -> Csr<f64> {
    let mut b = a.clone();
    for (e, v) in b.values_mut().iter_mut().enumerate() {
        *v = value(e + 5, 3) * 0.5;
    }
    b
}

/// `values` (nnz x 1) on the host.
fn column<T: Scalar>(values: &[T]) -> Dense<T> {
    let n = values.len();
    Dense::from_vec(values.to_vec(), n, 1, n.max(1), Layout::ColMajor).expect("consistent")
}

/// Downloads everything a run left in `c`, as bits, for exact comparisons.
fn bits<T: Scalar>(b: &CudaBackend, c: &Dense<T>) -> Vec<u64> {
    let host = b.download(c).expect("download");
    let view = host.as_ref();
    view.host("read").expect("host")[..view.span()]
        .iter()
        .map(|v| v.to_f64().to_bits())
        .collect()
}

/// Records, as `what`, where new values given to a plan differ, bit for bit, from what a plan
/// made with them gives: `plans` are one made with `first`'s values and one with `second`'s
/// (`fresh`); the first is given `second`'s from the host, then `first`'s back from the device.
/// `run` runs a plan and returns C's bits; `update` gives a plan new values.
fn check_updates<T: Scalar, P: ?Sized>(
    what: &str,
    b: &CudaBackend,
    (first, second): (&Csr<T>, &Csr<T>),
    plans: sparse_core::Result<(Box<P>, Box<P>)>,
    run: impl Fn(&mut P) -> sparse_core::Result<Vec<u64>>,
    update: impl Fn(&mut P, DenseRef<'_, T>) -> sparse_core::Result<()>,
    failures: &mut Failures,
) {
    let outcome = plans.and_then(|(mut plan, mut fresh)| {
        let before = run(&mut plan)?;
        let want = run(&mut fresh)?;
        let mut wrong = Vec::new();
        update(&mut plan, column(second.values()).as_ref())?;
        if run(&mut plan)? != want {
            wrong.push("values from the host");
        }
        let on_device = b.upload(column(first.values()).as_ref())?;
        update(&mut plan, on_device.as_ref())?;
        if run(&mut plan)? != before {
            wrong.push("values from the device");
        }
        Ok(wrong)
    });
    match outcome {
        Ok(wrong) => failures.0.extend(
            wrong
                .into_iter()
                .map(|w| format!("{what}: {w} differ from a fresh plan")),
        ),
        Err(e) => failures.error(what, e),
    }
}

fn spmm_updates<T: Scalar<Acc = f32, Out = T>>(
    b: &CudaBackend,
    precision: Precision,
    failures: &mut Failures,
) {
    for (name, a64) in matrices() {
        let (first, second) = (a64.cast::<T>(), revalued(&a64).cast::<T>());
        let (rows, cols) = first.shape();
        let bh = dense::<T>(cols, 40, Layout::RowMajor, 1);
        let c0 = dense::<T>(rows, 40, Layout::RowMajor, 2);
        for algorithm in ALGORITHMS {
            let desc = SpmmDesc::new(precision)
                .format(sparse_core::Format::MeBcrs)
                .algorithm(algorithm);
            let plans = b
                .plan_spmm(first.as_ref(), &desc)
                .and_then(|plan| Ok((plan, b.plan_spmm(second.as_ref(), &desc)?)));
            check_updates(
                &format!("spmm {name} {algorithm} {precision}"),
                b,
                (&first, &second),
                plans,
                |plan| {
                    let bd = b.upload(bh.as_ref())?;
                    let mut cd = b.upload(c0.as_ref())?;
                    plan.run(1.5, bd.as_ref(), 0.5, cd.as_mut())?;
                    Ok(bits(b, &cd))
                },
                |plan, values| plan.update_values(values),
                failures,
            );
        }
    }
}

fn sddmm_updates<T: Scalar<Acc = f32, Out = T>>(
    b: &CudaBackend,
    precision: Precision,
    failures: &mut Failures,
) {
    for (name, s64) in matrices() {
        let (first, second) = (s64.cast::<T>(), revalued(&s64).cast::<T>());
        let (rows, cols) = first.shape();
        let xh = dense::<T>(rows, 24, Layout::RowMajor, 3);
        let yh = dense::<T>(cols, 24, Layout::RowMajor, 4);
        for algorithm in ALGORITHMS {
            let desc = SddmmDesc::new(precision)
                .format(sparse_core::Format::MeBcrs)
                .algorithm(algorithm)
                .scale_by_values(true);
            let plans = b
                .plan_sddmm(first.as_ref(), &desc)
                .and_then(|plan| Ok((plan, b.plan_sddmm(second.as_ref(), &desc)?)));
            check_updates(
                &format!("sddmm {name} {algorithm} {precision}"),
                b,
                (&first, &second),
                plans,
                |plan| {
                    let slots = plan.value_order().map_or(0, |o| o.len());
                    let xd = b.upload(xh.as_ref())?;
                    let yd = b.upload(yh.as_ref())?;
                    let mut cd = b.zeros::<T>(slots, 1, Layout::ColMajor)?;
                    plan.run(1.0, xd.as_ref(), yd.as_ref(), 0.0, cd.as_mut())?;
                    Ok(bits(b, &cd))
                },
                |plan, values| plan.update_values(values),
                failures,
            );
        }
    }
}

#[test]
fn updated_values_give_what_a_fresh_plan_gives() {
    collect(backend(), |b, failures| {
        spmm_updates::<sparse_core::f16>(b, Precision::F16, failures);
        spmm_updates::<f32>(b, Precision::TF32, failures);
        sddmm_updates::<sparse_core::f16>(b, Precision::F16, failures);
        sddmm_updates::<f32>(b, Precision::TF32, failures);
    });
}

#[test]
fn runs_past_the_reservation_wait_for_reserve() {
    let Some(b) = backend() else { return };
    // The long window is cut into chunks, whose partial sums need a workspace that grows with N.
    let (_, long) = matrices()
        .into_iter()
        .find(|(name, _)| *name == "long window")
        .expect("listed");
    let a = long.cast::<f32>();
    let (rows, cols) = a.shape();
    let spmm = SpmmDesc::new(Precision::TF32)
        .format(sparse_core::Format::MeBcrs)
        .max_width(16);
    let mut plan = b.plan_spmm(a.as_ref(), &spmm).expect("plan");
    assert_eq!(plan.info().reserved_width, 16);
    let bytes = plan.info().bytes;
    let bh = dense::<f32>(cols, 40, Layout::RowMajor, 1);
    let c0 = dense::<f32>(rows, 40, Layout::RowMajor, 2);
    let run = |plan: &mut dyn SpmmPlan<f32>| {
        let bd = b.upload(bh.as_ref())?;
        let mut cd = b.upload(c0.as_ref())?;
        plan.run(1.0, bd.as_ref(), 0.0, cd.as_mut())?;
        Ok::<_, Error>(bits(&b, &cd))
    };
    match run(plan.as_mut()) {
        Err(Error::WidthExceeded {
            op: OpKind::Spmm,
            width: 40,
            reserved: 16,
        }) => {}
        other => panic!("an SpMM of N = 40 on a plan for 16: {:?}", other.map(drop)),
    }
    plan.reserve(40).expect("reserve");
    assert_eq!(plan.info().reserved_width, 40);
    assert!(
        plan.info().bytes > bytes,
        "the workspace grew: {} -> {} bytes",
        bytes,
        plan.info().bytes
    );
    let mut wide = b.plan_spmm(a.as_ref(), &spmm.max_width(40)).expect("plan");
    assert_eq!(
        run(plan.as_mut()).expect("run after reserve"),
        run(wide.as_mut()).expect("run")
    );

    let sddmm = SddmmDesc::new(Precision::TF32)
        .format(sparse_core::Format::MeBcrs)
        .max_width(8);
    let mut plan = b.plan_sddmm(a.as_ref(), &sddmm).expect("plan");
    let slots = plan.value_order().expect("a slot order").len();
    let xh = dense::<f32>(rows, 32, Layout::RowMajor, 3);
    let yh = dense::<f32>(cols, 32, Layout::RowMajor, 4);
    let run = |plan: &mut dyn SddmmPlan<f32>| {
        let xd = b.upload(xh.as_ref())?;
        let yd = b.upload(yh.as_ref())?;
        let mut cd = b.zeros::<f32>(slots, 1, Layout::ColMajor)?;
        plan.run(1.0, xd.as_ref(), yd.as_ref(), 0.0, cd.as_mut())?;
        Ok::<_, Error>(bits(&b, &cd))
    };
    match run(plan.as_mut()) {
        Err(Error::WidthExceeded {
            op: OpKind::Sddmm,
            width: 32,
            reserved: 8,
        }) => {}
        other => panic!("an SDDMM of K = 32 on a plan for 8: {:?}", other.map(drop)),
    }
    plan.reserve(32).expect("reserve");
    assert_eq!(plan.info().reserved_width, 32);
    let mut wide = b
        .plan_sddmm(a.as_ref(), &sddmm.max_width(32))
        .expect("plan");
    assert_eq!(
        run(plan.as_mut()).expect("run after reserve"),
        run(wide.as_mut()).expect("run")
    );
}
