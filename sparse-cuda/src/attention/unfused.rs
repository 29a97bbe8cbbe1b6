//! The `unfused` attention pipeline, the baseline the fused kernel is measured against: per
//! head, the CSR SDDMM (`sddmm.rs`) writes the scaled scores, `attention_softmax` turns each
//! row's scores (plus the bias) into weights written where the CSR SpMM (`spmm.rs`) reads A's
//! values, and that SpMM multiplies them with the head's V columns into O. The steps are the
//! other families' own plans, run on views of the operands' columns. Scores and weights are
//! stored in the storage type, so only f32 is offered: rounding them to f16 would lose more
//! than the f32 softmax the precision promises.

use std::sync::Arc;

use cudarc::driver::LaunchConfig;
use sparse_core::{
    Algorithm, AttentionDesc, AttentionShape, BackendKind, CsrRef, Error, Format, Layout, OpKind,
    PlanInfo, Result, Scalar, SddmmDesc, SpIndex, SpmmDesc,
};

use super::{softmax_entry, AttentionSoftmax, BLOCK};
use crate::device::{CudaBuffer, Device};
use crate::kernel::{Kernel, MutPtr, Ptr};
use crate::matrix::DeviceCsr;
use crate::operand::{
    to_u32, AttentionGradOperands, AttentionOperands, Bound, Run, SddmmOperands, SpmmOperands,
};
use crate::plan::{
    AttentionKernels, CudaPlan, Kernels, Phase, PlanBase, PlanClock, SddmmKernels, SpmmKernels,
};
use crate::{sddmm, spmm};

/// The steps of one plan and what passes between them.
pub(crate) struct UnfusedAttention<T: Scalar> {
    desc: AttentionDesc,
    /// A's pattern and values (the bias) for the softmax.
    a: DeviceCsr<T>,
    sddmm: (PlanBase<T>, sddmm::SddmmFamily<T>),
    spmm: (PlanBase<T>, spmm::SpmmFamily<T>),
    scores: CudaBuffer<T>,
    softmax: Kernel<AttentionSoftmax<T>>,
}

/// A planned `unfused` attention.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &AttentionDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, UnfusedAttention<T>>> {
    let softmax = softmax_entry::<T>()?;
    let info = PlanInfo::new(
        BackendKind::Cuda,
        OpKind::Attention,
        Format::Csr,
        desc.precision,
        Algorithm::Unfused,
        true,
    );
    let (base, mut clock) = PlanBase::new(device, a, info, &[softmax.spec()], clock)?;
    let step = |format| SddmmDesc::new(desc.precision).format(format);
    let sddmm = sddmm::plan(device, a, &step(Format::Csr), PlanClock::start())?.into_parts();
    let spmm = spmm::plan(
        device,
        a,
        &a.row_stats(),
        &SpmmDesc::new(desc.precision),
        PlanClock::start(),
    )?
    .into_parts();
    clock.lap(device, Phase::Kernels)?;
    let family = UnfusedAttention {
        desc: *desc,
        a: DeviceCsr::upload(device, a)?,
        scores: device.zeros(a.nnz())?,
        softmax: device.kernel(&softmax)?,
        sddmm,
        spmm,
    };
    clock.lap(device, Phase::Transfer)?;
    let bytes = family.a.bytes()
        + family.sddmm.0.info.bytes
        + family.spmm.0.info.bytes
        + a.nnz() * size_of::<T>();
    Ok(base.into_plan(clock, bytes, family))
}

/// Columns `first .. first + cols` of `b`: the same rows and leading dimension, the address
/// moved to the first column.
fn columns<T>(b: &Bound, first: usize, cols: usize) -> Bound {
    let (_, col_stride) = b.strides();
    Bound {
        address: b.address + (first * col_stride as usize * size_of::<T>()) as u64,
        cols,
        ..*b
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
        let weights = MutPtr::of_buffer(self.spmm.1.values().buffer);
        let (sddmm_base, sddmm) = (&self.sddmm.0, &mut self.sddmm.1);
        let (spmm_base, spmm) = (&self.spmm.0, &mut self.spmm.1);
        let acc = |v: f64| <T::Acc as sparse_core::Accumulator>::from_f64(v);
        let rows = self.a.rows;
        for h in 0..heads {
            if nnz > 0 {
                let run = Run {
                    ops: SddmmOperands {
                        k: to_u32("attention head width", d)?,
                        x: columns::<T>(&ops.q, h * d, d),
                        y: columns::<T>(&ops.k, h * d, d),
                        c: scores,
                    },
                    alpha: acc(shape.scale),
                    beta: acc(0.0),
                };
                sddmm.run(sddmm_base, &run)?;
                let params = AttentionSoftmax {
                    rows,
                    row_ptr: Ptr::of(&self.a.row_ptr, &base.device),
                    values: Ptr::of_buffer(&self.a.values),
                    scores: Ptr::of_buffer(&self.scores),
                    weights,
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
            let run = Run {
                ops: SpmmOperands {
                    n: to_u32("attention V head width", dv)?,
                    b: columns::<T>(&ops.v, h * dv, dv),
                    c: columns::<T>(&ops.o, h * dv, dv),
                },
                alpha: acc(1.0),
                beta: acc(0.0),
            };
            spmm.run(spmm_base, &run)?;
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
