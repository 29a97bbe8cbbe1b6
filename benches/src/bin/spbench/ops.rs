//! One case (a matrix, an operation, a dense width and a precision) with its host operands, and
//! the runners that compute it on one kernel: planned and uploaded once, then run many times
//! and read back for the check.

use std::time::{Duration, Instant};

use benches::{sprs_view, BenchValue};
use conformance::bound::round_to_tf32;
use faer::linalg::matmul::matmul;
use faer::traits::ComplexField;
use faer::{Accum, Mat, MatRef, Par};
use sparse_blas::cost::{self, Cost, SparseShape};
use sparse_blas::generate::SplitMix64;
use sparse_blas::{
    bf16, f16, Accumulator, Algorithm, AttentionBackward, AttentionDesc, AttentionPlan, Backend,
    Compute, Csr, DType, Dense, Error, Executor, Format, Layout, OpKind, PlanInfo, Precision,
    Result, Scalar, SddmmDesc, SddmmPlan, SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan, ValueOrder,
};

use crate::kernels::Kernel;

/// The operations spbench measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Spmv,
    Spmm,
    Sddmm,
    Attention,
}

impl Op {
    pub fn from_kind(kind: OpKind) -> Result<Self> {
        match kind {
            OpKind::Spmv => Ok(Op::Spmv),
            OpKind::Spmm => Ok(Op::Spmm),
            OpKind::Sddmm => Ok(Op::Sddmm),
            OpKind::Attention => Ok(Op::Attention),
            other => Err(Error::invalid(format!("spbench has no cases for {other}"))),
        }
    }

    pub fn kind(self) -> OpKind {
        match self {
            Op::Spmv => OpKind::Spmv,
            Op::Spmm => OpKind::Spmm,
            Op::Sddmm => OpKind::Sddmm,
            Op::Attention => OpKind::Attention,
        }
    }

    pub fn name(self) -> &'static str {
        self.kind().name()
    }

    /// What the width of a case is: N of SpMM, K of SDDMM, the head width of attention.
    pub fn width_name(self) -> &'static str {
        match self {
            Op::Spmv => "-",
            Op::Spmm => "N",
            Op::Sddmm => "K",
            Op::Attention => "d",
        }
    }

    /// Whether the op takes alpha and beta (attention has neither).
    fn scaled(self) -> bool {
        self != Op::Attention
    }
}

/// One operation on one matrix in one precision, with its host operands.
pub struct Case<'a, T: Scalar> {
    pub a: &'a Csr<T>,
    pub op: Op,
    /// 1 for SpMV; N, K or d (of one head) otherwise.
    pub width: usize,
    /// Attention's heads (1 for the other operations): Q, K, V and O are `width * heads` wide.
    pub heads: usize,
    pub precision: Precision,
    pub alpha: f64,
    pub beta: f64,
    /// x (SpMV); B (SpMM); X and Y (SDDMM); Q, K and V (attention).
    pub inputs: Vec<Dense<T>>,
    /// The output's values before the first run, when beta reads them (SDDMM: in CSR entry
    /// order).
    pub prior: Option<Dense<T::Out>>,
    /// Layout of C (SpMM) and O (attention).
    pub out_layout: Layout,
    /// Attention runs its backward pass after each forward.
    pub backward: bool,
    /// `auto` plans of SpMV, SpMM and SDDMM time their candidates (`tuned()`).
    pub tune: bool,
}

/// Values in [-1, 1), or small integers for integer types (so integer results stay exact):
/// never all zero, since zeros can flatter a kernel. Rounded to tf32 for a tf32 precision, as
/// the kernels round them, so the oracle sees what they multiply.
fn operand<S: Scalar>(
    rows: usize,
    cols: usize,
    layout: Layout,
    precision: Precision,
    seed: u64,
) -> Dense<S> {
    let mut rng = SplitMix64::new(seed);
    let integer = matches!(S::DTYPE, DType::I8 | DType::I32);
    let tf32 = precision.compute == Compute::Tf32;
    Dense::from_fn(rows, cols, layout, |_, _| {
        let u = rng.next_f64();
        S::from_f64(if integer {
            (u * 7.0).floor() - 3.0
        } else if tf32 {
            f64::from(round_to_tf32((2.0 * u - 1.0) as f32))
        } else {
            2.0 * u - 1.0
        })
    })
}

impl<'a, T: Scalar> Case<'a, T> {
    /// The case with operands drawn from `seed`; SpMM and SDDMM operands in `layout`, attention
    /// operands row-major, `heads` of them side by side.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        a: &'a Csr<T>,
        op: Op,
        width: usize,
        heads: usize,
        precision: Precision,
        layout: Layout,
        beta: f64,
        seed: u64,
    ) -> Self {
        let (m, n) = (a.rows(), a.cols());
        let dense =
            |rows, cols, layout, k: u64| operand::<T>(rows, cols, layout, precision, seed + k);
        let (inputs, out_shape, out_layout) = match op {
            Op::Spmv => (
                vec![dense(n, 1, Layout::ColMajor, 1)],
                (m, 1),
                Layout::ColMajor,
            ),
            Op::Spmm => (vec![dense(n, width, layout, 1)], (m, width), layout),
            Op::Sddmm => (
                vec![dense(m, width, layout, 1), dense(n, width, layout, 2)],
                (a.nnz(), 1),
                Layout::ColMajor,
            ),
            Op::Attention => (
                vec![
                    dense(m, width * heads, Layout::RowMajor, 1),
                    dense(n, width * heads, Layout::RowMajor, 2),
                    dense(n, width * heads, Layout::RowMajor, 3),
                ],
                (m, width * heads),
                Layout::RowMajor,
            ),
        };
        // The beta the kernels see (an integer for integer arithmetic), so the oracle uses it.
        let beta = if op.scaled() {
            Self::acc(beta).to_f64()
        } else {
            0.0
        };
        let prior = (beta != 0.0)
            .then(|| operand::<T::Out>(out_shape.0, out_shape.1, out_layout, precision, seed + 4));
        Case {
            a,
            op,
            width: if op == Op::Spmv { 1 } else { width },
            heads: if op == Op::Attention { heads } else { 1 },
            precision,
            alpha: 1.0,
            beta,
            inputs,
            prior,
            out_layout,
            backward: false,
            tune: false,
        }
    }

    /// The flops and minimal bytes of one run.
    pub fn cost(&self) -> Cost {
        let shape = SparseShape {
            rows: self.a.rows(),
            cols: self.a.cols(),
            nnz: self.a.nnz(),
            value: T::DTYPE,
            index_bytes: 4,
        };
        let out = <T::Out as Scalar>::DTYPE;
        let reads = self.beta != 0.0;
        match self.op {
            Op::Spmv => cost::spmv(shape, out, reads),
            Op::Spmm => cost::spmm(shape, self.width, out, reads),
            Op::Sddmm => cost::sddmm(shape, self.width, out, false, reads),
            Op::Attention => {
                cost::attention(shape, self.width * self.heads, self.width * self.heads, out)
            }
        }
    }

    fn acc(v: f64) -> T::Acc {
        <T::Acc as Accumulator>::from_f64(v)
    }
}

/// A kernel ready to compute a case: its plan (or prepared baseline) and the operands in the
/// memory it reads.
pub trait Runner {
    /// Computes the case once (with beta != 0, on top of the previous result).
    fn run(&mut self) -> Result<()>;
    /// The output now, as f64 in the oracle's order (row-major; SDDMM in CSR entry order).
    fn output(&mut self) -> Result<Vec<f64>>;
    /// What was planned; `None` for the baselines.
    fn info(&self) -> Option<&PlanInfo>;
}

/// A runner with the time its preparation took.
pub struct Prepared<'a> {
    pub runner: Box<dyn Runner + 'a>,
    /// Planning: analysis, conversion to the format and upload of the matrix.
    pub plan: Duration,
    /// Uploading the dense operands (and the initial output).
    pub upload: Duration,
}

/// `f` timed with the backend idle before and after.
fn timed<R>(backend: &Backend, f: impl FnOnce() -> Result<R>) -> Result<(R, Duration)> {
    backend.synchronize()?;
    let start = Instant::now();
    let r = f()?;
    backend.synchronize()?;
    Ok((r, start.elapsed()))
}

/// Host values in row-major order, as f64.
fn row_major_f64<S: Scalar>(host: &Dense<S>) -> Vec<f64> {
    let mut out = Vec::with_capacity(host.rows() * host.cols());
    for i in 0..host.rows() {
        for j in 0..host.cols() {
            out.push(host.at(i, j).to_f64());
        }
    }
    out
}

/// The output a plan starts from: the prior values (rearranged into `order`), else zeros.
fn initial_output<O: Scalar>(
    backend: &Backend,
    prior: Option<&Dense<O>>,
    shape: (usize, usize),
    layout: Layout,
    order: Option<&ValueOrder>,
) -> Result<Dense<O>> {
    match (prior, order) {
        (Some(p), None) => backend.upload(p.as_ref()),
        (Some(p), Some(order)) => {
            let staged = Dense::from_fn(order.len(), 1, Layout::ColMajor, |s, _| {
                order.entry(s).map_or(O::from_f64(0.0), |e| p.at(e, 0))
            });
            backend.upload(staged.as_ref())
        }
        (None, None) => backend.zeros(shape.0, shape.1, layout),
        (None, Some(order)) => backend.zeros(order.len(), 1, Layout::ColMajor),
    }
}

/// The runner of a backend's plan of `format` and `algorithm`.
pub fn prepare_plan<'a, T: Scalar>(
    backend: &'a Backend,
    format: Format,
    algorithm: Algorithm,
    case: &'a Case<'a, T>,
) -> Result<Prepared<'a>> {
    let a = case.a.as_ref();
    let p = case.precision;
    let (alpha, beta) = (Case::<T>::acc(case.alpha), Case::<T>::acc(case.beta));
    let prior = case.prior.as_ref();
    let out_shape = (case.a.rows(), case.width * case.heads);
    let upload = |d: &Dense<T>| backend.upload(d.as_ref());
    let (runner, plan, upload): (Box<dyn Runner + 'a>, _, _) = match case.op {
        Op::Spmv => {
            let mut desc = SpmvDesc::new(p).format(format).algorithm(algorithm);
            desc.tune = case.tune;
            let (plan, plan_time) = timed(backend, || backend.plan_spmv(a, &desc))?;
            let ((x, y), upload_time) = timed(backend, || {
                let y = initial_output(backend, prior, out_shape, case.out_layout, None)?;
                Ok((upload(&case.inputs[0])?, y))
            })?;
            let runner = SpmvRunner {
                backend,
                plan,
                x,
                y,
                alpha,
                beta,
            };
            (Box::new(runner), plan_time, upload_time)
        }
        Op::Spmm => {
            let mut desc = SpmmDesc::new(p)
                .format(format)
                .algorithm(algorithm)
                .max_width(case.width);
            desc.tune = case.tune;
            let (plan, plan_time) = timed(backend, || backend.plan_spmm(a, &desc))?;
            let ((b, c), upload_time) = timed(backend, || {
                let c = initial_output(backend, prior, out_shape, case.out_layout, None)?;
                Ok((upload(&case.inputs[0])?, c))
            })?;
            let runner = SpmmRunner {
                backend,
                plan,
                b,
                c,
                alpha,
                beta,
            };
            (Box::new(runner), plan_time, upload_time)
        }
        Op::Sddmm => {
            let mut desc = SddmmDesc::new(p)
                .format(format)
                .algorithm(algorithm)
                .max_width(case.width);
            desc.tune = case.tune;
            let (plan, plan_time) = timed(backend, || backend.plan_sddmm(a, &desc))?;
            let order = plan.value_order().cloned();
            let ((x, y, c), upload_time) = timed(backend, || {
                let shape = (case.a.nnz(), 1);
                let c = initial_output(backend, prior, shape, Layout::ColMajor, order.as_ref())?;
                Ok((upload(&case.inputs[0])?, upload(&case.inputs[1])?, c))
            })?;
            let runner = SddmmRunner {
                backend,
                plan,
                order,
                x,
                y,
                c,
                alpha,
                beta,
            };
            (Box::new(runner), plan_time, upload_time)
        }
        Op::Attention => {
            let desc = AttentionDesc::new(p)
                .format(format)
                .algorithm(algorithm)
                .heads(case.heads);
            let (plan, plan_time) = timed(backend, || backend.plan_attention(a, &desc))?;
            let (operands, upload_time) = timed(backend, || {
                let o = backend.zeros(out_shape.0, out_shape.1, case.out_layout)?;
                let qkv: Result<Vec<Dense<T>>> = case.inputs.iter().map(upload).collect();
                Ok((qkv?, o))
            })?;
            let (qkv, o) = operands;
            let gradients = if case.backward {
                let zeros = |rows| backend.zeros::<T::Out>(rows, out_shape.1, Layout::RowMajor);
                // dL/dO: V's values, a dense operand of O's shape (V has A.cols() rows).
                let v = case.inputs[2].as_ref();
                let d_o = Dense::from_fn(out_shape.0, out_shape.1, Layout::RowMajor, |i, j| {
                    T::Out::from_f64(v.at(i % v.rows(), j).to_f64())
                });
                Some([
                    backend.upload(d_o.as_ref())?,
                    zeros(a.rows())?,
                    zeros(a.cols())?,
                    zeros(a.cols())?,
                ])
            } else {
                None
            };
            let runner = AttentionRunner {
                backend,
                plan,
                qkv,
                o,
                gradients,
            };
            (Box::new(runner), plan_time, upload_time)
        }
    };
    Ok(Prepared {
        runner,
        plan,
        upload,
    })
}

struct SpmvRunner<'a, T: Scalar> {
    backend: &'a Backend,
    plan: Box<dyn SpmvPlan<T> + 'a>,
    x: Dense<T>,
    y: Dense<T::Out>,
    alpha: T::Acc,
    beta: T::Acc,
}

impl<T: Scalar> Runner for SpmvRunner<'_, T> {
    fn run(&mut self) -> Result<()> {
        self.plan
            .run(self.alpha, self.x.as_ref(), self.beta, self.y.as_mut())
    }
    fn output(&mut self) -> Result<Vec<f64>> {
        Ok(row_major_f64(&self.backend.download(&self.y)?))
    }
    fn info(&self) -> Option<&PlanInfo> {
        Some(self.plan.info())
    }
}

struct SpmmRunner<'a, T: Scalar> {
    backend: &'a Backend,
    plan: Box<dyn SpmmPlan<T> + 'a>,
    b: Dense<T>,
    c: Dense<T::Out>,
    alpha: T::Acc,
    beta: T::Acc,
}

impl<T: Scalar> Runner for SpmmRunner<'_, T> {
    fn run(&mut self) -> Result<()> {
        self.plan
            .run(self.alpha, self.b.as_ref(), self.beta, self.c.as_mut())
    }
    fn output(&mut self) -> Result<Vec<f64>> {
        Ok(row_major_f64(&self.backend.download(&self.c)?))
    }
    fn info(&self) -> Option<&PlanInfo> {
        Some(self.plan.info())
    }
}

struct SddmmRunner<'a, T: Scalar> {
    backend: &'a Backend,
    plan: Box<dyn SddmmPlan<T> + 'a>,
    /// The plan's value order, when it is not the CSR entry order.
    order: Option<ValueOrder>,
    x: Dense<T>,
    y: Dense<T>,
    c: Dense<T::Out>,
    alpha: T::Acc,
    beta: T::Acc,
}

impl<T: Scalar> Runner for SddmmRunner<'_, T> {
    fn run(&mut self) -> Result<()> {
        self.plan.run(
            self.alpha,
            self.x.as_ref(),
            self.y.as_ref(),
            self.beta,
            self.c.as_mut(),
        )
    }
    fn output(&mut self) -> Result<Vec<f64>> {
        let values = self.backend.download(&self.c)?.into_host_vec()?;
        let values = match &self.order {
            Some(order) => order.to_csr_order(&values)?,
            None => values,
        };
        Ok(values.iter().map(|v| v.to_f64()).collect())
    }
    fn info(&self) -> Option<&PlanInfo> {
        Some(self.plan.info())
    }
}

struct AttentionRunner<'a, T: Scalar> {
    backend: &'a Backend,
    plan: Box<dyn AttentionPlan<T> + 'a>,
    /// Q, K and V.
    qkv: Vec<Dense<T>>,
    o: Dense<T::Out>,
    /// dL/dO, dQ, dK and dV when the backward is timed too.
    gradients: Option<[Dense<T::Out>; 4]>,
}

impl<T: Scalar> Runner for AttentionRunner<'_, T> {
    fn run(&mut self) -> Result<()> {
        let [q, k, v] = &self.qkv[..] else {
            return Err(Error::invalid("attention takes Q, K and V"));
        };
        self.plan
            .run(q.as_ref(), k.as_ref(), v.as_ref(), self.o.as_mut())?;
        if let Some([d_o, dq, dk, dv]) = &mut self.gradients {
            self.plan.backward(AttentionBackward {
                q: q.as_ref(),
                k: k.as_ref(),
                v: v.as_ref(),
                o: self.o.as_ref(),
                d_o: d_o.as_ref(),
                dq: dq.as_mut(),
                dk: dk.as_mut(),
                dv: dv.as_mut(),
                dbias: None,
            })?;
        }
        Ok(())
    }
    fn output(&mut self) -> Result<Vec<f64>> {
        Ok(row_major_f64(&self.backend.download(&self.o)?))
    }
    fn info(&self) -> Option<&PlanInfo> {
        Some(self.plan.info())
    }
}

/// The value types, with the CPU baselines for those sprs and faer multiply natively.
pub trait Baselines: Scalar {
    /// The runner of a baseline kernel; an error for a type or operation it does not cover.
    fn prepare_baseline<'a>(kernel: Kernel, case: &'a Case<'a, Self>) -> Result<Prepared<'a>>;
}

fn no_baseline(kernel: Kernel, precision: Precision, op: Op) -> Error {
    Error::invalid(format!(
        "{} has no {} kernel in {precision}",
        kernel.backend(),
        op.name()
    ))
}

macro_rules! without_baselines {
    ($($t:ty),+) => {$(
        impl Baselines for $t {
            fn prepare_baseline<'a>(kernel: Kernel, case: &'a Case<'a, Self>) -> Result<Prepared<'a>> {
                Err(no_baseline(kernel, case.precision, case.op))
            }
        }
    )+};
}
without_baselines!(f16, bf16, i8);

macro_rules! with_baselines {
    ($($t:ty),+) => {$(
        impl Baselines for $t {
            fn prepare_baseline<'a>(kernel: Kernel, case: &'a Case<'a, Self>) -> Result<Prepared<'a>> {
                native_baseline(kernel, case)
            }
        }
    )+};
}
with_baselines!(f64, f32);

fn native_baseline<'a, T: BenchValue + ComplexField>(
    kernel: Kernel,
    case: &'a Case<'a, T>,
) -> Result<Prepared<'a>> {
    let input = case.inputs[0].as_ref();
    let host = |what| input.host(what);
    let start = Instant::now();
    let runner: Box<dyn Runner + 'a> = match (kernel, case.op) {
        (Kernel::Sprs, Op::Spmv) => Box::new(SprsSpmv {
            a: case.a,
            x: host("x")?,
            y: vec![T::zero(); case.a.rows()],
        }),
        (Kernel::Sprs, Op::Spmm) => Box::new(SprsSpmm {
            a: case.a,
            b: &case.inputs[0],
            c: Dense::zeros(case.a.rows(), case.width, case.out_layout),
        }),
        (Kernel::FaerDense, Op::Spmm) => {
            let (k, n) = (case.a.cols(), case.width);
            let b = match input.layout() {
                Layout::RowMajor => MatRef::from_row_major_slice(host("B")?, k, n),
                Layout::ColMajor => MatRef::from_column_major_slice(host("B")?, k, n),
            };
            Box::new(FaerGemm {
                a: densify(case.a),
                b,
                c: Mat::zeros(case.a.rows(), n),
            })
        }
        _ => return Err(no_baseline(kernel, case.precision, case.op)),
    };
    Ok(Prepared {
        runner,
        plan: start.elapsed(),
        upload: Duration::ZERO,
    })
}

/// sprs's `y += A*x`: the cheapest call it offers (no zeroing pass, no allocation), so y starts
/// at zero for the check and keeps growing while timed.
struct SprsSpmv<'a, T> {
    a: &'a Csr<T>,
    x: &'a [T],
    y: Vec<T>,
}

impl<T: BenchValue> Runner for SprsSpmv<'_, T> {
    fn run(&mut self) -> Result<()> {
        sprs::prod::mul_acc_mat_vec_csr(sprs_view(self.a), self.x, self.y.as_mut_slice());
        Ok(())
    }
    fn output(&mut self) -> Result<Vec<f64>> {
        Ok(self.y.iter().map(|v| v.to_f64()).collect())
    }
    fn info(&self) -> Option<&PlanInfo> {
        None
    }
}

/// sprs's `C += A*B`, the kernel `&CsMat * &Array2` runs for N >= 8 (as for SpMV, C keeps
/// growing while timed).
struct SprsSpmm<'a, T> {
    a: &'a Csr<T>,
    b: &'a Dense<T>,
    c: Dense<T>,
}

impl<T: BenchValue> Runner for SprsSpmm<'_, T> {
    fn run(&mut self) -> Result<()> {
        let b = self.b.as_ref().to_ndarray()?;
        let mut c = self.c.as_mut().into_ndarray()?;
        sprs::prod::csr_mulacc_dense_rowmaj(sprs_view(self.a), b, c.view_mut());
        Ok(())
    }
    fn output(&mut self) -> Result<Vec<f64>> {
        Ok(row_major_f64(&self.c))
    }
    fn info(&self) -> Option<&PlanInfo> {
        None
    }
}

/// A as a dense faer matrix.
fn densify<T: BenchValue + ComplexField>(a: &Csr<T>) -> Mat<T> {
    let mut dense = Mat::<T>::zeros(a.rows(), a.cols());
    let view = a.as_ref();
    for i in 0..a.rows() {
        let (cols, values) = view.row(i);
        for (&j, &v) in cols.iter().zip(values) {
            dense[(i, j as usize)] = v;
        }
    }
    dense
}

/// faer's `C = A*B` with A dense, on the rayon pool.
struct FaerGemm<'a, T> {
    a: Mat<T>,
    b: MatRef<'a, T>,
    c: Mat<T>,
}

impl<T: BenchValue + ComplexField> Runner for FaerGemm<'_, T> {
    fn run(&mut self) -> Result<()> {
        matmul(
            self.c.as_mut(),
            Accum::Replace,
            self.a.as_ref(),
            self.b,
            T::from_f64(1.0),
            Par::rayon(0),
        );
        Ok(())
    }
    fn output(&mut self) -> Result<Vec<f64>> {
        let mut out = Vec::with_capacity(self.c.nrows() * self.c.ncols());
        for i in 0..self.c.nrows() {
            for j in 0..self.c.ncols() {
                out.push(self.c[(i, j)].to_f64());
            }
        }
        Ok(out)
    }
    fn info(&self) -> Option<&PlanInfo> {
        None
    }
}
