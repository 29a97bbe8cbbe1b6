//! The CPU backend: plans over borrowed CSR matrices, run by the rayon kernels or the reference.

use std::time::Instant;

use sparse_core::{
    check_offered, Accumulator, Algorithm, AttentionBackward, AttentionDesc, AttentionPlan,
    BackendKind, BlockShape, CsrRef, Dense, DenseMut, DenseRef, Error, Executor, Format, Layout,
    Offer, OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SddmmPlan, SpIndex, SpmmDesc,
    SpmmPlan, SpmvDesc, SpmvPlan, ValueOrder,
};

use crate::attention::{self, Workspace};
use sparse_formats::Transposed;

use crate::kernels::{self, Gather};
use crate::partition::{balanced_rows, merge_path, part_count, PathPoint};
use crate::reference;
use crate::shared_out::SharedOut;
use crate::stored::{algorithms, Stored};

/// The CPU backend: rayon kernels on the global rayon pool (set its size with
/// `RAYON_NUM_THREADS` or a `ThreadPoolBuilder` to fix the partition and so the results).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend
    }
}

/// What a plan is asked for, whatever the operation.
struct Request {
    op: OpKind,
    format: Format,
    precision: Precision,
    algorithm: Algorithm,
    block: Option<BlockShape>,
}

/// What a plan holds: the caller's CSR (its pattern, and the values the CSR kernels and the
/// reference read until new ones are given), its conversion to the plan's format, and the
/// partition its runs reuse.
struct CpuPlan<'a, T, I> {
    a: CsrRef<'a, T, I>,
    stored: Stored<T>,
    info: PlanInfo,
    path: Vec<PathPoint>,
    /// How the CSR SpMV gathers x.
    gather: Gather,
    row_bounds: Vec<usize>,
    scale_by_values: bool,
    /// The attention descriptor (a default one for other operations).
    attention: AttentionDesc,
    /// What an attention plan keeps for the backward.
    backward: Option<BackwardState>,
}

/// The row statistics of the last attention run (rows x 2*heads: maximum, normaliser; `None`
/// before the first, or after a run of the reference, which keeps none), the transposed
/// pattern and the backward's workspace.
struct BackwardState {
    stats: Vec<f64>,
    ran: bool,
    transpose: Transposed,
    work: Workspace,
}

impl BackwardState {
    fn bytes(&self) -> usize {
        self.stats.len() * size_of::<f64>() + self.transpose.bytes() + self.work.bytes()
    }
}

impl<'a, T: Scalar, I: SpIndex> CpuPlan<'a, T, I> {
    /// Checks the request against the table, converts `a` and partitions it: everything a run
    /// reuses. The caller adds what is particular to its operation.
    fn new(a: CsrRef<'a, T, I>, request: Request) -> Result<Self> {
        let start = Instant::now();
        let Request {
            op,
            format,
            precision,
            algorithm,
            block,
        } = request;
        if precision.storage != T::DTYPE {
            return Err(Error::invalid(format!(
                "{op}: the descriptor asks for {precision} but the matrix holds {}",
                T::DTYPE
            )));
        }
        let offer = choose(op, format, precision, algorithm)?;
        let stored = Stored::convert(a, format, block)?;
        let csr_partition = format == Format::Csr;
        let parts = part_count(a.nnz() + a.rows());
        let path = if csr_partition && offer.algorithm == Algorithm::NnzSplit {
            merge_path(a, parts)
        } else {
            Vec::new()
        };
        let gather = if op == OpKind::Spmv && !path.is_empty() {
            Gather::for_spmv(a)
        } else {
            Gather::Direct
        };
        let row_bounds = if csr_partition && offer.algorithm == Algorithm::RowSplit {
            balanced_rows(a, parts)
        } else {
            Vec::new()
        };
        let info = PlanInfo::new(
            BackendKind::Cpu,
            op,
            format,
            precision,
            offer.algorithm,
            offer.deterministic,
        );
        let mut plan = CpuPlan {
            a,
            stored,
            info,
            path,
            gather,
            row_bounds,
            scale_by_values: false,
            attention: AttentionDesc::new(precision),
            backward: None,
        };
        plan.info.bytes = plan.bytes();
        plan.info.plan_time.host = start.elapsed();
        Ok(plan)
    }

    /// What the plan owns: the stored matrix and the partitions.
    fn bytes(&self) -> usize {
        self.stored.bytes()
            + std::mem::size_of_val(self.path.as_slice())
            + std::mem::size_of_val(self.row_bounds.as_slice())
            + self.backward.as_ref().map_or(0, BackwardState::bytes)
    }

    /// The CSR the CSR kernels and the reference read: the caller's, with the values given
    /// since planning when there were any.
    fn csr(&self) -> CsrRef<'_, T, I> {
        match self.stored.csr_values() {
            // SAFETY: the pattern is the caller's validated one, and `set_values` keeps one
            // value per entry, so the view satisfies every invariant `CsrRef::try_new` checks.
            Some(values) => unsafe {
                CsrRef::new_unchecked(
                    self.a.rows(),
                    self.a.cols(),
                    self.a.row_ptr(),
                    self.a.col_idx(),
                    values,
                )
            },
            None => self.a,
        }
    }

    /// What `update_values` does for every operation: `values` is nnz x 1 in host memory, in
    /// the CSR entry order of the matrix planned from.
    fn set_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        let nnz = self.a.nnz();
        values.expect_shape("update_values", (nnz, 1))?;
        let data = values.host("update_values")?;
        let strided: Vec<T>;
        let csr_values = if values.offset(1, 0) == 1 {
            &data[..nnz]
        } else {
            strided = (0..nnz).map(|e| data[values.offset(e, 0)]).collect();
            &strided
        };
        self.stored.set_values(csr_values)?;
        self.info.bytes = self.bytes();
        Ok(())
    }

    /// Makes runs up to `width` possible; the CPU kernels need no workspace that grows with it.
    fn reserve_width(&mut self, width: usize) {
        self.info.reserved_width = self.info.reserved_width.max(width);
    }
}

/// The offer a request resolves to: the one it names, or for `auto` the table's first.
fn choose(op: OpKind, format: Format, precision: Precision, algorithm: Algorithm) -> Result<Offer> {
    match check_offered(
        BackendKind::Cpu,
        algorithms,
        op,
        format,
        precision,
        algorithm,
    )? {
        Some(offer) => Ok(offer),
        None => algorithms(op, format, precision)
            .into_iter()
            .next()
            .ok_or_else(|| {
                Error::internal(format!("check_offered passed an empty table for {op}"))
            }),
    }
}

/// `out = beta*out` (zeros when `beta == 0`, never reading `out`): the result of `alpha == 0`.
fn scale_output<O: Scalar>(beta: O::Acc, mut out: DenseMut<'_, O>, context: &str) -> Result<()> {
    let (rows, cols) = out.shape();
    let shared = SharedOut::new(&mut out, context)?;
    for i in 0..rows {
        for j in 0..cols {
            // SAFETY: (i, j) is in range and this loop is the only accessor.
            unsafe {
                let v = if beta == O::Acc::ZERO {
                    O::Acc::ZERO
                } else {
                    beta * shared.read(i, j).to_acc()
                };
                shared.write(i, j, O::from_acc(v));
            }
        }
    }
    Ok(())
}

/// `c = beta*c` for SDDMM output in `order` (CSR order when `None`); padding slots become 0.
fn scale_values<O: Scalar>(
    beta: O::Acc,
    mut c: DenseMut<'_, O>,
    order: Option<&ValueOrder>,
) -> Result<()> {
    let Some(order) = order else {
        return scale_output(beta, c, "sddmm C");
    };
    let shared = SharedOut::new(&mut c, "sddmm C")?;
    for s in 0..order.len() {
        // SAFETY: c has one entry per slot (checked by the caller); this loop is the only accessor.
        unsafe {
            let v = match order.entry(s) {
                Some(_) if beta != O::Acc::ZERO => beta * shared.read(s, 0).to_acc(),
                _ => O::Acc::ZERO,
            };
            shared.write(s, 0, O::from_acc(v));
        }
    }
    Ok(())
}

/// Rounds an f64 result of the reference into the output.
fn store_reference<O: Scalar>(
    values: &Dense<f64>,
    mut out: DenseMut<'_, O>,
    context: &str,
) -> Result<()> {
    let shared = SharedOut::new(&mut out, context)?;
    // Integer results wrap modulo 2^32, as the kernels' i32 arithmetic does (the f64 sums of
    // integer products are exact below 2^53).
    let wrap = |v: f64| {
        if O::DTYPE.is_integer() && v.is_finite() {
            f64::from(v as i64 as i32)
        } else {
            v
        }
    };
    for i in 0..values.rows() {
        for j in 0..values.cols() {
            // SAFETY: the reference result has the output's shape (checked by the caller).
            unsafe { shared.write(i, j, O::from_f64(wrap(values.at(i, j)))) };
        }
    }
    Ok(())
}

fn column(values: Vec<f64>) -> Result<Dense<f64>> {
    let n = values.len();
    Dense::from_vec(values, n, 1, n.max(1), Layout::ColMajor)
}

impl<T: Scalar, I: SpIndex> SpmvPlan<T> for CpuPlan<'_, T, I> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        y: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        x.expect_shape("spmv x", (self.a.cols(), 1))?;
        y.expect_shape("spmv y", (self.a.rows(), 1))?;
        if alpha == T::Acc::ZERO {
            return scale_output(beta, y, "spmv y");
        }
        if self.info.algorithm == Algorithm::Reference {
            let prior = (beta != T::Acc::ZERO).then(|| y.as_ref());
            let r = reference::spmv(self.csr(), alpha.to_f64(), x, beta.to_f64(), prior)?;
            return store_reference(&column(r)?, y, "spmv y");
        }
        match self.stored {
            Stored::Csr(_) => kernels::spmv(self.csr(), &self.path, self.gather, alpha, x, beta, y),
            _ => self.stored.spmv(alpha, x, beta, y),
        }
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.set_values(values)
    }
}

impl<T: Scalar, I: SpIndex> SpmmPlan<T> for CpuPlan<'_, T, I> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        b.expect_shape("spmm B", (self.a.cols(), b.cols()))?;
        c.expect_shape("spmm C", (self.a.rows(), b.cols()))?;
        self.info.check_width(b.cols())?;
        if alpha == T::Acc::ZERO {
            return scale_output(beta, c, "spmm C");
        }
        if self.info.algorithm == Algorithm::Reference {
            let prior = (beta != T::Acc::ZERO).then(|| c.as_ref());
            let r = reference::spmm(self.csr(), alpha.to_f64(), b, beta.to_f64(), prior)?;
            return store_reference(&r, c, "spmm C");
        }
        match self.stored {
            Stored::Csr(_) => kernels::spmm(self.csr(), &self.row_bounds, alpha, b, beta, c),
            _ => self.stored.spmm(alpha, b, beta, c),
        }
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.set_values(values)
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.reserve_width(width);
        Ok(())
    }
}

impl<T: Scalar, I: SpIndex> SddmmPlan<T> for CpuPlan<'_, T, I> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn value_order(&self) -> Option<&ValueOrder> {
        self.stored.sddmm_order()
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        x.expect_shape("sddmm X", (self.a.rows(), x.cols()))?;
        y.expect_shape("sddmm Y", (self.a.cols(), x.cols()))?;
        let order = self.stored.sddmm_order();
        let slots = order.map_or(self.a.nnz(), ValueOrder::len);
        c.expect_shape("sddmm C", (slots, 1))?;
        self.info.check_width(x.cols())?;
        if alpha == T::Acc::ZERO {
            return scale_values(beta, c, order);
        }
        if self.info.algorithm == Algorithm::Reference {
            let prior = (beta != T::Acc::ZERO).then(|| c.as_ref());
            let r = reference::sddmm(
                self.csr(),
                alpha.to_f64(),
                x,
                y,
                beta.to_f64(),
                prior,
                self.scale_by_values,
            )?;
            return store_reference(&column(r)?, c, "sddmm C");
        }
        match self.stored {
            Stored::Csr(_) => kernels::sddmm(
                self.csr(),
                &self.row_bounds,
                alpha,
                x,
                y,
                beta,
                c,
                self.scale_by_values,
            ),
            _ => self
                .stored
                .sddmm(alpha, x, y, beta, c, self.scale_by_values),
        }
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.set_values(values)
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.reserve_width(width);
        Ok(())
    }
}

impl<T: Scalar, I: SpIndex> AttentionPlan<T> for CpuPlan<'_, T, I> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        q: DenseRef<'_, T>,
        k: DenseRef<'_, T>,
        v: DenseRef<'_, T>,
        o: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let shape = self.attention.shape(q.cols(), v.cols())?;
        q.expect_shape("attention Q", (self.a.rows(), q.cols()))?;
        k.expect_shape("attention K", (self.a.cols(), q.cols()))?;
        v.expect_shape("attention V", (self.a.cols(), v.cols()))?;
        o.expect_shape("attention O", (self.a.rows(), v.cols()))?;
        // Attention plans take no new values: the caller's CSR is the one to read.
        let a = self.a;
        let state = self
            .backward
            .as_mut()
            .ok_or_else(|| Error::internal("an attention plan without its backward state"))?;
        if self.info.algorithm == Algorithm::Reference {
            state.ran = false;
            let r = reference::attention(a, q, k, v, &shape)?;
            return store_reference(&r, o, "attention O");
        }
        if shape.heads * 2 * a.rows() != state.stats.len() {
            return Err(Error::internal("attention statistics of another shape"));
        }
        kernels::attention(a, &self.row_bounds, q, k, v, &shape, o, &mut state.stats)?;
        state.ran = true;
        Ok(())
    }

    fn backward(&mut self, grads: AttentionBackward<'_, T>) -> Result<()> {
        let shape = self.attention.shape(grads.q.cols(), grads.v.cols())?;
        let (rows, cols, w, wv) = (self.a.rows(), self.a.cols(), grads.q.cols(), grads.v.cols());
        grads.q.expect_shape("attention Q", (rows, w))?;
        grads.k.expect_shape("attention K", (cols, w))?;
        grads.v.expect_shape("attention V", (cols, wv))?;
        grads.o.expect_shape("attention O", (rows, wv))?;
        grads.d_o.expect_shape("attention dO", (rows, wv))?;
        grads.dq.expect_shape("attention dQ", (rows, w))?;
        grads.dk.expect_shape("attention dK", (cols, w))?;
        grads.dv.expect_shape("attention dV", (cols, wv))?;
        match &grads.dbias {
            Some(db) => db.expect_shape("attention dbias", (self.a.nnz(), 1))?,
            None if shape.bias => {
                return Err(Error::invalid(
                    "an attention backward with a bias needs dbias for the bias gradient",
                ))
            }
            None => {}
        }
        // Attention plans take no new values: the caller's CSR is the one to read.
        let a = self.a;
        let state = self
            .backward
            .as_mut()
            .ok_or_else(|| Error::internal("an attention plan without its backward state"))?;
        if self.info.algorithm == Algorithm::Reference {
            let g = reference::attention_backward(a, grads.q, grads.k, grads.v, grads.d_o, &shape)?;
            store_reference(&g.dq, grads.dq, "attention dQ")?;
            store_reference(&g.dk, grads.dk, "attention dK")?;
            store_reference(&g.dv, grads.dv, "attention dV")?;
            if let Some(db) = grads.dbias {
                store_reference(&column(g.dbias)?, db, "attention dbias")?;
            }
            return Ok(());
        }
        if !state.ran {
            return Err(Error::invalid(
                "the attention backward reads the statistics of a forward run: run the plan first",
            ));
        }
        attention::backward(
            a,
            &shape,
            grads,
            &state.stats,
            &state.transpose,
            &mut state.work,
        )
    }
}

impl Executor for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn description(&self) -> String {
        format!("cpu (rayon, {} threads)", rayon::current_num_threads())
    }

    fn algorithms(&self, op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
        algorithms(op, format, precision)
    }

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        let request = Request {
            op: OpKind::Spmv,
            format: desc.format,
            precision: desc.precision,
            algorithm: desc.algorithm,
            block: desc.block,
        };
        Ok(Box::new(CpuPlan::new(a, request)?))
    }

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
        let request = Request {
            op: OpKind::Spmm,
            format: desc.format,
            precision: desc.precision,
            algorithm: desc.algorithm,
            block: desc.block,
        };
        let mut plan = CpuPlan::new(a, request)?;
        plan.reserve_width(desc.reserved_width());
        Ok(Box::new(plan))
    }

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
        let request = Request {
            op: OpKind::Sddmm,
            format: desc.format,
            precision: desc.precision,
            algorithm: desc.algorithm,
            block: desc.block,
        };
        let mut plan = CpuPlan::new(s, request)?;
        plan.reserve_width(desc.reserved_width());
        plan.scale_by_values = desc.scale_by_values;
        Ok(Box::new(plan))
    }

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>> {
        if let Some(s) = desc.scale {
            desc.resolved_scale(0)
                .map_err(|_| Error::invalid(format!("attention scale must be finite, got {s}")))?;
        }
        if desc.heads == 0 {
            return Err(Error::invalid("attention needs at least one head"));
        }
        let request = Request {
            op: OpKind::Attention,
            format: desc.format,
            precision: desc.precision,
            algorithm: desc.algorithm,
            block: None,
        };
        let mut plan = CpuPlan::new(a, request)?;
        plan.attention = *desc;
        plan.backward = Some(BackwardState {
            stats: vec![0.0; 2 * desc.heads * a.rows()],
            ran: false,
            transpose: Transposed::of(a),
            work: Workspace::new(a.nnz(), desc.heads),
        });
        plan.info.bytes = plan.bytes();
        Ok(Box::new(plan))
    }

    fn upload<T: Scalar>(&self, host: DenseRef<'_, T>) -> Result<Dense<T>> {
        let data = host.host("upload")?;
        Ok(Dense::from_fn(
            host.rows(),
            host.cols(),
            host.layout(),
            |i, j| data[host.offset(i, j)],
        ))
    }
    fn download<T: Scalar>(&self, dense: &Dense<T>) -> Result<Dense<T>> {
        self.upload(dense.as_ref())
    }

    fn zeros<T: Scalar>(&self, rows: usize, cols: usize, layout: Layout) -> Result<Dense<T>> {
        Ok(Dense::zeros(rows, cols, layout))
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}
