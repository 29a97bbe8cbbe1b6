//! The cuda backend's Magicube kernels (SR-BCRS, i8 on integer tensor cores): SpMM and SDDMM
//! give exactly the oracle's i32 results for every vector length (2, 4, 8) on odd shapes
//! (M = 37, K = 19, N = 5), empty rows and vector-rows, a vector-row of thousands of vectors,
//! vector-structured matrices, a power-law graph, no rows, and every `dlmc_*` matrix of the
//! corpus; values over the whole i8 range, N and K not multiples of 8 or 32, dense operands in
//! both layouts, alpha and beta of any sign, alpha == 0; SDDMM leaves 0 in every slot without an
//! entry. New values give what a plan made with them gives; bad requests are typed errors.
//! The f32-i8 SpMM is the host's quantized product dequantized, within the quantization's
//! bound of the f32 product; the quantized attention block is close to the f32 oracle (its
//! error printed); cuBLAS's i8 GEMM (intbench's dense baseline) and cuSPARSE's i8 Blocked-ELL
//! SpMM (its block-sparse baseline) are exact; the s8 and s4 MMA rates are measured and printed.
//!
//! Needs a GPU; without one each test prints `skipped: <reason>` and passes, unless
//! `SPARSE_REQUIRE_GPU=1`.

mod common;

use common::{available, collect, corpus_matrices, run_spmm, Failures};
use sparse_core::{
    Algorithm, AttentionShape, BackendKind, BlockShape, Dense, DenseRef, Error, Executor, Format,
    Layout, Precision, Scalar, SddmmDesc, SddmmPlan, SpmmDesc, SpmmPlan,
};
use sparse_cpu::reference;
use sparse_cuda::CudaBackend;
use sparse_formats::{generate, Csr};

fn backend() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

/// The cuda backend and cuSPARSE (with cuBLAS) on its device, for the vendor baselines.
fn with_vendor() -> Option<(CudaBackend, sparse_cuda::CusparseBackend)> {
    let b = backend()?;
    let vendor = available(
        BackendKind::Cusparse,
        sparse_cuda::CusparseBackend::sharing(&b),
    )?;
    Some((b, vendor))
}

/// An i8 over the whole range, -128 and 127 included, from a position.
fn int8(i: usize, j: usize) -> i8 {
    ((i * 131 + j * 71 + (i * j) % 13) % 256) as u8 as i8
}

/// `a`'s pattern with i8 values over the whole range.
fn with_values(a: &Csr<f64>) -> Csr<i8> {
    let (rows, cols) = a.shape();
    let mut triplets = Vec::with_capacity(a.nnz());
    for i in 0..rows {
        for &j in &a.col_idx()[a.as_ref().row_range(i)] {
            triplets.push((i, j as usize, int8(i + 3, j as usize)));
        }
    }
    Csr::from_triplets(rows, cols, &triplets).expect("valid")
}

/// Odd sizes; empty rows and vector-rows; one vector-row of 3000 vectors next to short ones;
/// vector sparsity at V = 2, 4, 8 (a DLMC layer expanded by vectors); a power-law graph; no
/// rows; no columns.
fn matrices() -> Vec<(String, Csr<i8>)> {
    let mut long = vec![(2, 0, 1.0)];
    long.extend((0..3000).map(|j| (9, j, 1.0)));
    long.extend((0..40).map(|i| (i, (i * 13) % 3001, 1.0)));
    let mut empty = Vec::new();
    for i in (0..130).filter(|i| (i / 16) % 3 == 1 && i % 5 != 0) {
        empty.push((i, (i * 7) % 45, 1.0));
    }
    let mut list: Vec<(String, Csr<f64>)> = vec![
        (
            "uniform 37x19".into(),
            generate::uniform(37, 19, 5, 1).unwrap(),
        ),
        (
            "long vector-row".into(),
            Csr::from_triplets(41, 3001, &long).unwrap(),
        ),
        (
            "empty rows".into(),
            Csr::from_triplets(130, 45, &empty).unwrap(),
        ),
        ("rmat 2^9".into(), generate::rmat(9, 8, 2).unwrap()),
        ("0x5".into(), Csr::zeros(0, 5)),
        ("6x0".into(), Csr::zeros(6, 0)),
    ];
    for v in [2, 4, 8] {
        list.push((
            format!("vectors {v}x1 203x301 20%"),
            generate::vector_sparse(203, 301, v, 0.2, v as u64).unwrap(),
        ));
    }
    list.into_iter()
        .map(|(n, a)| (n, with_values(&a)))
        .collect()
}

/// The `dlmc_*` matrices of the corpus, with i8 values.
fn dlmc() -> Vec<(String, Csr<i8>)> {
    corpus_matrices("dlmc_")
        .into_iter()
        .map(|(name, a)| (name, with_values(&a)))
        .collect()
}

fn dense(rows: usize, cols: usize, layout: Layout, seed: usize) -> Dense<i8> {
    Dense::from_fn(rows, cols, layout, |i, j| int8(i + seed, j * 3 + seed))
}

fn get<T: Scalar>(d: &DenseRef<'_, T>, i: usize, j: usize) -> f64 {
    d.at(i, j).to_f64()
}

fn spmm_desc(v: usize) -> SpmmDesc {
    SpmmDesc::new(Precision::I8)
        .format(Format::SrBcrs)
        .block(BlockShape::new(v, 32))
        .max_width(512)
}

fn sddmm_desc(v: usize, scaled: bool) -> SddmmDesc {
    SddmmDesc::new(Precision::I8)
        .format(Format::SrBcrs)
        .block(BlockShape::new(v, 32))
        .scale_by_values(scaled)
        .max_width(512)
}

/// Runs `plan` with B (`n` columns) and C in `layouts` and records where C differs from the
/// oracle's exact result.
#[allow(clippy::too_many_arguments)]
fn check_spmm(
    b: &CudaBackend,
    plan: &mut dyn SpmmPlan<i8>,
    a: &Csr<i8>,
    what: &str,
    n: usize,
    layouts: (Layout, Layout),
    (alpha, beta): (i32, i32),
    failures: &mut Failures,
) {
    let (rows, cols) = a.shape();
    let bh = dense(cols, n, layouts.0, 1);
    let c0 = Dense::from_fn(rows, n, layouts.1, |i, j| i32::from(int8(j, i + 5)));
    let got = run_spmm(b, plan, alpha, &bh, beta, &c0);
    let got = match got {
        Ok(g) => g,
        Err(e) => return failures.error(&format!("spmm {what} n={n}"), e),
    };
    let want = reference::spmm(
        a.as_ref(),
        f64::from(alpha),
        bh.as_ref(),
        f64::from(beta),
        Some(c0.as_ref()),
    )
    .expect("oracle");
    let mut bad = 0;
    for i in 0..rows {
        for j in 0..n {
            let (g, w) = (get(&got.as_ref(), i, j), get(&want.as_ref(), i, j));
            if g != w {
                if bad < 3 {
                    failures.0.push(format!(
                        "spmm {what} n={n} {layouts:?} alpha {alpha} beta {beta}: C[{i}][{j}] = \
                         {g}, want {w}"
                    ));
                }
                bad += 1;
            }
        }
    }
}

/// Runs `plan` with X, Y (`k` columns) in `layouts` and records where C (in slot order) differs
/// from the oracle's exact result, or a slot without an entry is not 0.
#[allow(clippy::too_many_arguments)]
fn check_sddmm(
    b: &CudaBackend,
    plan: &mut dyn SddmmPlan<i8>,
    s: &Csr<i8>,
    what: &str,
    k: usize,
    layouts: (Layout, Layout),
    (alpha, beta): (i32, i32),
    scaled: bool,
    failures: &mut Failures,
) {
    let (rows, cols) = s.shape();
    let order = plan.value_order().expect("a slot order").clone();
    let xh = dense(rows, k, layouts.0, 3);
    let yh = dense(cols, k, layouts.1, 4);
    // Slots without an entry start at 1, so a kernel that skips them is caught.
    let prior: Vec<i32> = (0..order.len())
        .map(|slot| order.entry(slot).map_or(1, |e| i32::from(int8(e, 1))))
        .collect();
    let c0 = Dense::from_vec(
        prior.clone(),
        order.len(),
        1,
        order.len().max(1),
        Layout::ColMajor,
    )
    .expect("consistent");
    let got = (|| -> sparse_core::Result<Dense<i32>> {
        let xd = b.upload(xh.as_ref())?;
        let yd = b.upload(yh.as_ref())?;
        let mut cd = b.upload(c0.as_ref())?;
        plan.run(alpha, xd.as_ref(), yd.as_ref(), beta, cd.as_mut())?;
        b.download(&cd)
    })();
    let got = match got {
        Ok(g) => g,
        Err(e) => return failures.error(&format!("sddmm {what} k={k}"), e),
    };
    let csr_prior = order.to_csr_order(&prior).expect("slot order");
    let csr_prior = Dense::from_vec(csr_prior, s.nnz(), 1, s.nnz().max(1), Layout::ColMajor)
        .expect("consistent");
    let want = reference::sddmm(
        s.as_ref(),
        f64::from(alpha),
        xh.as_ref(),
        yh.as_ref(),
        f64::from(beta),
        Some(csr_prior.as_ref()),
        scaled,
    )
    .expect("oracle");
    let mut bad = 0;
    for slot in 0..order.len() {
        let g = get(&got.as_ref(), slot, 0);
        let w = order.entry(slot).map_or(0.0, |e| want[e]);
        if g != w {
            if bad < 3 {
                failures.0.push(format!(
                    "sddmm {what} k={k} {layouts:?} alpha {alpha} beta {beta} scaled {scaled}: \
                     slot {slot} ({:?}) = {g}, want {w}",
                    order.entry(slot)
                ));
            }
            bad += 1;
        }
    }
}

/// A run: the dense width (N or K), the layouts of the dense inputs, alpha and beta.
type RunOf = (usize, (Layout, Layout), (i32, i32));

const SPMM_RUNS: [RunOf; 7] = [
    (1, (Layout::RowMajor, Layout::RowMajor), (1, 0)),
    (5, (Layout::ColMajor, Layout::ColMajor), (2, -3)),
    (32, (Layout::RowMajor, Layout::ColMajor), (1, 0)),
    (33, (Layout::RowMajor, Layout::RowMajor), (-1, 1)),
    (128, (Layout::RowMajor, Layout::RowMajor), (1, 0)),
    (300, (Layout::RowMajor, Layout::RowMajor), (3, 1)),
    (40, (Layout::ColMajor, Layout::RowMajor), (0, 2)),
];

const SDDMM_RUNS: [RunOf; 6] = [
    (1, (Layout::RowMajor, Layout::RowMajor), (1, 0)),
    (19, (Layout::ColMajor, Layout::RowMajor), (2, -1)),
    (64, (Layout::RowMajor, Layout::RowMajor), (1, 0)),
    (100, (Layout::RowMajor, Layout::ColMajor), (-1, 1)),
    (256, (Layout::RowMajor, Layout::RowMajor), (1, 0)),
    (20, (Layout::RowMajor, Layout::RowMajor), (0, 2)),
];

#[test]
fn spmm_is_exact_for_every_vector_length() {
    collect(backend(), |b, failures| {
        for (name, a) in matrices() {
            for v in [2, 4, 8] {
                let what = format!("{name} V={v}");
                let mut plan = match b.plan_spmm(a.as_ref(), &spmm_desc(v)) {
                    Ok(p) => p,
                    Err(e) => {
                        failures.error(&format!("planning spmm {what}"), e);
                        continue;
                    }
                };
                assert_eq!(plan.info().algorithm, Algorithm::Magicube);
                for (n, layouts, scalars) in SPMM_RUNS {
                    check_spmm(b, plan.as_mut(), &a, &what, n, layouts, scalars, failures);
                }
            }
        }
    });
}

#[test]
fn sddmm_is_exact_in_slot_order_for_every_vector_length() {
    collect(backend(), |b, failures| {
        for (name, s) in matrices() {
            for v in [2, 4, 8] {
                for scaled in [false, true] {
                    let what = format!("{name} V={v}");
                    let mut plan = match b.plan_sddmm(s.as_ref(), &sddmm_desc(v, scaled)) {
                        Ok(p) => p,
                        Err(e) => {
                            failures.error(&format!("planning sddmm {what}"), e);
                            continue;
                        }
                    };
                    for (k, layouts, scalars) in SDDMM_RUNS {
                        let run = (k, layouts, scalars, scaled);
                        check_sddmm(
                            b,
                            plan.as_mut(),
                            &s,
                            &what,
                            run.0,
                            run.1,
                            run.2,
                            run.3,
                            failures,
                        );
                    }
                }
            }
        }
    });
}

#[test]
fn every_dlmc_matrix_is_exact() {
    collect(backend(), |b, failures| {
        for (name, a) in dlmc() {
            for v in [2, 4, 8] {
                let what = format!("{name} V={v}");
                match b.plan_spmm(a.as_ref(), &spmm_desc(v)) {
                    Ok(mut plan) => {
                        for n in [64, 256] {
                            let layouts = (Layout::RowMajor, Layout::RowMajor);
                            check_spmm(b, plan.as_mut(), &a, &what, n, layouts, (1, 0), failures);
                        }
                    }
                    Err(e) => failures.error(&format!("planning spmm {what}"), e),
                }
                match b.plan_sddmm(a.as_ref(), &sddmm_desc(v, false)) {
                    Ok(mut plan) => {
                        let layouts = (Layout::RowMajor, Layout::RowMajor);
                        check_sddmm(
                            b,
                            plan.as_mut(),
                            &a,
                            &what,
                            64,
                            layouts,
                            (1, 0),
                            false,
                            failures,
                        );
                    }
                    Err(e) => failures.error(&format!("planning sddmm {what}"), e),
                }
            }
        }
    });
}

#[test]
fn new_values_give_what_a_plan_made_with_them_gives() {
    collect(backend(), |b, failures| {
        let a = with_values(&generate::vector_sparse(77, 90, 4, 0.3, 9).unwrap());
        let negated: Vec<i8> = a.values().iter().map(|v| v.wrapping_neg()).collect();
        let (rows, cols) = a.shape();
        let flipped = Csr::try_new(
            rows,
            cols,
            a.row_ptr().to_vec(),
            a.col_idx().to_vec(),
            negated.clone(),
        )
        .expect("same pattern");
        for v in [2, 8] {
            let mut plan = b.plan_spmm(a.as_ref(), &spmm_desc(v)).expect("plan");
            let values = Dense::from_vec(negated.clone(), a.nnz(), 1, a.nnz(), Layout::ColMajor)
                .expect("consistent");
            plan.update_values(values.as_ref())
                .expect("update from the host");
            let layouts = (Layout::RowMajor, Layout::RowMajor);
            check_spmm(
                b,
                plan.as_mut(),
                &flipped,
                "updated",
                70,
                layouts,
                (1, 0),
                failures,
            );
            let mut plan = b
                .plan_sddmm(a.as_ref(), &sddmm_desc(v, true))
                .expect("plan");
            let device = b.upload(values.as_ref()).expect("upload");
            plan.update_values(device.as_ref())
                .expect("update from the device");
            check_sddmm(
                b,
                plan.as_mut(),
                &flipped,
                "updated",
                40,
                layouts,
                (1, 0),
                true,
                failures,
            );
        }
    });
}

#[test]
fn bad_requests_are_typed_errors() {
    let Some(b) = backend() else { return };
    let a = with_values(&generate::uniform(20, 20, 3, 5).unwrap());
    let stride16 = SpmmDesc::new(Precision::I8)
        .format(Format::SrBcrs)
        .block(BlockShape::new(8, 16));
    assert!(matches!(
        b.plan_spmm(a.as_ref(), &stride16).map(drop),
        Err(Error::InvalidArgument { .. })
    ));
    let f32s = a.cast::<f32>();
    let float = SpmmDesc::new(Precision::F32).format(Format::SrBcrs);
    assert!(matches!(
        b.plan_spmm(f32s.as_ref(), &float).map(drop),
        Err(Error::Unsupported { .. })
    ));
    let mut plan = b
        .plan_spmm(a.as_ref(), &spmm_desc(8).max_width(16))
        .expect("plan");
    let bh = b
        .upload(dense(20, 17, Layout::RowMajor, 0).as_ref())
        .unwrap();
    let mut c = b.zeros::<i32>(20, 17, Layout::RowMajor).unwrap();
    assert!(matches!(
        plan.run(1, bh.as_ref(), 0, c.as_mut()),
        Err(Error::WidthExceeded { .. })
    ));
    plan.reserve(17).expect("reserve");
    plan.run(1, bh.as_ref(), 0, c.as_mut())
        .expect("run after reserve");
}

/// f32 in, f32 out, i8 inside: the device quantizes B as sparse-formats' `quantize` does (per
/// column) and A per row, so C is the host's exact integer product dequantized, up to f32
/// rounding of the epilogue; against the f32 product it is off by no more than the quantization
/// steps allow. Prints the largest error relative to the f32 result's magnitude.
#[test]
fn f32_via_i8_is_the_quantized_product_dequantized() {
    use sparse_formats::quantize::{quantize_csr, quantize_dense, QuantBits, ScaleAxis};
    collect(backend(), |b, failures| {
        let a = generate::vector_sparse::<f32, u32>(203, 301, 8, 0.2, 3).unwrap();
        let (aq, sa) = quantize_csr(a.as_ref(), QuantBits::I8, ScaleAxis::Row).unwrap();
        for v in [2, 8] {
            let desc = SpmmDesc::new(Precision::F32_VIA_I8)
                .format(Format::SrBcrs)
                .block(BlockShape::new(v, 32));
            let mut plan = b.plan_spmm(a.as_ref(), &desc).expect("plan");
            for (n, layouts) in [
                (5, (Layout::ColMajor, Layout::RowMajor)),
                (64, (Layout::RowMajor, Layout::RowMajor)),
                (200, (Layout::RowMajor, Layout::ColMajor)),
            ] {
                let bh = Dense::from_fn(301, n, layouts.0, |i, j| {
                    ((i * 7 + j * 13) % 29) as f32 / 9.0 - 1.5
                });
                let c0 = Dense::from_fn(203, n, layouts.1, |i, j| ((i + j) % 5) as f32 - 2.0);
                let (alpha, beta) = (1.5f32, 0.5f32);
                let got = run_spmm(b, plan.as_mut(), alpha, &bh, beta, &c0);
                let got = match got {
                    Ok(g) => g,
                    Err(e) => {
                        failures.error(&format!("f32-i8 V={v} n={n}"), e);
                        continue;
                    }
                };
                let (bq, sb) =
                    quantize_dense(bh.as_ref(), QuantBits::I8, ScaleAxis::Column).unwrap();
                let exact = reference::spmm(aq.as_ref(), 1.0, bq.as_ref(), 0.0, None).unwrap();
                let f32_product = reference::spmm(a.as_ref(), 1.0, bh.as_ref(), 0.0, None).unwrap();
                let (mut bad, mut worst) = (0, 0.0f64);
                for i in 0..203 {
                    let (cols, vals) = a.as_ref().row(i);
                    for j in 0..n {
                        let sum = exact.as_ref().at(i, j) as f32;
                        let scaled = alpha * (sa.at(i, 0) * sb.at(0, j) * sum);
                        let want = scaled + beta * c0.as_ref().at(i, j);
                        let g = got.as_ref().at(i, j);
                        if (g - want).abs() > 1e-5 * want.abs().max(1.0) {
                            if bad < 3 {
                                failures.0.push(format!(
                                    "f32-i8 V={v} n={n}: C[{i}][{j}] = {g}, want {want}"
                                ));
                            }
                            bad += 1;
                        }
                        // Each product is off by at most half a step of each factor.
                        let (mut allowed, mut magnitude) = (0.0f64, 0.0f64);
                        for (&k, &x) in cols.iter().zip(vals) {
                            let y = f64::from(bh.as_ref().at(k as usize, j));
                            allowed += f64::from(x.abs()) * f64::from(sb.at(0, j)) / 2.0
                                + (y.abs() + f64::from(sb.at(0, j))) * f64::from(sa.at(i, 0)) / 2.0;
                            magnitude += (f64::from(x) * y).abs();
                        }
                        let off = (f64::from(g - beta * c0.as_ref().at(i, j)) / f64::from(alpha)
                            - f32_product.as_ref().at(i, j))
                        .abs();
                        if off > allowed * 1.01 + 1e-4 {
                            failures.0.push(format!(
                                "f32-i8 V={v} n={n}: C[{i}][{j}] is {off} from the f32 product, \
                                 more than the quantization allows ({allowed})"
                            ));
                        }
                        if magnitude > 0.0 {
                            worst = worst.max(off / magnitude);
                        }
                    }
                }
                eprintln!("f32-i8 V={v} n={n}: largest error / sum |a b| = {worst:.2e}");
            }
        }
    });
}

/// The quantized attention block (i8 SDDMM, f32 softmax, i8 SpMM) against the f32 oracle on an
/// 8 x 1 vector-sparse mask: prints the largest and the RMS error relative to the largest |V|,
/// and fails past 5% (RMS) or 20% (largest), far above what 8-bit steps leave.
#[test]
fn quantized_attention_is_close_to_the_f32_oracle() {
    use sparse_cuda::magicube::quantized_attention;
    collect(backend(), |b, failures| {
        for (rows, cols, d, density) in [(256, 256, 64, 0.1), (203, 131, 40, 0.3)] {
            let a = generate::vector_sparse::<f32, u32>(rows, cols, 8, density, 11).unwrap();
            let q = Dense::from_fn(rows, d, Layout::RowMajor, |i, j| {
                ((i * 13 + j * 7) % 23) as f32 / 11.0 - 1.0
            });
            let k = Dense::from_fn(cols, d, Layout::RowMajor, |i, j| {
                ((i * 5 + j * 11) % 19) as f32 / 9.0 - 1.0
            });
            let v = Dense::from_fn(cols, 48, Layout::RowMajor, |i, j| {
                ((i * 3 + j * 17) % 29) as f32 / 14.0 - 1.0
            });
            let got = match quantized_attention(
                b,
                a.as_ref(),
                q.as_ref(),
                k.as_ref(),
                v.as_ref(),
                None,
            ) {
                Ok(g) => g,
                Err(e) => {
                    failures.error(&format!("attention {rows}x{cols}"), e);
                    continue;
                }
            };
            let shape = AttentionShape {
                heads: 1,
                d,
                dv: 48,
                scale: 1.0 / (d as f64).sqrt(),
                bias: false,
            };
            let want = reference::attention(a.as_ref(), q.as_ref(), k.as_ref(), v.as_ref(), &shape)
                .unwrap();
            let v_max = (0..cols)
                .flat_map(|i| (0..48).map(move |j| (i, j)))
                .map(|(i, j)| f64::from(v.as_ref().at(i, j).abs()))
                .fold(0.0, f64::max);
            let (mut worst, mut squares) = (0.0f64, 0.0f64);
            for i in 0..rows {
                for j in 0..48 {
                    let e = (f64::from(got.as_ref().at(i, j)) - want.as_ref().at(i, j)).abs();
                    worst = worst.max(e);
                    squares += e * e;
                }
            }
            let rms = (squares / (rows * 48) as f64).sqrt();
            eprintln!(
                "quantized attention {rows}x{cols} d={d}: largest error {:.2e}, RMS {:.2e} (of max |V| = {v_max})",
                worst / v_max,
                rms / v_max
            );
            if rms > 0.05 * v_max || worst > 0.2 * v_max {
                failures.0.push(format!(
                    "attention {rows}x{cols}: largest error {worst}, RMS {rms}, max |V| {v_max}"
                ));
            }
        }
    });
}

/// The device's s8 and s4 MMA rates (the evidence for what a GPU does with 4-bit MMAs): both
/// must be positive and finite; printed for the record.
#[test]
fn integer_mma_rates_are_measured() {
    let Some(b) = backend() else { return };
    let rates = sparse_cuda::magicube::mma_rates(&b).expect("the probe runs");
    eprintln!(
        "{}: s8 m16n8k32 {:.0} TOPS, s4 m16n8k64 {:.0} TOPS (s4/s8 = {:.2})",
        b.description(),
        rates.s8 / 1e12,
        rates.s4 / 1e12,
        rates.s4 / rates.s8
    );
    assert!(rates.s8.is_finite() && rates.s8 > 0.0);
    assert!(rates.s4.is_finite() && rates.s4 > 0.0);
}

/// cuBLAS's dense i8 GEMM, the baseline intbench sets beside the sparse kernels, in the layouts
/// intbench gives it: exact i32 results.
#[test]
fn cublas_i8_gemm_is_exact() {
    let Some((b, vendor)) = with_vendor() else {
        return;
    };
    let (m, k, n) = (37, 64, 20);
    let a = dense(m, k, Layout::RowMajor, 2);
    let bh = dense(k, n, Layout::ColMajor, 3);
    let c0 = Dense::from_fn(m, n, Layout::RowMajor, |i, j| (i * 3 + j) as i32 - 40);
    let ran = (|| -> sparse_core::Result<Dense<i32>> {
        let (ad, bd) = (b.upload(a.as_ref())?, b.upload(bh.as_ref())?);
        let mut cd = b.upload(c0.as_ref())?;
        vendor.gemm::<i8>(2, ad.as_ref(), bd.as_ref(), -1, cd.as_mut())?;
        b.download(&cd)
    })()
    .expect("cuBLAS i8 GEMM");
    for i in 0..m {
        for j in 0..n {
            let dot: i32 = (0..k)
                .map(|t| i32::from(a.as_ref().at(i, t)) * i32::from(bh.as_ref().at(t, j)))
                .sum();
            let want = 2 * dot - c0.as_ref().at(i, j);
            assert_eq!(ran.as_ref().at(i, j), want, "C[{i}][{j}]");
        }
    }
}

/// cuSPARSE's Blocked-ELL SpMM in i8, the block-sparse baseline intbench sets beside Magicube,
/// on a vector-sparse layer and a ragged pattern (block rows of different lengths, an empty
/// block row) in every block size intbench tries, with C in both layouts: exact i32 results. A
/// row-major B (which cuSPARSE does not take in i8) and a block that does not tile the matrix
/// are typed refusals.
#[test]
fn cusparse_blocked_ell_i8_is_exact() {
    let Some((b, vendor)) = with_vendor() else {
        return;
    };
    let layer = with_values(&generate::vector_sparse(256, 128, 8, 0.2, 5).expect("valid"));
    let ragged = with_values(
        &Csr::from_triplets(
            64,
            96,
            &(0..64)
                .filter(|i| !(16..32).contains(i))
                .flat_map(|i| (0..(i % 7) * 3).map(move |k| (i, (i * 5 + k * 11) % 96, 1.0)))
                .collect::<Vec<_>>(),
        )
        .expect("valid"),
    );
    let mut failures = Failures::default();
    for (name, a) in [("layer", &layer), ("ragged", &ragged)] {
        let (m, k) = a.shape();
        let n = 40;
        let bh = dense(k, n, Layout::ColMajor, 1);
        for (block, c_layout) in [8, 16, 32]
            .into_iter()
            .flat_map(|b| [(b, Layout::RowMajor), (b, Layout::ColMajor)])
        {
            let c0 = Dense::from_fn(m, n, c_layout, |i, j| (i * 3 + j) as i32 - 40);
            let want = reference::spmm(a.as_ref(), 3.0, bh.as_ref(), -2.0, Some(c0.as_ref()))
                .expect("oracle");
            let what = format!("Blocked-ELL {name} {block}x{block}, C {c_layout}");
            let ran = (|| -> sparse_core::Result<Dense<i32>> {
                let mut plan = vendor.blocked_ell_spmm(a.as_ref(), block)?;
                let bd = b.upload(bh.as_ref())?;
                let mut cd = b.upload(c0.as_ref())?;
                plan.run(3, bd.as_ref(), -2, cd.as_mut())?;
                b.download(&cd)
            })();
            match ran {
                Ok(c) => {
                    let wrong = (0..m)
                        .flat_map(|i| (0..n).map(move |j| (i, j)))
                        .find(|&(i, j)| f64::from(c.at(i, j)) != want.at(i, j));
                    if let Some((i, j)) = wrong {
                        failures.0.push(format!(
                            "{what}: C[{i}][{j}] = {}, the oracle says {}",
                            c.at(i, j),
                            want.at(i, j)
                        ));
                    }
                }
                Err(e) => failures.error(&what, e),
            }
        }
    }
    let row_major = (|| -> sparse_core::Result<()> {
        let mut plan = vendor.blocked_ell_spmm(layer.as_ref(), 8)?;
        let bd = b.upload(dense(128, 40, Layout::RowMajor, 1).as_ref())?;
        let mut cd = b.zeros::<i32>(256, 40, Layout::RowMajor)?;
        plan.run(1, bd.as_ref(), 0, cd.as_mut())
    })();
    if !matches!(row_major, Err(Error::Unsupported { .. })) {
        failures
            .0
            .push(format!("Blocked-ELL i8 with a row-major B: {row_major:?}"));
    }
    match vendor.blocked_ell_spmm(layer.as_ref(), 48) {
        Err(Error::Unsupported { .. }) => {}
        other => failures.0.push(format!(
            "48x48 blocks of a 256x128 matrix: {:?}",
            other.map(|p| p.block())
        )),
    }
    failures.assert_none();
}
