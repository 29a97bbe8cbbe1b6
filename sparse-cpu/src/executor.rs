//! The CPU backend: plans over borrowed CSR matrices, run by the rayon kernels or the reference.

use sparse_core::{
    Accumulator, Algorithm, AttentionDesc, AttentionPlan, BackendKind, Compute, CsrRef, Dense,
    DenseMut, DenseRef, Error, Executor, Format, Layout, OpKind, PlanInfo, Precision, Result,
    Scalar, SddmmDesc, SddmmPlan, SpIndex, SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan, Support,
    ValueOrder,
};

use crate::partition::{balanced_rows, merge_path, part_count, PathPoint};
use crate::shared_out::SharedOut;
use crate::stored::{formats_for, Stored};
use crate::{kernels, reference};

/// The CPU backend: rayon kernels on the global rayon pool (set its size with
/// `RAYON_NUM_THREADS` or a `ThreadPoolBuilder` to fix the partition and so the results).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend
    }

    fn check<T: Scalar>(&self, op: OpKind, format: Format, precision: Precision) -> Result<()> {
        if precision.storage != T::DTYPE {
            return Err(Error::invalid(format!(
                "{op}: the descriptor asks for {precision} but the matrix holds {}",
                T::DTYPE
            )));
        }
        match self.capability(op, format, precision) {
            Support::Unsupported => Err(Error::Unsupported {
                op,
                format,
                precision,
                backend: BackendKind::Cpu,
                algorithm: None,
                supported: supported_list(op),
            }),
            _ => Ok(()),
        }
    }
}

fn supported_list(op: OpKind) -> String {
    let precisions = if op == OpKind::Attention {
        "f64 f32 f16 bf16"
    } else {
        "f64 f32 f16 bf16 i8"
    };
    let formats: Vec<&str> = formats_for(op).iter().map(|f| f.name()).collect();
    format!("{op} on {} in {precisions}", formats.join(" "))
}

/// What a plan holds: the caller's CSR (the reference and the CSR kernels read it), its
/// conversion to the plan's format, and the partition its runs reuse.
struct CpuPlan<'a, T, I> {
    a: CsrRef<'a, T, I>,
    stored: Stored<'a, T, I>,
    info: PlanInfo,
    path: Vec<PathPoint>,
    row_bounds: Vec<usize>,
    value_order: Option<ValueOrder>,
    scale_by_values: bool,
    attention_scale: Option<f64>,
}

impl<'a, T: Scalar, I: SpIndex> CpuPlan<'a, T, I> {
    fn new(
        a: CsrRef<'a, T, I>,
        op: OpKind,
        precision: Precision,
        algorithm: Algorithm,
        stored: Stored<'a, T, I>,
    ) -> Result<Self> {
        let format = stored.format();
        let algorithm = match (op, format, algorithm) {
            (_, Format::Csr, Algorithm::Reference) => Algorithm::Reference,
            // Every other format runs its one kernel, parallel over rows or blocks of rows.
            (_, Format::Csr, _) => csr_algorithm(op, algorithm)?,
            (_, _, Algorithm::Auto | Algorithm::RowSplit) => Algorithm::RowSplit,
            (_, _, other) => {
                return Err(Error::invalid(format!(
                    "the cpu backend has no {other} algorithm for {op} on {format}"
                )));
            }
        };
        let csr_partition = format == Format::Csr;
        let parts = part_count(a.nnz() + a.rows());
        let path = if csr_partition && algorithm == Algorithm::NnzSplit {
            merge_path(a, parts)
        } else {
            Vec::new()
        };
        let row_bounds = if csr_partition && algorithm == Algorithm::RowSplit {
            balanced_rows(a, parts)
        } else {
            Vec::new()
        };
        let bytes = stored.bytes()
            + path.len() * std::mem::size_of::<PathPoint>()
            + row_bounds.len() * std::mem::size_of::<usize>();
        let info = PlanInfo {
            backend: BackendKind::Cpu,
            op,
            format,
            precision,
            algorithm,
            bytes,
            deterministic: true,
            reserved_width: usize::MAX,
            plan_time: Default::default(),
        };
        let value_order = stored.value_order();
        Ok(CpuPlan {
            a,
            stored,
            info,
            path,
            row_bounds,
            value_order,
            scale_by_values: false,
            attention_scale: None,
        })
    }
}

/// The CSR kernel an algorithm request names.
fn csr_algorithm(op: OpKind, algorithm: Algorithm) -> Result<Algorithm> {
    Ok(match (op, algorithm) {
        (OpKind::Spmv, Algorithm::Auto | Algorithm::NnzSplit) => Algorithm::NnzSplit,
        (
            OpKind::Spmm | OpKind::Sddmm | OpKind::Attention,
            Algorithm::Auto | Algorithm::RowSplit,
        ) => Algorithm::RowSplit,
        (_, other) => {
            return Err(Error::invalid(format!(
                "the cpu backend has no {other} algorithm for {op} on csr"
            )));
        }
    })
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
    for i in 0..values.rows() {
        for j in 0..values.cols() {
            // SAFETY: the reference result has the output's shape (checked by the caller).
            unsafe { shared.write(i, j, O::from_f64(values.at(i, j))) };
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
            let r = reference::spmv(self.a, alpha.to_f64(), x, beta.to_f64(), prior)?;
            return store_reference(&column(r)?, y, "spmv y");
        }
        match self.stored {
            Stored::Csr(a) => kernels::spmv(a, &self.path, alpha, x, beta, y),
            _ => self.stored.spmv(alpha, x, beta, y),
        }
    }
    fn update_values(&mut self, _values: DenseRef<'_, T>) -> Result<()> {
        Err(Error::internal("pending"))
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
        if alpha == T::Acc::ZERO {
            return scale_output(beta, c, "spmm C");
        }
        if self.info.algorithm == Algorithm::Reference {
            let prior = (beta != T::Acc::ZERO).then(|| c.as_ref());
            let r = reference::spmm(self.a, alpha.to_f64(), b, beta.to_f64(), prior)?;
            return store_reference(&r, c, "spmm C");
        }
        match self.stored {
            Stored::Csr(a) => kernels::spmm(a, &self.row_bounds, alpha, b, beta, c),
            _ => self.stored.spmm(alpha, b, beta, c),
        }
    }
    fn update_values(&mut self, _values: DenseRef<'_, T>) -> Result<()> {
        Err(Error::internal("pending"))
    }
    fn reserve(&mut self, _width: usize) -> Result<()> {
        Ok(())
    }
}

impl<T: Scalar, I: SpIndex> SddmmPlan<T> for CpuPlan<'_, T, I> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn value_order(&self) -> Option<&ValueOrder> {
        self.value_order.as_ref()
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
        let slots = self
            .value_order
            .as_ref()
            .map_or(self.a.nnz(), ValueOrder::len);
        c.expect_shape("sddmm C", (slots, 1))?;
        if alpha == T::Acc::ZERO {
            return scale_values(beta, c, self.value_order.as_ref());
        }
        if self.info.algorithm == Algorithm::Reference {
            let prior = (beta != T::Acc::ZERO).then(|| c.as_ref());
            let r = reference::sddmm(
                self.a,
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
            Stored::Csr(a) => kernels::sddmm(
                a,
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
    fn update_values(&mut self, _values: DenseRef<'_, T>) -> Result<()> {
        Err(Error::internal("pending"))
    }
    fn reserve(&mut self, _width: usize) -> Result<()> {
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
        q.expect_shape("attention Q", (self.a.rows(), q.cols()))?;
        k.expect_shape("attention K", (self.a.cols(), q.cols()))?;
        v.expect_shape("attention V", (self.a.cols(), v.cols()))?;
        o.expect_shape("attention O", (self.a.rows(), v.cols()))?;
        let desc = AttentionDesc {
            scale: self.attention_scale,
            ..AttentionDesc::new(self.info.precision)
        };
        let scale = desc.resolved_scale(q.cols())?;
        if self.info.algorithm == Algorithm::Reference {
            let r = reference::attention(self.a, q, k, v, scale)?;
            return store_reference(&r, o, "attention O");
        }
        kernels::attention(self.a, &self.row_bounds, q, k, v, scale, o)
    }
}

impl Executor for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn description(&self) -> String {
        format!("cpu (rayon, {} threads)", rayon::current_num_threads())
    }

    fn algorithms(&self, op: OpKind, format: Format, precision: Precision) -> Vec<sparse_core::Offer> {
        match self.capability(op, format, precision) {
            Support::Unsupported => Vec::new(),
            _ => vec![sparse_core::Offer::native(Algorithm::RowSplit, true)],
        }
    }

    fn capability(&self, op: OpKind, format: Format, precision: Precision) -> Support {
        let natural = matches!(
            (precision.storage, precision.compute),
            (sparse_core::DType::F64, Compute::F64)
                | (sparse_core::DType::F32, Compute::F32)
                | (
                    sparse_core::DType::F16 | sparse_core::DType::BF16,
                    Compute::F32
                )
                | (sparse_core::DType::I8, Compute::I32)
        );
        let float = precision.compute != Compute::I32;
        if formats_for(op).contains(&format) && natural && (float || op != OpKind::Attention) {
            Support::Native
        } else {
            Support::Unsupported
        }
    }

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        self.check::<T>(OpKind::Spmv, desc.format, desc.precision)?;
        let stored = Stored::convert(a, desc.format, desc.block)?;
        Ok(Box::new(CpuPlan::new(
            a,
            OpKind::Spmv,
            desc.precision,
            desc.algorithm,
            stored,
        )?))
    }

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
        self.check::<T>(OpKind::Spmm, desc.format, desc.precision)?;
        let stored = Stored::convert(a, desc.format, desc.block)?;
        Ok(Box::new(CpuPlan::new(
            a,
            OpKind::Spmm,
            desc.precision,
            desc.algorithm,
            stored,
        )?))
    }

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
        self.check::<T>(OpKind::Sddmm, desc.format, desc.precision)?;
        let stored = Stored::convert(s, desc.format, desc.block)?;
        let mut plan = CpuPlan::new(s, OpKind::Sddmm, desc.precision, desc.algorithm, stored)?;
        plan.scale_by_values = desc.scale_by_values;
        Ok(Box::new(plan))
    }

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>> {
        self.check::<T>(OpKind::Attention, desc.format, desc.precision)?;
        if let Some(s) = desc.scale {
            desc.resolved_scale(0)
                .map_err(|_| Error::invalid(format!("attention scale must be finite, got {s}")))?;
        }
        let stored = Stored::convert(a, desc.format, None)?;
        let mut plan = CpuPlan::new(a, OpKind::Attention, desc.precision, desc.algorithm, stored)?;
        plan.attention_scale = desc.scale;
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
