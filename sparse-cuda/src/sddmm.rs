//! CSR SDDMM plans on CUDA cores, `C = alpha*(X*Y^T) ∘ spy(S) + beta*C`.
//!
//! The `vector` algorithm (`auto` picks it or RoDe, see `rode.rs`): a sub-warp per row segment
//! of at most [`SEGMENT`] entries, listed at plan time, so long rows are spread over many
//! sub-warps while every output is still written once (no atomics: deterministic). Lanes run
//! across K with V = 4, 2 or 1 values each, the widest V dividing K and the leading dimensions
//! of X and Y when both are row-major (V = 1 otherwise); W lanes, K / V rounded up to a power of
//! two in 4..=32 (8 lanes for K = 32, 32 for K >= 128 with V = 4). The variant is picked at
//! every run.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use sparse_core::{
    Accumulator, Algorithm, BackendKind, CsrRef, DenseMut, DenseRef, Error, Format, Layout, OpKind,
    PlanInfo, Precision, Result, Scalar, SddmmPlan, SpIndex,
};

use crate::compile::sources;
use crate::device::{driver_error, Device};
use crate::matrix::DeviceCsr;
use crate::operand::{input, output, sddmm_inner, strides, suffix, to_u32, AccArg};
use crate::spmm::{scale_dense, Variants};

const BLOCK: u32 = 256;
/// Entries of one row a sub-warp takes at most: long enough to amortise loading the X row
/// into registers, short enough that a long row is shared by many sub-warps.
const SEGMENT: usize = 256;

/// The leading dimension of a row-major operand (whose rows are contiguous).
fn row_major_ld<T>(d: &DenseRef<'_, T>) -> Option<usize> {
    (d.layout() == Layout::RowMajor).then(|| d.ld())
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

pub struct CudaSddmmPlan<T> {
    device: Arc<Device>,
    s: DeviceCsr<T>,
    segments: u32,
    seg_row: CudaSlice<u32>,
    seg_start: CudaSlice<u32>,
    kernels: Variants,
    scale: CudaFunction,
    scale_by_values: bool,
    info: PlanInfo,
}

impl<T: Scalar> CudaSddmmPlan<T> {
    pub fn new<I: SpIndex>(
        device: &Arc<Device>,
        s: CsrRef<'_, T, I>,
        precision: Precision,
        algorithm: Algorithm,
        scale_by_values: bool,
    ) -> Result<Self> {
        let sfx = suffix(T::DTYPE)
            .ok_or_else(|| Error::invalid(format!("no CUDA SDDMM kernel for {}", T::DTYPE)))?;
        let algorithm = match algorithm {
            Algorithm::Auto | Algorithm::Vector => Algorithm::Vector,
            other => {
                return Err(Error::invalid(format!(
                    "the cuda backend has no {other} SDDMM for csr"
                )))
            }
        };
        let dev = DeviceCsr::upload(device, s)?;
        let (rows, starts) = segments(s)?;
        let upload = |host: &[u32]| {
            device
                .stream
                .clone_htod(host)
                .map_err(|e| driver_error("copying SDDMM segments to the device", e))
        };
        let (seg_row, seg_start) = (upload(&rows)?, upload(&starts)?);
        let kernels = Variants::load(device, sources::SDDMM, |w, v| {
            format!("sddmm_csr_{sfx}_w{w}_v{v}")
        })?;
        // alpha == 0 leaves beta*C: C is a dense nnz x 1 matrix, scaled as SpMM scales its C.
        let scale = device.function(sources::SPMM, &format!("scale_matrix_{sfx}"))?;
        let info = PlanInfo {
            backend: BackendKind::Cuda,
            op: OpKind::Sddmm,
            format: Format::Csr,
            precision,
            algorithm,
            bytes: dev.bytes() + (rows.len() + starts.len()) * size_of::<u32>(),
            deterministic: true,
        };
        Ok(CudaSddmmPlan {
            device: device.clone(),
            s: dev,
            segments: to_u32("number of SDDMM segments", rows.len() - 1)?,
            seg_row,
            seg_start,
            kernels,
            scale,
            scale_by_values,
            info,
        })
    }
}

impl<T: Scalar> SddmmPlan<T> for CudaSddmmPlan<T> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let s = &self.s;
        let k = sddmm_inner(
            (s.rows as usize, s.cols as usize, s.nnz as usize),
            &x,
            &y,
            &c,
        )?;
        let c_layout = c.layout();
        let c_ld = to_u32("sddmm C leading dimension", c.ld())?;
        let ((x_rs, x_cs), (y_rs, y_cs)) =
            (strides(x.layout(), x.ld()), strides(y.layout(), y.ld()));
        let (c_inc, _) = strides(c.layout(), c.ld());
        let xb = input(&x, &self.device, "sddmm X")?;
        let yb = input(&y, &self.device, "sddmm Y")?;
        let cb = output(&mut c, &self.device, "sddmm C")?;
        if s.nnz == 0 {
            return Ok(());
        }
        let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
        let (acc_alpha, acc_beta) = (AccArg::of::<T>(alpha), AccArg::of::<T>(beta));
        let stream = &self.device.stream;
        if alpha == 0.0 {
            return scale_dense(
                &self.device,
                &self.scale,
                (s.nnz, 1),
                c_layout,
                c_ld,
                &mut cb.bytes,
                acc_beta,
            );
        }
        let values = Variants::values(k as usize, &[row_major_ld(&x), row_major_ld(&y)]);
        let lanes = Variants::lanes(k as usize, values);
        let function = self.kernels.get(lanes, values);
        let scale_by_values = u32::from(self.scale_by_values);
        let mut args = stream.launch_builder(function);
        args.arg(&self.segments)
            .arg(&self.seg_row)
            .arg(&self.seg_start)
            .arg(&s.col_idx)
            .arg(&s.values.bytes)
            .arg(&scale_by_values)
            .arg(&k)
            .arg(&xb.bytes)
            .arg(&x_rs)
            .arg(&x_cs)
            .arg(&yb.bytes)
            .arg(&y_rs)
            .arg(&y_cs)
            .arg(&mut cb.bytes)
            .arg(&c_inc);
        acc_alpha.push(&mut args);
        acc_beta.push(&mut args);
        let threads = u64::from(self.segments) * u64::from(lanes);
        let config = LaunchConfig {
            // At most nnz < 2^32 segments of 32 lanes: 2^29 blocks, within grid.x's limit.
            grid_dim: (threads.div_ceil(u64::from(BLOCK)) as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: arguments match the kernel; the segments partition S's entries by row; S is
        // canonical with columns < cols = Y's rows; X spans rows x k, Y cols x k and C nnz
        // elements at their strides (checked by the Dense views); V > 1 is chosen only when V
        // divides k and both row-major leading dimensions, so vector loads (from allocations
        // aligned to 256 bytes) are aligned and inside the rows.
        unsafe { args.launch(config) }.map_err(|e| driver_error("sddmm", e))?;
        Ok(())
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
