//! What the GPU tests against the oracle share: skipping without a GPU, host operands with
//! NaN padding, SpMV, SpMM and SDDMM cases run on a backend and on the oracle, and collecting
//! every disagreement before failing.

// Each test crate uses a part of the shared scaffolding.
#![allow(dead_code)]

use std::fmt;

use sparse_core::{
    Accumulator, BackendKind, Dense, DenseRef, Error, Executor, Layout, Memory, Precision, Scalar,
    SddmmPlan, SpmmPlan, SpmvPlan,
};
use sparse_cpu::bound::{self, Expectation};
use sparse_formats::Csr;

/// C after `plan.run(alpha, B, beta, C)` on `backend`, B and C's prior `c0` uploaded from
/// the host and C read back.
pub fn run_spmm<E: Executor, T: Scalar>(
    backend: &E,
    plan: &mut (dyn SpmmPlan<T> + '_),
    alpha: T::Acc,
    b: &Dense<T>,
    beta: T::Acc,
    c0: &Dense<T::Out>,
) -> Result<Dense<T::Out>, Error> {
    let b = backend.upload(b.as_ref())?;
    let mut c = backend.upload(c0.as_ref())?;
    plan.run(alpha, b.as_ref(), beta, c.as_mut())?;
    backend.download(&c)
}

/// The backend `made` by `new(0)`, or `None` after printing `skipped: <reason>`. A missing GPU
/// or library must be refused as `DeviceUnavailable` for `kind`; with `SPARSE_REQUIRE_GPU=1` it
/// fails the test instead.
pub fn available<B>(kind: BackendKind, made: Result<B, Error>) -> Option<B> {
    match made {
        Ok(b) => Some(b),
        Err(e) => {
            assert!(
                matches!(e, Error::DeviceUnavailable { backend, .. } if backend == kind),
                "a missing GPU or library must be DeviceUnavailable for {kind}: {e}"
            );
            if std::env::var("SPARSE_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("SPARSE_REQUIRE_GPU=1 but {e}");
            }
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// Runs `cases` on `backend`, when there is one, and fails with every disagreement they record.
pub fn collect<B>(backend: Option<B>, cases: impl FnOnce(&B, &mut Failures)) {
    let Some(b) = backend else { return };
    let mut failures = Failures::default();
    cases(&b, &mut failures);
    failures.assert_none();
}

/// The corpus matrices whose file names start with `prefix`, by name (`$SPARSE_CORPUS`, else
/// `../shared/matrices` beside the workspace); none, after saying so, without a corpus.
pub fn corpus_matrices(prefix: &str) -> Vec<(String, Csr<f64>)> {
    let dir = std::env::var_os("SPARSE_CORPUS").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/matrices"),
        std::path::PathBuf::from,
    );
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("no corpus at {}", dir.display());
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let a = sparse_formats::mtx::read_csr::<f64, u32>(&p).expect("a corpus matrix");
            (name, a)
        })
        .collect()
}

/// Values in [-1.2, 1.4) that f16 (and f32) store inexactly, so rounding shows.
pub fn value(i: usize, j: usize) -> f64 {
    ((i * 7 + j * 3) % 19) as f64 / 7.3 - 1.2
}

/// A's values doubled, the same pattern: new values for `update_values`.
pub fn doubled<T: Scalar>(a: &Csr<T>) -> Csr<T> {
    let values = a
        .values()
        .iter()
        .map(|v| T::from_f64(2.0 * v.to_f64()))
        .collect();
    Csr::try_new(
        a.rows(),
        a.cols(),
        a.row_ptr().to_vec(),
        a.col_idx().to_vec(),
        values,
    )
    .expect("same pattern")
}

/// `v` in the accumulator type of `T`.
pub fn acc<T: Scalar>(v: f64) -> T::Acc {
    <T::Acc as Accumulator>::from_f64(v)
}

/// Every pair of layouts, for two operands.
pub fn layouts() -> impl Iterator<Item = (Layout, Layout)> {
    let both = [Layout::RowMajor, Layout::ColMajor];
    both.into_iter()
        .flat_map(move |a| both.into_iter().map(move |b| (a, b)))
}

/// A host dense operand with `pad` extra elements per leading dimension, holding NaN.
pub struct Host<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl<T: Scalar> Host<T> {
    pub fn new(
        (rows, cols): (usize, usize),
        layout: Layout,
        pad: usize,
        f: impl Fn(usize, usize) -> f64,
    ) -> Self {
        let (outer, inner) = match layout {
            Layout::RowMajor => (rows, cols),
            Layout::ColMajor => (cols, rows),
        };
        let ld = inner.max(1) + pad;
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

    /// Elements past the contiguous extent in every leading dimension.
    fn pad(&self) -> usize {
        let inner = match self.layout {
            Layout::RowMajor => self.cols,
            Layout::ColMajor => self.rows,
        };
        self.ld - inner.max(1)
    }

    fn offset(&self, i: usize, j: usize) -> usize {
        match self.layout {
            Layout::RowMajor => i * self.ld + j,
            Layout::ColMajor => i + j * self.ld,
        }
    }

    pub fn view(&self) -> DenseRef<'_, T> {
        DenseRef::try_new(
            Memory::Host(&self.data),
            self.rows,
            self.cols,
            self.ld,
            self.layout,
        )
        .expect("consistent geometry")
    }

    /// The entries of `got` (downloaded from what was uploaded from `self`) in row-major order,
    /// and whether every padding element is still NaN.
    fn read(&self, got: &Dense<T>) -> (Vec<f64>, bool) {
        let data = got.as_ref().host("read").expect("downloaded").to_vec();
        let mut inside = vec![false; data.len()];
        let mut entries = Vec::with_capacity(self.rows * self.cols);
        for i in 0..self.rows {
            for j in 0..self.cols {
                let at = self.offset(i, j);
                inside[at] = true;
                entries.push(data[at].to_f64());
            }
        }
        let padding_kept = data
            .iter()
            .zip(&inside)
            .all(|(v, &entry)| entry || v.to_f64().is_nan());
        (entries, padding_kept)
    }
}

/// The operands of one run of an operation on the host: what a plan of it computes from them,
/// and what the oracle expects.
pub trait Case<T: Scalar>: fmt::Display {
    /// The plan that runs the case, borrowing its matrix for `'a`.
    type Plan<'a>: ?Sized;

    /// Runs `plan` on copies of the operands uploaded to `backend`; the output downloaded.
    fn run(&self, backend: &impl Executor, plan: &mut Self::Plan<'_>) -> Result<Dense<T>, Error>;

    /// What the oracle expects of the output for `a` at `precision`.
    fn expected(&self, a: &Csr<T>, precision: Precision) -> Expectation;

    /// The output operand before the run.
    fn output(&self) -> &Host<T>;

    /// Records, as `what` and the case, where the output of a run (`ran`) disagrees with the
    /// oracle for `a`.
    fn check_ran(
        &self,
        what: &str,
        ran: Result<Dense<T>, Error>,
        a: &Csr<T>,
        precision: Precision,
        failures: &mut Failures,
    ) {
        let expected = self.expected(a, precision);
        failures.check_run(&format!("{what} {self}"), &expected, self.output(), ran);
    }

    /// Runs `plan` and records where its output disagrees with the oracle for `a`.
    fn check(
        &self,
        what: &str,
        backend: &impl Executor,
        plan: &mut Self::Plan<'_>,
        a: &Csr<T>,
        precision: Precision,
        failures: &mut Failures,
    ) {
        self.check_ran(what, self.run(backend, plan), a, precision, failures);
    }
}

/// The operands of one `y = alpha*A*x + beta*y`, on the host.
pub struct SpmvCase<T> {
    pub alpha: f64,
    pub x: Host<T>,
    pub beta: f64,
    pub y: Host<T>,
}

impl<T: Scalar<Out = T>> Case<T> for SpmvCase<T> {
    type Plan<'a> = dyn SpmvPlan<T> + 'a;

    /// Runs `plan` on copies of x and y uploaded to `backend`; y downloaded.
    fn run(
        &self,
        backend: &impl Executor,
        plan: &mut (dyn SpmvPlan<T> + '_),
    ) -> Result<Dense<T>, Error> {
        let xd = backend.upload(self.x.view())?;
        let mut yd = backend.upload(self.y.view())?;
        plan.run(
            acc::<T>(self.alpha),
            xd.as_ref(),
            acc::<T>(self.beta),
            yd.as_mut(),
        )?;
        backend.download(&yd)
    }

    /// What the oracle expects of y for `a` at `precision`.
    fn expected(&self, a: &Csr<T>, precision: Precision) -> Expectation {
        bound::spmv(
            a.as_ref(),
            precision,
            self.alpha,
            self.x.view(),
            self.beta,
            Some(self.y.view()),
        )
        .expect("oracle")
    }

    fn output(&self) -> &Host<T> {
        &self.y
    }
}

impl<T: Scalar> fmt::Display for SpmvCase<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (x, y) = (&self.x, &self.y);
        write!(
            f,
            "x {} pad {} y {} pad {} alpha {} beta {}",
            x.layout,
            x.pad(),
            y.layout,
            y.pad(),
            self.alpha,
            self.beta
        )
    }
}

/// The operands of one `C = alpha*A*B + beta*C`, on the host.
pub struct SpmmCase<T> {
    pub alpha: f64,
    pub b: Host<T>,
    pub beta: f64,
    pub c: Host<T>,
}

impl<T: Scalar<Out = T>> SpmmCase<T> {
    /// The case every SpMM sweep runs for an `a_rows x a_cols` A: B (`a_cols x n`) and C
    /// (`a_rows x n`) in these layouts with `pad` extra elements per leading dimension, filled
    /// from [`value`]; C all NaN when `nan` (`beta == 0` must not read it).
    pub fn from_values(
        (a_rows, a_cols): (usize, usize),
        n: usize,
        (b_layout, c_layout): (Layout, Layout),
        pad: usize,
        (alpha, beta, nan): (f64, f64, bool),
    ) -> Self {
        SpmmCase {
            alpha,
            b: Host::new((a_cols, n), b_layout, pad, value),
            beta,
            c: Host::new((a_rows, n), c_layout, pad, |i, j| {
                if nan {
                    f64::NAN
                } else {
                    value(j, i)
                }
            }),
        }
    }
}

impl<T: Scalar<Out = T>> Case<T> for SpmmCase<T> {
    type Plan<'a> = dyn SpmmPlan<T> + 'a;

    /// Runs `plan` on copies of B and C uploaded to `backend`; C downloaded.
    fn run(
        &self,
        backend: &impl Executor,
        plan: &mut (dyn SpmmPlan<T> + '_),
    ) -> Result<Dense<T>, Error> {
        let bd = backend.upload(self.b.view())?;
        let mut cd = backend.upload(self.c.view())?;
        plan.run(
            acc::<T>(self.alpha),
            bd.as_ref(),
            acc::<T>(self.beta),
            cd.as_mut(),
        )?;
        backend.download(&cd)
    }

    /// What the oracle expects of C for `a` at `precision`.
    fn expected(&self, a: &Csr<T>, precision: Precision) -> Expectation {
        bound::spmm(
            a.as_ref(),
            precision,
            self.alpha,
            self.b.view(),
            self.beta,
            Some(self.c.view()),
        )
        .expect("oracle")
    }

    fn output(&self) -> &Host<T> {
        &self.c
    }
}

impl<T: Scalar> fmt::Display for SpmmCase<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (b, c) = (&self.b, &self.c);
        write!(
            f,
            "n {} B {} pad {} C {} pad {} alpha {} beta {}",
            b.cols,
            b.layout,
            b.pad(),
            c.layout,
            c.pad(),
            self.alpha,
            self.beta
        )
    }
}

/// The operands of one `C = alpha*(X*Y^T) ∘ spy(S) + beta*C`, on the host; C holds S's
/// entries in CSR order.
pub struct SddmmCase<T> {
    pub alpha: f64,
    pub x: Host<T>,
    pub y: Host<T>,
    pub beta: f64,
    pub c: Host<T>,
    /// Whether the plan scales each product by its entry's value.
    pub scale_by_values: bool,
}

impl<T: Scalar<Out = T>> SddmmCase<T> {
    /// The case every SDDMM sweep runs for `s`: X (`rows x k`), Y (`cols x k`) and C (`nnz x 1`)
    /// in these layouts with `pad` extra elements per leading dimension, filled from [`value`];
    /// C all NaN when `nan` (`beta == 0` must not read it).
    pub fn from_values(
        s: &Csr<T>,
        k: usize,
        (x_layout, y_layout, c_layout): (Layout, Layout, Layout),
        pad: usize,
        (alpha, beta, nan): (f64, f64, bool),
        scale_by_values: bool,
    ) -> Self {
        SddmmCase {
            alpha,
            x: Host::new((s.rows(), k), x_layout, pad, value),
            y: Host::new((s.cols(), k), y_layout, pad, |i, j| value(j, i)),
            beta,
            c: Host::new((s.nnz(), 1), c_layout, pad, |e, _| {
                if nan {
                    f64::NAN
                } else {
                    value(e, 1)
                }
            }),
            scale_by_values,
        }
    }
}

impl<T: Scalar<Out = T>> Case<T> for SddmmCase<T> {
    type Plan<'a> = dyn SddmmPlan<T> + 'a;

    /// Runs `plan` on copies of X, Y and C uploaded to `backend`; C downloaded.
    fn run(
        &self,
        backend: &impl Executor,
        plan: &mut (dyn SddmmPlan<T> + '_),
    ) -> Result<Dense<T>, Error> {
        let xd = backend.upload(self.x.view())?;
        let yd = backend.upload(self.y.view())?;
        let mut cd = backend.upload(self.c.view())?;
        plan.run(
            acc::<T>(self.alpha),
            xd.as_ref(),
            yd.as_ref(),
            acc::<T>(self.beta),
            cd.as_mut(),
        )?;
        backend.download(&cd)
    }

    /// What the oracle expects of C for `s` at `precision`.
    fn expected(&self, s: &Csr<T>, precision: Precision) -> Expectation {
        bound::sddmm(
            s.as_ref(),
            precision,
            self.alpha,
            self.x.view(),
            self.y.view(),
            self.beta,
            Some(self.c.view()),
            self.scale_by_values,
        )
        .expect("oracle")
    }

    fn output(&self) -> &Host<T> {
        &self.c
    }
}

impl<T: Scalar> fmt::Display for SddmmCase<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (x, y, c) = (&self.x, &self.y, &self.c);
        write!(
            f,
            "k {} X {} pad {} Y {} pad {} C {} pad {} scale {} alpha {} beta {}",
            x.cols,
            x.layout,
            x.pad(),
            y.layout,
            y.pad(),
            c.layout,
            c.pad(),
            self.scale_by_values,
            self.alpha,
            self.beta
        )
    }
}

/// Collects disagreements instead of stopping at the first.
#[derive(Default)]
pub struct Failures(pub Vec<String>);

impl Failures {
    /// Checks the output a run left (`ran`: downloaded after being uploaded from `prior`)
    /// against the oracle, padding included, or records why the run failed.
    pub fn check_run<T: Scalar>(
        &mut self,
        what: &str,
        expected: &Expectation,
        prior: &Host<T>,
        ran: Result<Dense<T>, Error>,
    ) {
        let got = match ran {
            Ok(got) => got,
            Err(e) => return self.error(what, e),
        };
        let (got, padding_kept) = prior.read(&got);
        match expected.check(&got) {
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

    pub fn error(&mut self, what: &str, e: Error) {
        self.0.push(format!("{what}: {e}"));
    }

    pub fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} failures:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}
