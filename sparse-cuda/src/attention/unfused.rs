//! The `unfused` attention pipeline, the baseline the fused kernels are measured against: per
//! head, the CSR SDDMM (`sddmm.rs`) writes the scaled scores, `attention_softmax` turns each
//! row's scores (plus the bias) into weights written where the CSR SpMM (`spmm.rs`) reads A's
//! values, and that SpMM multiplies them with the head's V columns into O. The steps are the
//! other families' own plans, run on views of the operands' columns.
//!
//! Every step runs in f32, the precision's compute type: scores and weights rounded to f16 or
//! bf16 would lose more than the f32 softmax the precision promises. With 16-bit storage the
//! head's columns of Q, K and V are widened into f32 staging [`STAGED`] columns at a time, the
//! scores summed over those column runs (the SDDMM adding each run with beta = 1), and O's
//! columns narrowed back from the SpMM's f32 output; the staging, sized at plan time for A's
//! rows and columns, is all the plan adds.
//!
//! The backward recomputes each head's weights P the same way, then runs the other families'
//! plans again: dV = P^T dO (an SpMM over A^T, planned beside A's, its values moved into A^T's
//! order on the device), dP = dO V^T sampled on A (the SDDMM), `attention_unfused_grad` for
//! dS = P (dP - <dO_i, O_i>) and the bias gradient, dQ = scale dS K and dK = scale dS^T Q (SpMMs
//! over A and A^T).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{
    Algorithm, AttentionDesc, AttentionShape, BackendKind, CsrRef, DType, DeviceMemory, Error,
    Format, Layout, OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SpIndex, SpmmDesc,
};

use super::{
    softmax_entry, unfused_grad_entry, widening_entries, AttentionSoftmax, AttentionUnfusedGrad,
    AttentionWiden, BLOCK,
};
use crate::device::{CudaBuffer, Device};
use crate::kernel::{Kernel, KernelSpec, MutPtr, Ptr};
use crate::matrix::DeviceCsr;
use crate::operand::{
    to_u32, AttentionGradOperands, AttentionOperands, Bound, Run, SddmmOperands, SpmmOperands,
};
use crate::plan::{
    AttentionKernels, CudaPlan, Kernels, Phase, PlanBase, PlanClock, SddmmKernels, SpmmKernels,
    Values,
};
use crate::{sddmm, spmm};
use sparse_formats::Transposed;

/// Columns of a 16-bit operand widened to f32 at a time.
const STAGED: usize = 32;

/// Blocks of the widening kernels' grid-stride loops at most.
const MAX_BLOCKS: u64 = 4096;

/// The 16-bit side of a plan: the widening kernels and the f32 staging of a run of
/// [`STAGED`] columns of A's rows (Q, then O) and of its columns (K, then V).
struct Widening<T: Scalar> {
    widen: Kernel<AttentionWiden<T>>,
    narrow: Kernel<AttentionWiden<T>>,
    by_rows: CudaBuffer<f32>,
    by_cols: CudaBuffer<f32>,
}

/// What the backward adds: the SpMM over A^T, each entry's position among A^T's, the bias
/// gradient's sum over heads, and the dS kernel.
struct Backward<T: Scalar> {
    spmm_t: (PlanBase<f32>, spmm::SpmmFamily<f32>),
    to_transposed: CudaSlice<u32>,
    bias_sum: CudaBuffer<f32>,
    grad: Kernel<AttentionUnfusedGrad<T>>,
}

/// The steps of one plan and what passes between them, all in f32.
pub(crate) struct UnfusedAttention<T: Scalar> {
    desc: AttentionDesc,
    /// A's pattern and values (the bias) for the softmax.
    a: DeviceCsr<f32>,
    sddmm: (PlanBase<f32>, sddmm::SddmmFamily<f32>),
    spmm: (PlanBase<f32>, spmm::SpmmFamily<f32>),
    scores: CudaBuffer<f32>,
    softmax: Kernel<AttentionSoftmax<f32>>,
    /// `None` for f32 storage, whose operands the steps read and write in place.
    widening: Option<Widening<T>>,
    backward: Backward<T>,
}

/// A planned `unfused` attention.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &AttentionDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, UnfusedAttention<T>>> {
    let softmax = softmax_entry::<f32>()?;
    let grad = unfused_grad_entry::<T>()?;
    let widening = if T::DTYPE == DType::F32 {
        None
    } else {
        Some(widening_entries::<T>()?)
    };
    let info = PlanInfo::new(
        BackendKind::Cuda,
        OpKind::Attention,
        Format::Csr,
        desc.precision,
        Algorithm::Unfused,
        true,
    );
    let mut specs: Vec<&KernelSpec> = vec![softmax.spec(), grad.spec()];
    specs.extend(widening.iter().flatten().map(|e| e.spec()));
    let (base, mut clock) = PlanBase::new(device, a, info, &specs, clock)?;
    // A's values (the bias) as f32, which holds every f16 and bf16 value exactly.
    let values: Vec<f32> = a.values().iter().map(|v| v.to_f64() as f32).collect();
    // SAFETY: the pattern is `a`'s, which its CsrRef validated; only the values changed type.
    let a32 =
        unsafe { CsrRef::new_unchecked(a.rows(), a.cols(), a.row_ptr(), a.col_idx(), &values) };
    let sddmm = sddmm::plan(
        device,
        a32,
        &SddmmDesc::new(Precision::F32).format(Format::Csr),
        PlanClock::start(),
    )?
    .into_parts();
    let spmm = spmm::plan(
        device,
        a32,
        &a.row_stats(),
        &SpmmDesc::new(Precision::F32),
        PlanClock::start(),
    )?
    .into_parts();
    let transposed = Transposed::of(a32);
    let mut to_transposed = vec![0u32; a.nnz()];
    for (t, &e) in transposed.entry.iter().enumerate() {
        to_transposed[e] = to_u32("number of entries", t)?;
    }
    let zeros = vec![0f32; a.nnz()];
    // SAFETY: Transposed::of gives A^T's column offsets (a.cols() + 1 of them, ending at nnz)
    // and, per entry, its row of A: a valid CSR of a.cols() x a.rows() with sorted rows.
    let at = unsafe {
        CsrRef::new_unchecked(
            a.cols(),
            a.rows(),
            &transposed.col_ptr,
            &transposed.row,
            &zeros,
        )
    };
    let spmm_t = spmm::plan(
        device,
        at,
        &at.row_stats(),
        &SpmmDesc::new(Precision::F32),
        PlanClock::start(),
    )?
    .into_parts();
    if spmm_t.1.values().slots.is_some() || spmm.1.values().slots.is_some() {
        return Err(Error::internal(
            "the unfused attention expects its SpMMs to keep values in CSR order",
        ));
    }
    let backward = Backward {
        spmm_t,
        to_transposed: device.upload_converted(&to_transposed, 0, |&t| t)?,
        bias_sum: device.zeros(if desc.bias_from_values { a.nnz() } else { 0 })?,
        grad: device.kernel(&grad)?,
    };
    let widening = match widening {
        Some([widen, narrow]) => Some(Widening {
            widen: device.kernel(&widen)?,
            narrow: device.kernel(&narrow)?,
            by_rows: device.zeros(a.rows() * STAGED)?,
            by_cols: device.zeros(a.cols() * STAGED)?,
        }),
        None => None,
    };
    clock.lap(device, Phase::Kernels)?;
    let family = UnfusedAttention {
        desc: *desc,
        a: DeviceCsr::upload(device, a32)?,
        scores: device.zeros(a.nnz())?,
        softmax: device.kernel(&softmax)?,
        sddmm,
        spmm,
        widening,
        backward,
    };
    clock.lap(device, Phase::Transfer)?;
    let staging = (a.rows() + a.cols()) * STAGED * size_of::<f32>();
    let bytes = family.a.bytes()
        + family.sddmm.0.info.bytes
        + family.spmm.0.info.bytes
        + family.backward.spmm_t.0.info.bytes
        + DeviceMemory::len(&family.backward.bias_sum) * size_of::<f32>()
        + a.nnz() * (size_of::<f32>() + size_of::<u32>())
        + family.widening.as_ref().map_or(0, |_| staging);
    Ok(base.into_plan(clock, bytes, family))
}

/// Columns `first .. first + cols` of `b`, elements of `T`: the same rows and leading dimension,
/// the address moved to the first column.
fn columns<T>(b: &Bound, first: usize, cols: usize) -> Bound {
    let (_, col_stride) = b.strides();
    Bound {
        address: b.address + (first * col_stride as usize * size_of::<T>()) as u64,
        cols,
        ..*b
    }
}

/// The row-major `rows x cols` f32 matrix at the start of `buffer`.
fn staged(buffer: &CudaBuffer<f32>, rows: usize, cols: usize) -> Result<Bound> {
    Ok(Bound {
        address: buffer.address(),
        rows,
        cols,
        layout: Layout::RowMajor,
        ld: to_u32("staged columns", cols.max(1))?,
    })
}

/// Copies the 16-bit `t` into the f32 `wide` of its shape, or back, by `kernel`.
fn convert<T: Scalar>(kernel: &Kernel<AttentionWiden<T>>, t: &Bound, wide: &Bound) -> Result<()> {
    let (t_rs, t_cs) = t.strides();
    let params = AttentionWiden {
        rows: to_u32("attention operand rows", t.rows)?,
        cols: to_u32("staged columns", t.cols)?,
        t: t.output(),
        t_rs,
        t_cs,
        wide: wide.output(),
    };
    let items = (t.rows * t.cols) as u64;
    let config = LaunchConfig {
        grid_dim: (
            items.div_ceil(u64::from(BLOCK)).clamp(1, MAX_BLOCKS) as u32,
            1,
            1,
        ),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `t` is a bound operand (or a column view of one) spanning rows x cols at its
    // strides, and `wide` a staging buffer of at least rows x cols f32 (A's rows or columns
    // times STAGED); the kernel touches exactly those elements.
    unsafe { kernel.launch(config, &params) }
}

impl<T: Scalar> UnfusedAttention<T> {
    /// `c = alpha * (X Y^T) ∘ spy(A)` over X's and Y's columns `first .. first + k` (X with A's
    /// rows, Y with its columns), summed run by run of staged columns in 16-bit storage.
    fn sampled(
        &mut self,
        (x, y): (&Bound, &Bound),
        (first, k): (usize, usize),
        alpha: f32,
        c: Bound,
    ) -> Result<()> {
        let (base, sddmm) = (&self.sddmm.0, &mut self.sddmm.1);
        let mut step = |x: Bound, y: Bound, k: usize, beta: f32| -> Result<()> {
            let run = Run {
                ops: SddmmOperands {
                    k: to_u32("attention head width", k)?,
                    x,
                    y,
                    c,
                },
                alpha,
                beta,
            };
            sddmm.run(base, &run)
        };
        let Some(w) = &self.widening else {
            return step(
                columns::<f32>(x, first, k),
                columns::<f32>(y, first, k),
                k,
                0.0,
            );
        };
        // At least one step, so that heads of width 0 still get their products (all zero).
        for start in (0..k.max(1)).step_by(STAGED) {
            let cols = STAGED.min(k - start);
            let (xs, ys) = (
                staged(&w.by_rows, x.rows, cols)?,
                staged(&w.by_cols, y.rows, cols)?,
            );
            convert(&w.widen, &columns::<T>(x, first + start, cols), &xs)?;
            convert(&w.widen, &columns::<T>(y, first + start, cols), &ys)?;
            step(xs, ys, cols, if start == 0 { 0.0 } else { 1.0 })?;
        }
        Ok(())
    }

    /// C's columns `first .. first + n` = `alpha` M B's same columns, M being A with the values
    /// of the forward SpMM's buffer, or A^T (`transposed`) with those of the backward's.
    fn product(
        &mut self,
        transposed: bool,
        (b, c): (&Bound, &Bound),
        (first, n): (usize, usize),
        alpha: f32,
    ) -> Result<()> {
        let (base, spmm) = if transposed {
            (&self.backward.spmm_t.0, &mut self.backward.spmm_t.1)
        } else {
            (&self.spmm.0, &mut self.spmm.1)
        };
        // SpMM plans run with at least one row and one column; with alpha == 0 the output is 0.
        if c.rows == 0 || n == 0 {
            return Ok(());
        }
        let mut step = |b: Bound, c: Bound, n: usize| -> Result<()> {
            if alpha == 0.0 {
                return base.scale(&c, 0.0);
            }
            let run = Run {
                ops: SpmmOperands {
                    n: to_u32("attention head width", n)?,
                    b,
                    c,
                },
                alpha,
                beta: 0.0,
            };
            spmm.run(base, &run)
        };
        let Some(w) = &self.widening else {
            return step(columns::<f32>(b, first, n), columns::<f32>(c, first, n), n);
        };
        // M's columns are B's rows: A's columns, or A's rows for A^T.
        let (b_stage, c_stage) = if transposed {
            (&w.by_rows, &w.by_cols)
        } else {
            (&w.by_cols, &w.by_rows)
        };
        for start in (0..n).step_by(STAGED) {
            let cols = STAGED.min(n - start);
            let (bs, cs) = (
                staged(b_stage, b.rows, cols)?,
                staged(c_stage, c.rows, cols)?,
            );
            convert(&w.widen, &columns::<T>(b, first + start, cols), &bs)?;
            step(bs, cs, cols)?;
            convert(&w.narrow, &columns::<T>(c, first + start, cols), &cs)?;
        }
        Ok(())
    }

    /// The per-entry f32 buffer (scores, then dP in the backward) as an nnz x 1 column.
    fn scores_column(&self) -> Result<Bound> {
        let nnz = self.a.nnz as usize;
        Ok(Bound {
            address: self.scores.address(),
            rows: nnz,
            cols: 1,
            layout: Layout::ColMajor,
            ld: to_u32("number of entries", nnz.max(1))?,
        })
    }

    /// One warp per row of A: the launch of the row kernels.
    fn row_config(&self) -> LaunchConfig {
        LaunchConfig {
            // At most 2^32 rows of 32 lanes: 2^29 blocks, within grid.x's limit.
            grid_dim: (
                (u64::from(self.a.rows) * 32).div_ceil(u64::from(BLOCK)) as u32,
                1,
                1,
            ),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Head `h`'s weights, from its scaled scores (Q's and K's columns `first .. first + d`)
    /// plus the bias, into the forward SpMM's values.
    fn weights(
        &mut self,
        device: &Arc<Device>,
        (q, k): (&Bound, &Bound),
        (first, d): (usize, usize),
        shape: &AttentionShape,
    ) -> Result<()> {
        let scores = self.scores_column()?;
        self.sampled((q, k), (first, d), shape.scale as f32, scores)?;
        let params = AttentionSoftmax {
            rows: self.a.rows,
            row_ptr: Ptr::of(&self.a.row_ptr, device),
            values: Ptr::of_buffer(&self.a.values),
            scores: Ptr::of_buffer(&self.scores),
            weights: MutPtr::of_buffer(self.spmm.1.values().buffer),
            bias: u32::from(shape.bias),
        };
        // SAFETY: row_ptr holds rows + 1 offsets into nnz entries; values, scores and the SpMM's
        // values each hold nnz elements (all made from the same CSR).
        unsafe { self.softmax.launch(self.row_config(), &params) }
    }

    /// The backward SpMM over A^T takes the forward SpMM's values (P or dS), in A^T's order.
    fn transpose_values(&self) -> Result<()> {
        let (base, family) = (&self.backward.spmm_t.0, &self.backward.spmm_t.1);
        let target = Values {
            slots: Some(&self.backward.to_transposed),
            ..family.values()
        };
        base.update_from(target, self.spmm.1.values().buffer)
    }
}

impl<T: Scalar> AttentionKernels<T> for UnfusedAttention<T> {
    fn desc(&self) -> &AttentionDesc {
        &self.desc
    }

    fn run(
        &mut self,
        base: &PlanBase<T>,
        shape: &AttentionShape,
        ops: &AttentionOperands,
    ) -> Result<()> {
        let AttentionShape { heads, d, dv, .. } = *shape;
        for h in 0..heads {
            if self.a.nnz > 0 {
                self.weights(&base.device, (&ops.q, &ops.k), (h * d, d), shape)?;
            }
            self.product(false, (&ops.v, &ops.o), (h * dv, dv), 1.0)?;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        base: &PlanBase<T>,
        shape: &AttentionShape,
        ops: &AttentionGradOperands,
    ) -> Result<()> {
        let AttentionShape { heads, d, dv, .. } = *shape;
        let scale = shape.scale as f32;
        let nnz = self.a.nnz as usize;
        // dP takes the scores' buffer: the weights were made from it already.
        let dprobs = self.scores_column()?;
        for h in 0..heads {
            if nnz > 0 {
                self.weights(&base.device, (&ops.q, &ops.k), (h * d, d), shape)?;
                self.transpose_values()?;
            }
            self.product(true, (&ops.d_o, &ops.dv), (h * dv, dv), 1.0)?;
            if nnz > 0 {
                self.sampled((&ops.d_o, &ops.v), (h * dv, dv), 1.0, dprobs)?;
                let ((o_rs, o_cs), (do_rs, do_cs)) = (ops.o.strides(), ops.d_o.strides());
                let dbias = ops.dbias.as_ref();
                let params = AttentionUnfusedGrad {
                    rows: self.a.rows,
                    head: to_u32("attention heads", h)?,
                    heads: to_u32("attention heads", heads)?,
                    dv: to_u32("attention V head width", dv)?,
                    row_ptr: Ptr::of(&self.a.row_ptr, &base.device),
                    o: ops.o.input(),
                    o_rs,
                    o_cs,
                    d_o: ops.d_o.input(),
                    do_rs,
                    do_cs,
                    probs: MutPtr::of_buffer(self.spmm.1.values().buffer),
                    dprobs: Ptr::of_buffer(&self.scores),
                    bias_sum: MutPtr::of_buffer(&self.backward.bias_sum),
                    dbias: dbias.map_or(MutPtr::NULL, Bound::output),
                    dbias_inc: dbias.map_or(1, Bound::increment),
                    bias: u32::from(shape.bias),
                };
                // SAFETY: row_ptr holds rows + 1 offsets into nnz entries; probs and dprobs hold
                // nnz values, bias_sum nnz when the plan has a bias (the only case it is used)
                // and dbias nnz elements at its increment; O and dO span rows x heads*dv at
                // their strides (bound and checked against the shape).
                unsafe { self.backward.grad.launch(self.row_config(), &params)? };
            }
            self.product(false, (&ops.k, &ops.dq), (h * d, d), scale)?;
            if nnz > 0 {
                self.transpose_values()?;
            }
            self.product(true, (&ops.q, &ops.dk), (h * d, d), scale)?;
        }
        Ok(())
    }
}
