//! CSR SDDMM plans on CUDA cores, `C = alpha*(X*Y^T) ∘ spy(S) + beta*C` (`sddmm.cu` has the
//! kernels).
//!
//! The `vector` algorithm (`auto` picks it or RoDe, see `rode.rs`): a sub-warp per row segment
//! of at most [`SEGMENT`] entries, listed at plan time, so long rows are spread over many
//! sub-warps while every output is still written once (no atomics: deterministic). Lanes run
//! across K with V = 4, 2 or 1 values each, the widest V dividing K and the leading dimensions
//! of X and Y when both are row-major (V = 1 otherwise); W lanes, K / V rounded up to a power of
//! two in 4..=32 (8 lanes for K = 32, 32 for K >= 128 with V = 4). The variant is picked at
//! every run.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{Algorithm, CsrRef, Layout, Result, Scalar, SddmmDesc, SpIndex};

use crate::device::Device;
use crate::kernel::{c_type, kernel_params, Entry, KernelParams, KernelSource, KernelSpec, Ptr};
use crate::matrix::DeviceCsr;
use crate::operand::{to_u32, Bound, Run, SddmmDense, SddmmOperands};
use crate::plan::{CudaPlan, Kernels, Phase, PlanBase, PlanClock, SddmmKernels, Values, WidthDesc};
use crate::spmm::{subwarp_lanes, vector_values, Variants};

/// Threads per block (`SDDMM_BLOCK`).
const BLOCK: u32 = 256;
/// Entries of one row a sub-warp takes at most: long enough to amortise loading the X row
/// into registers, short enough that a long row is shared by many sub-warps.
const SEGMENT: usize = 256;

kernel_params! {
    /// `sddmm_csr<W, V>`: segment s covers entries `seg_start[s] .. seg_start[s + 1]` of row
    /// `seg_row[s]`.
    pub(crate) struct SddmmCsr<T> {
        segments: u32,
        seg_row: ptr(u32),
        seg_start: ptr(u32),
        col_idx: ptr(u32),
        s_values: ptr(T),
        scale_by_values: u32,
        dense: sub(SddmmDense),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "sddmm",
    code: include_str!("../kernels/sddmm.cu"),
    params: &[
        <SddmmDense<f32> as KernelParams>::C_DECL,
        <SddmmCsr<f32> as KernelParams>::C_DECL,
    ],
    defines: &[("SDDMM_BLOCK", BLOCK)],
};

fn entry<T: Scalar>(lanes: u32, values: u32) -> Result<Entry<SddmmCsr<T>>> {
    Entry::new(&SOURCE, "sddmm_csr", &[&c_type(T::DTYPE)?, &lanes, &values])
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    Ok(Variants::entries(entry::<T>)?
        .iter()
        .map(|e| e.spec().clone())
        .collect())
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = specs_of::<f64>()?;
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    Ok(specs)
}

/// The leading dimension of a row-major operand (whose rows are contiguous).
fn row_major_ld(d: &Bound) -> Option<usize> {
    (d.layout == Layout::RowMajor).then_some(d.ld as usize)
}

/// Segment rows and starts: segment s covers entries `start[s] .. start[s + 1]` of row
/// `row[s]`. Both end with a sentinel (row = rows, start = nnz), so neither is empty.
fn segments<T, I: SpIndex>(s: CsrRef<'_, T, I>) -> Result<(Vec<u32>, Vec<u32>)> {
    let (mut rows, mut starts) = (Vec::new(), Vec::new());
    for i in 0..s.rows() {
        for start in s.row_range(i).step_by(SEGMENT) {
            rows.push(to_u32("row index", i)?);
            starts.push(to_u32("entry index", start)?);
        }
    }
    rows.push(to_u32("number of rows", s.rows())?);
    starts.push(to_u32("number of entries", s.nnz())?);
    Ok((rows, starts))
}

/// The CSR SDDMM kernels of one plan and the pattern they read.
pub(crate) struct SddmmFamily<T: Scalar> {
    s: DeviceCsr<T>,
    segments: u32,
    seg_row: CudaSlice<u32>,
    seg_start: CudaSlice<u32>,
    kernels: Variants<SddmmCsr<T>>,
    scale_by_values: bool,
}

/// A planned `vector` CSR SDDMM.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    s: CsrRef<'_, T, I>,
    desc: &SddmmDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, SddmmFamily<T>>> {
    let entries = Variants::entries(entry::<T>)?;
    let specs: Vec<&KernelSpec> = entries.iter().map(|e| e.spec()).collect();
    let info = desc.info(Algorithm::Vector);
    let (base, mut clock) = PlanBase::new(device, s, info, &specs, clock)?;
    let (rows, starts) = segments(s)?;
    clock.lap(device, Phase::Host)?;
    let family = SddmmFamily {
        s: DeviceCsr::upload(device, s)?,
        segments: to_u32("number of SDDMM segments", rows.len() - 1)?,
        seg_row: device.upload_converted(&rows, 0, |&r| r)?,
        seg_start: device.upload_converted(&starts, 0, |&e| e)?,
        kernels: Variants::load(device, &entries)?,
        scale_by_values: desc.scale_by_values,
    };
    clock.lap(device, Phase::Transfer)?;
    let bytes = family.s.bytes() + (rows.len() + starts.len()) * size_of::<u32>();
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> SddmmKernels<T> for SddmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        let ops = &run.ops;
        let values = vector_values(
            ops.k as usize,
            &[row_major_ld(&ops.x), row_major_ld(&ops.y)],
        );
        let lanes = subwarp_lanes(ops.k as usize, values);
        let params = SddmmCsr {
            segments: self.segments,
            seg_row: Ptr::of(&self.seg_row, &base.device),
            seg_start: Ptr::of(&self.seg_start, &base.device),
            col_idx: Ptr::of(&self.s.col_idx, &base.device),
            s_values: Ptr::of_buffer(&self.s.values),
            scale_by_values: u32::from(self.scale_by_values),
            dense: SddmmDense::new(run),
        };
        let threads = u64::from(self.segments) * u64::from(lanes);
        let config = LaunchConfig {
            // At most nnz < 2^32 segments of 32 lanes: 2^29 blocks, within grid.x's limit.
            grid_dim: (threads.div_ceil(u64::from(BLOCK)) as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the segments partition S's entries by row; S is canonical with columns < cols
        // = Y's rows; X spans rows x k, Y cols x k and C nnz elements at their strides (bound
        // operands); V > 1 is chosen only when V divides k and both row-major leading
        // dimensions, so vector loads (from allocations aligned to 256 bytes) are aligned and
        // inside the rows.
        unsafe { self.kernels.get(lanes, values).launch(config, &params) }
    }
}

impl<T: Scalar> Kernels<T> for SddmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values::csr_order(&self.s.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cut_long_rows_and_skip_empty_ones() {
        let lengths = [0usize, 3, 2 * SEGMENT + 10, 0];
        let mut row_ptr = vec![0u32];
        let mut col_idx = Vec::new();
        for &len in &lengths {
            col_idx.extend(0..len as u32);
            row_ptr.push(col_idx.len() as u32);
        }
        let values = vec![1.0f32; col_idx.len()];
        let s = CsrRef::try_new(lengths.len(), 1024, &row_ptr, &col_idx, &values).unwrap();
        let (rows, starts) = segments(s).unwrap();
        let seg = SEGMENT as u32;
        assert_eq!(rows, [1, 2, 2, 2, 4]);
        assert_eq!(starts, [0, 3, 3 + seg, 3 + 2 * seg, 3 + 2 * seg + 10]);
    }
}
