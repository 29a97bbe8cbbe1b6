//! The cusparse backend against the oracle (`sparse_cpu::bound`, built on the reference) on a
//! small matrix with an empty row and a long row: SpMV, SpMM and SDDMM for every algorithm of
//! the backend's table in f64, f32 and f16, dense operands in both layouts, padded and strided;
//! `beta == 0` over NaN, `alpha == 0`; plus cuBLAS GEMM.
//!
//! Needs a GPU with cuSPARSE; without one each test prints `skipped: <reason>` and passes,
//! unless `SPARSE_REQUIRE_GPU=1`. Every failure is collected, so one run lists everything that
//! disagrees (or that cuSPARSE refused).

use sparse_core::{
    Accumulator, Algorithm, BackendKind, Dense, DenseRef, Error, Executor, Format, Layout, Memory,
    OpKind, Precision, Scalar, SddmmDesc, SpmmDesc, SpmvDesc, Support,
};
use sparse_cpu::bound::{self, Expectation};
use sparse_cuda::CusparseBackend;
use sparse_formats::{csr_from_dense, Csr};

fn backend() -> Option<CusparseBackend> {
    match CusparseBackend::new(0) {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(
                matches!(
                    e,
                    Error::DeviceUnavailable {
                        backend: BackendKind::Cusparse,
                        ..
                    }
                ),
                "a missing GPU or library must be DeviceUnavailable for cusparse: {e}"
            );
            if std::env::var("SPARSE_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("SPARSE_REQUIRE_GPU=1 but {e}");
            }
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// Values in [-1.2, 1.4) that f16 (and f32) store inexactly, so rounding shows.
fn value(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 3) % 19) as f64 / 7.3 - 1.2
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

/// A host dense operand; padding (3 extra elements per leading dimension) holds NaN.
struct Host<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl<T: Scalar> Host<T> {
    fn new(
        (rows, cols): (usize, usize),
        layout: Layout,
        padded: bool,
        f: impl Fn(usize, usize) -> f64,
    ) -> Self {
        let (outer, inner) = match layout {
            Layout::RowMajor => (rows, cols),
            Layout::ColMajor => (cols, rows),
        };
        let ld = inner.max(1) + if padded { 3 } else { 0 };
        let mut h = Host {
            data: vec![T::from_f64(f64::NAN); outer * ld],
            rows,
            cols,
            ld,
            layout,
        };
        for i in 0..rows {
            for j in 0..cols {
                let at = h.offset(i, j);
                h.data[at] = T::from_f64(f(i, j));
            }
        }
        h
    }

    fn offset(&self, i: usize, j: usize) -> usize {
        match self.layout {
            Layout::RowMajor => i * self.ld + j,
            Layout::ColMajor => i + j * self.ld,
        }
    }

    fn view(&self) -> DenseRef<'_, T> {
        DenseRef::try_new(
            Memory::Host(&self.data),
            self.rows,
            self.cols,
            self.ld,
            self.layout,
        )
        .expect("consistent geometry")
    }

    /// The entries in row-major order, and whether every padding element is still NaN.
    fn read(&self, got: &Dense<T>) -> (Vec<f64>, bool) {
        let data = got.as_ref().host("read").expect("downloaded").to_vec();
        let entries = (0..self.rows)
            .flat_map(|i| (0..self.cols).map(move |j| (i, j)))
            .map(|(i, j)| data[self.offset(i, j)].to_f64())
            .collect();
        let mut inside = vec![false; data.len()];
        for i in 0..self.rows {
            for j in 0..self.cols {
                inside[self.offset(i, j)] = true;
            }
        }
        let padding_kept = data
            .iter()
            .zip(&inside)
            .all(|(v, &entry)| entry || v.to_f64().is_nan());
        (entries, padding_kept)
    }
}

/// (alpha, beta, whether the prior output is NaN): `beta == 0` must not read the output.
const SCALARS: &[(f64, f64, bool)] = &[
    (1.5, 0.0, true),
    (0.5, -2.0, false),
    (0.0, 0.5, false),
    (0.0, 0.0, true),
];

/// Collects disagreements instead of stopping at the first.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, what: &str, expected: &Expectation, got: &[f64], padding_kept: bool) {
        match expected.check(got) {
            Ok(v) if v.passed() && padding_kept => {}
            Ok(v) => self.0.push(format!(
                "{what}: {} of {} entries off (first {:?}, max ratio {:.3}){}",
                v.failures,
                v.entries,
                v.first_failure,
                v.max_ratio,
                if padding_kept {
                    ""
                } else {
                    ", padding written"
                }
            )),
            Err(e) => self.0.push(format!("{what}: {e}")),
        }
    }

    fn error(&mut self, what: &str, e: Error) {
        self.0.push(format!("{what}: {e}"));
    }

    fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} failures:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

fn acc<T: Scalar>(v: f64) -> T::Acc {
    <T::Acc as Accumulator>::from_f64(v)
}

fn layouts() -> impl Iterator<Item = (Layout, Layout)> {
    let both = [Layout::RowMajor, Layout::ColMajor];
    both.into_iter()
        .flat_map(move |a| both.into_iter().map(move |b| (a, b)))
}

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
            for ((x_layout, y_layout), padded) in layouts().zip([true, false, true, false]) {
                for &(alpha, beta, nan) in SCALARS {
                    let what = format!(
                        "spmv {format} {} {precision} x {x_layout} y {y_layout} padded {padded} \
                         alpha {alpha} beta {beta}",
                        info.algorithm
                    );
                    let x = Host::<T>::new((a.cols(), 1), x_layout, padded, |i, _| value(i, 5));
                    let y0 = Host::<T>::new((a.rows(), 1), y_layout, padded, |i, _| {
                        if nan {
                            f64::NAN
                        } else {
                            value(i, 2)
                        }
                    });
                    let result = (|| {
                        let xd = b.upload(x.view())?;
                        let mut yd = b.upload(y0.view())?;
                        plan.run(acc::<T>(alpha), xd.as_ref(), acc::<T>(beta), yd.as_mut())?;
                        b.download(&yd)
                    })();
                    let expected = bound::spmv(
                        a.as_ref(),
                        precision,
                        alpha,
                        x.view(),
                        beta,
                        Some(y0.view()),
                    )
                    .expect("oracle");
                    match result {
                        Ok(got) => {
                            let (got, kept) = y0.read(&got);
                            failures.check(&what, &expected, &got, kept);
                        }
                        Err(e) => failures.error(&what, e),
                    }
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
        let info = plan.info().clone();
        for n in [33, 8, 1] {
            for ((b_layout, c_layout), padded) in layouts().flat_map(|l| [(l, false), (l, true)]) {
                for &(alpha, beta, nan) in SCALARS {
                    let what = format!(
                        "spmm csr {} {precision} n {n} B {b_layout} C {c_layout} padded {padded} \
                         alpha {alpha} beta {beta}",
                        info.algorithm
                    );
                    let bh = Host::<T>::new((a.cols(), n), b_layout, padded, value);
                    let c0 = Host::<T>::new((a.rows(), n), c_layout, padded, |i, j| {
                        if nan {
                            f64::NAN
                        } else {
                            value(j, i)
                        }
                    });
                    let result = (|| {
                        let bd = b.upload(bh.view())?;
                        let mut cd = b.upload(c0.view())?;
                        plan.run(acc::<T>(alpha), bd.as_ref(), acc::<T>(beta), cd.as_mut())?;
                        b.download(&cd)
                    })();
                    let expected = bound::spmm(
                        a.as_ref(),
                        precision,
                        alpha,
                        bh.view(),
                        beta,
                        Some(c0.view()),
                    )
                    .expect("oracle");
                    match result {
                        Ok(got) => {
                            let (got, kept) = c0.read(&got);
                            failures.check(&what, &expected, &got, kept);
                        }
                        // The table's guard against an algorithm that faults on odd leading
                        // dimensions: a typed refusal, never a poisoned context.
                        Err(Error::Unsupported { supported, .. })
                            if supported.contains("even leading dimensions") => {}
                        Err(e) => failures.error(&what, e),
                    }
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
        for k in [8, 1] {
            for ((x_layout, y_layout), padded) in layouts().zip([true, false, true, false]) {
                let c_layout = if padded {
                    Layout::RowMajor
                } else {
                    Layout::ColMajor
                };
                for &(alpha, beta, nan) in SCALARS {
                    let what = format!(
                        "sddmm csr {precision} k {k} X {x_layout} Y {y_layout} C {c_layout} \
                         padded {padded} alpha {alpha} beta {beta}"
                    );
                    let xh = Host::<T>::new((s.rows(), k), x_layout, padded, value);
                    let yh = Host::<T>::new((s.cols(), k), y_layout, padded, |i, j| value(j, i));
                    let c0 = Host::<T>::new((s.nnz(), 1), c_layout, padded, |e, _| {
                        if nan {
                            f64::NAN
                        } else {
                            value(e, 1)
                        }
                    });
                    let result = (|| {
                        let xd = b.upload(xh.view())?;
                        let yd = b.upload(yh.view())?;
                        let mut cd = b.upload(c0.view())?;
                        plan.run(
                            acc::<T>(alpha),
                            xd.as_ref(),
                            yd.as_ref(),
                            acc::<T>(beta),
                            cd.as_mut(),
                        )?;
                        b.download(&cd)
                    })();
                    let expected = bound::sddmm(
                        s.as_ref(),
                        precision,
                        alpha,
                        xh.view(),
                        yh.view(),
                        beta,
                        Some(c0.view()),
                        false,
                    )
                    .expect("oracle");
                    match result {
                        Ok(got) => {
                            let (got, kept) = c0.read(&got);
                            failures.check(&what, &expected, &got, kept);
                        }
                        Err(e) => failures.error(&what, e),
                    }
                }
            }
        }
    }
}

fn gemm<T: Scalar<Out = T>>(b: &CusparseBackend, precision: Precision, failures: &mut Failures) {
    let (m, k, n) = (19, 23, 7);
    for (a_layout, b_layout) in layouts() {
        for (c_layout, padded) in [(Layout::RowMajor, true), (Layout::ColMajor, false)] {
            for &(alpha, beta, nan) in SCALARS {
                let what = format!(
                    "gemm {precision} A {a_layout} B {b_layout} C {c_layout} padded {padded} \
                     alpha {alpha} beta {beta}"
                );
                let ah = Host::<T>::new((m, k), a_layout, padded, |i, j| value(i, j) + 0.125);
                let bh = Host::<T>::new((k, n), b_layout, padded, value);
                let c0 = Host::<T>::new((m, n), c_layout, padded, |i, j| {
                    if nan {
                        f64::NAN
                    } else {
                        value(j, i)
                    }
                });
                let result = (|| {
                    let ad = b.upload(ah.view())?;
                    let bd = b.upload(bh.view())?;
                    let mut cd = b.upload(c0.view())?;
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
                let expected = bound::spmm(
                    dense_a.as_ref(),
                    precision,
                    alpha,
                    bh.view(),
                    beta,
                    Some(c0.view()),
                )
                .expect("oracle");
                match result {
                    Ok(got) => {
                        let (got, kept) = c0.read(&got);
                        failures.check(&what, &expected, &got, kept);
                    }
                    Err(e) => failures.error(&what, e),
                }
            }
        }
    }
}

#[test]
fn spmv_spmm_sddmm_match_the_oracle() {
    let Some(b) = backend() else { return };
    eprintln!("{}", b.description());
    let mut failures = Failures::default();
    spmv::<f64>(&b, Precision::F64, &mut failures);
    spmv::<f32>(&b, Precision::F32, &mut failures);
    spmv::<half::f16>(&b, Precision::F16, &mut failures);
    spmm::<f64>(&b, Precision::F64, &mut failures);
    spmm::<f32>(&b, Precision::F32, &mut failures);
    spmm::<half::f16>(&b, Precision::F16, &mut failures);
    sddmm::<f64>(&b, Precision::F64, &mut failures);
    sddmm::<f32>(&b, Precision::F32, &mut failures);
    sddmm::<half::f16>(&b, Precision::F16, &mut failures);
    failures.assert_none();
}

#[test]
fn cublas_gemm_matches_the_oracle() {
    let Some(b) = backend() else { return };
    let mut failures = Failures::default();
    gemm::<f64>(&b, Precision::F64, &mut failures);
    gemm::<f32>(&b, Precision::F32, &mut failures);
    gemm::<half::f16>(&b, Precision::F16, &mut failures);
    failures.assert_none();
}

#[test]
fn deterministic_algorithms_repeat_bit_for_bit() {
    let Some(b) = backend() else { return };
    let a = matrix::<f32>();
    let x = Host::<f32>::new((a.cols(), 1), Layout::ColMajor, false, |i, _| {
        value(i, 1) / 3.0
    });
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
    let Some(b) = backend() else { return };
    let mut failures = Failures::default();
    let (alpha, beta) = (2.0, 0.5);
    // A without entries (and without rows): y = beta*y, A never read.
    for a in [Csr::<f32>::zeros(5, 4), Csr::<f32>::zeros(0, 4)] {
        let x = Host::<f32>::new((4, 1), Layout::ColMajor, false, |i, _| value(i, 0));
        let y0 = Host::<f32>::new((a.rows(), 1), Layout::RowMajor, true, |i, _| value(i, 1));
        let result = (|| {
            let mut plan = b.plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F32))?;
            let xd = b.upload(x.view())?;
            let mut yd = b.upload(y0.view())?;
            plan.run(alpha as f32, xd.as_ref(), beta as f32, yd.as_mut())?;
            b.download(&yd)
        })();
        let expected = bound::spmv(
            a.as_ref(),
            Precision::F32,
            alpha,
            x.view(),
            beta,
            Some(y0.view()),
        )
        .expect("oracle");
        match result {
            Ok(got) => {
                let (got, kept) = y0.read(&got);
                failures.check(
                    &format!("spmv {}x4 without entries", a.rows()),
                    &expected,
                    &got,
                    kept,
                );
            }
            Err(e) => failures.error("spmv without entries", e),
        }
    }
    // SDDMM with k = 0: every dot product is empty, C = beta*C.
    let s = matrix::<f32>();
    let x = Host::<f32>::new((s.rows(), 0), Layout::RowMajor, false, value);
    let y = Host::<f32>::new((s.cols(), 0), Layout::ColMajor, false, value);
    let c0 = Host::<f32>::new((s.nnz(), 1), Layout::RowMajor, true, |e, _| value(e, 2));
    let result = (|| {
        let mut plan = b.plan_sddmm(s.as_ref(), &SddmmDesc::new(Precision::F32))?;
        let (xd, yd) = (b.upload(x.view())?, b.upload(y.view())?);
        let mut cd = b.upload(c0.view())?;
        plan.run(
            alpha as f32,
            xd.as_ref(),
            yd.as_ref(),
            beta as f32,
            cd.as_mut(),
        )?;
        b.download(&cd)
    })();
    let expected = bound::sddmm(
        s.as_ref(),
        Precision::F32,
        alpha,
        x.view(),
        y.view(),
        beta,
        Some(c0.view()),
        false,
    )
    .expect("oracle");
    match result {
        Ok(got) => {
            let (got, kept) = c0.read(&got);
            failures.check("sddmm k = 0", &expected, &got, kept);
        }
        Err(e) => failures.error("sddmm k = 0", e),
    }
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
    failures.assert_none();
}
