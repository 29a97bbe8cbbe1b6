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

use std::sync::Arc;

use cudarc::driver::LaunchConfig;
use sparse_core::{
    Algorithm, AttentionDesc, AttentionShape, BackendKind, CsrRef, DType, Error, Format, Layout,
    OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SpIndex, SpmmDesc,
};

use super::{softmax_entry, widening_entries, AttentionSoftmax, AttentionWiden, BLOCK};
use crate::device::{CudaBuffer, Device};
use crate::kernel::{Kernel, KernelSpec, MutPtr, Ptr};
use crate::matrix::DeviceCsr;
use crate::operand::{
    to_u32, AttentionGradOperands, AttentionOperands, Bound, Run, SddmmOperands, SpmmOperands,
};
use crate::plan::{
    AttentionKernels, CudaPlan, Kernels, Phase, PlanBase, PlanClock, SddmmKernels, SpmmKernels,
};
use crate::{sddmm, spmm};

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
}

/// A planned `unfused` attention.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &AttentionDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, UnfusedAttention<T>>> {
    let softmax = softmax_entry::<f32>()?;
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
    let mut specs: Vec<&KernelSpec> = vec![softmax.spec()];
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
    };
    clock.lap(device, Phase::Transfer)?;
    let staging = (a.rows() + a.cols()) * STAGED * size_of::<f32>();
    let bytes = family.a.bytes()
        + family.sddmm.0.info.bytes
        + family.spmm.0.info.bytes
        + a.nnz() * size_of::<f32>()
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
    /// The scaled scores of head `h`: Q's and K's columns `first .. first + d` into `scores`.
    fn scores(
        &mut self,
        ops: &AttentionOperands,
        (first, d): (usize, usize),
        scale: f32,
        scores: Bound,
    ) -> Result<()> {
        let (base, sddmm) = (&self.sddmm.0, &mut self.sddmm.1);
        let mut step = |x: Bound, y: Bound, k: usize, beta: f32| -> Result<()> {
            let run = Run {
                ops: SddmmOperands {
                    k: to_u32("attention head width", k)?,
                    x,
                    y,
                    c: scores,
                },
                alpha: scale,
                beta,
            };
            sddmm.run(base, &run)
        };
        let Some(w) = &self.widening else {
            return step(
                columns::<f32>(&ops.q, first, d),
                columns::<f32>(&ops.k, first, d),
                d,
                0.0,
            );
        };
        // At least one step, so that heads of width 0 still get their scores (all zero).
        for start in (0..d.max(1)).step_by(STAGED) {
            let k = STAGED.min(d - start);
            let (q, kk) = (
                staged(&w.by_rows, ops.q.rows, k)?,
                staged(&w.by_cols, ops.k.rows, k)?,
            );
            convert(&w.widen, &columns::<T>(&ops.q, first + start, k), &q)?;
            convert(&w.widen, &columns::<T>(&ops.k, first + start, k), &kk)?;
            step(q, kk, k, if start == 0 { 0.0 } else { 1.0 })?;
        }
        Ok(())
    }

    /// O's columns `first .. first + dv` from the weights and V's same columns.
    fn weighted(&mut self, ops: &AttentionOperands, (first, dv): (usize, usize)) -> Result<()> {
        let (base, spmm) = (&self.spmm.0, &mut self.spmm.1);
        let mut step = |b: Bound, c: Bound, n: usize| -> Result<()> {
            let run = Run {
                ops: SpmmOperands {
                    n: to_u32("attention V head width", n)?,
                    b,
                    c,
                },
                alpha: 1.0,
                beta: 0.0,
            };
            spmm.run(base, &run)
        };
        let Some(w) = &self.widening else {
            return step(
                columns::<f32>(&ops.v, first, dv),
                columns::<f32>(&ops.o, first, dv),
                dv,
            );
        };
        for start in (0..dv).step_by(STAGED) {
            let n = STAGED.min(dv - start);
            let (v, o) = (
                staged(&w.by_cols, ops.v.rows, n)?,
                staged(&w.by_rows, ops.o.rows, n)?,
            );
            convert(&w.widen, &columns::<T>(&ops.v, first + start, n), &v)?;
            step(v, o, n)?;
            convert(&w.narrow, &columns::<T>(&ops.o, first + start, n), &o)?;
        }
        Ok(())
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
        let nnz = self.a.nnz as usize;
        let scores = Bound {
            address: self.scores.address(),
            rows: nnz,
            cols: 1,
            layout: Layout::ColMajor,
            ld: to_u32("number of entries", nnz.max(1))?,
        };
        let rows = self.a.rows;
        for h in 0..heads {
            if nnz > 0 {
                self.scores(ops, (h * d, d), shape.scale as f32, scores)?;
                let params = AttentionSoftmax {
                    rows,
                    row_ptr: Ptr::of(&self.a.row_ptr, &base.device),
                    values: Ptr::of_buffer(&self.a.values),
                    scores: Ptr::of_buffer(&self.scores),
                    weights: MutPtr::of_buffer(self.spmm.1.values().buffer),
                    bias: u32::from(shape.bias),
                };
                let config = LaunchConfig {
                    // At most 2^32 rows of 32 lanes: 2^29 blocks, within grid.x's limit.
                    grid_dim: (
                        (u64::from(rows) * 32).div_ceil(u64::from(BLOCK)) as u32,
                        1,
                        1,
                    ),
                    block_dim: (BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: row_ptr holds rows + 1 offsets into nnz entries; values, scores and
                // the SpMM's values each hold nnz elements (all made from the same CSR).
                unsafe { self.softmax.launch(config, &params)? };
            }
            self.weighted(ops, (h * dv, dv))?;
        }
        Ok(())
    }

    fn backward(
        &mut self,
        base: &PlanBase<T>,
        _shape: &AttentionShape,
        _ops: &AttentionGradOperands,
    ) -> Result<()> {
        let info = &base.info;
        Err(Error::Unsupported {
            op: info.op,
            format: info.format,
            precision: info.precision,
            algorithm: Some(info.algorithm),
            backend: info.backend,
            supported: "the attention backward of the fused algorithm".into(),
        })
    }
}
