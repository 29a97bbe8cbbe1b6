//! CSR SpMM plans on CUDA cores, `C = alpha*A*B + beta*C`.
//!
//! The `vector` algorithm (`auto` picks it or RoDe, see `rode.rs`): a sub-warp per row of A.
//! The kernel variant is picked at every run from B's layout, leading dimension and width N
//! (see `spmm.cu`):
//! - row-major B: lanes across N with V = 4, 2 or 1 values each, the widest V dividing both
//!   B's leading dimension and N (so each lane reads its B values with one vector load); W lanes
//!   per row, N / V rounded up to a power of two in 4..=32, so a tile of W*V columns spans N
//!   where it can; wider N is cut into tiles over grid.y.
//! - column-major B: lanes across the row's entries, W the mean row length rounded to a power
//!   of two in 4..=32 (fixed at plan time), each lane keeping 8 columns of partial sums.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use sparse_core::{
    Accumulator, Algorithm, BackendKind, CsrRef, DenseMut, DenseRef, Error, Format, Layout, OpKind,
    PlanInfo, Precision, Result, Scalar, SpIndex, SpmmPlan,
};

use crate::compile::{sources, KernelSource};
use crate::device::{driver_error, Device};
use crate::matrix::DeviceCsr;
use crate::operand::{input, output, spmm_width, strides, suffix, to_u32, AccArg};

const BLOCK: u32 = 256;
/// Columns of C one sub-warp of the column-major kernel computes (`COLMAJOR_COLS` in spmm.cu).
const COLMAJOR_COLS: u32 = 8;
/// The largest grid.y; the kernels stride over the column tiles beyond it.
const MAX_GRID_Y: u32 = 65_535;

/// The kernels of one file instantiated for every sub-warp width W and values per lane V (the
/// row-major SpMM kernels, the SDDMM kernels), looked up once at plan time.
pub(crate) struct Variants(Vec<CudaFunction>);

impl Variants {
    /// Sub-warp widths and values per lane the kernels are instantiated for.
    const SUBWARPS: [u32; 4] = [4, 8, 16, 32];
    const VECTORS: [u32; 3] = [1, 2, 4];

    /// Loads `name(w, v)` from `source` for every instantiated pair.
    pub(crate) fn load(
        device: &Device,
        source: KernelSource,
        name: impl Fn(u32, u32) -> String,
    ) -> Result<Self> {
        let mut functions = Vec::with_capacity(Self::SUBWARPS.len() * Self::VECTORS.len());
        for w in Self::SUBWARPS {
            for v in Self::VECTORS {
                functions.push(device.function(source, &name(w, v))?);
            }
        }
        Ok(Variants(functions))
    }

    /// The widest V that divides `len` and the leading dimension of every operand read along
    /// it (`None` for an operand whose elements along it are not contiguous, which forces 1),
    /// so each lane's V elements are one aligned vector, all inside or all outside the row.
    pub(crate) fn values(len: usize, lds: &[Option<usize>]) -> u32 {
        Self::VECTORS
            .iter()
            .rev()
            .copied()
            .find(|&v| {
                let v = v as usize;
                len % v == 0 && lds.iter().all(|ld| ld.is_some_and(|ld| ld % v == 0))
            })
            .unwrap_or(1)
    }

    /// W for rows of `len` elements taken V at a time: enough lanes to span the row where the
    /// widths allow.
    pub(crate) fn lanes(len: usize, values: u32) -> u32 {
        len.div_ceil(values as usize)
            .next_power_of_two()
            .clamp(4, 32) as u32
    }

    pub(crate) fn get(&self, lanes: u32, values: u32) -> &CudaFunction {
        let position = |list: &[u32], x: u32| {
            list.iter()
                .position(|&y| y == x)
                .expect("an instantiated width")
        };
        &self.0[position(&Self::SUBWARPS, lanes) * Self::VECTORS.len()
            + position(&Self::VECTORS, values)]
    }
}

/// Lanes per row of the column-major kernel: the mean row length, as SpMV's vector kernel.
fn col_major_lanes(mean: f64) -> u32 {
    let w = mean.max(1.0).log2().round().clamp(2.0, 5.0) as u32;
    1 << w
}

/// `rows` rows of `lanes` lanes each over grid.x, and `tiles` column tiles over grid.y.
fn launch_config(rows: u32, lanes: u32, tiles: u32) -> LaunchConfig {
    let threads = u64::from(rows) * u64::from(lanes);
    LaunchConfig {
        // At most 2^32 * 32 / 256 = 2^29 blocks, within grid.x's limit.
        grid_dim: (
            threads.div_ceil(u64::from(BLOCK)) as u32,
            tiles.min(MAX_GRID_Y),
            1,
        ),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// `out = beta*out` over a dense rows x cols operand with leading dimension `ld` (zeros when
/// beta == 0, never reading it): what `alpha == 0` leaves. `scale` is `scale_matrix` of spmm.cu.
pub(crate) fn scale_dense(
    device: &Device,
    scale: &CudaFunction,
    (rows, cols): (u32, u32),
    layout: Layout,
    ld: u32,
    out: &mut CudaSlice<u8>,
    beta: AccArg,
) -> Result<()> {
    // The contiguous dimension runs over grid.x, the other over grid.y.
    let (inner, outer) = match layout {
        Layout::RowMajor => (cols, rows),
        Layout::ColMajor => (rows, cols),
    };
    if inner == 0 || outer == 0 {
        return Ok(());
    }
    let mut args = device.stream.launch_builder(scale);
    args.arg(&inner).arg(&outer).arg(out).arg(&ld);
    beta.push(&mut args);
    // SAFETY: `out` spans `outer` runs of `inner` elements at stride ld (checked by the caller's
    // DenseMut); the grid covers inner on x and strides over outer on y.
    unsafe { args.launch(launch_config(inner, 1, outer)) }
        .map_err(|e| driver_error("scale_matrix", e))?;
    Ok(())
}

pub struct CudaSpmmPlan<T> {
    device: Arc<Device>,
    a: DeviceCsr<T>,
    row_major: Variants,
    col_major: CudaFunction,
    col_major_lanes: u32,
    scale: CudaFunction,
    info: PlanInfo,
}

impl<T: Scalar> CudaSpmmPlan<T> {
    pub fn new<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        precision: Precision,
        algorithm: Algorithm,
    ) -> Result<Self> {
        let sfx = suffix(T::DTYPE)
            .ok_or_else(|| Error::invalid(format!("no CUDA SpMM kernel for {}", T::DTYPE)))?;
        let algorithm = match algorithm {
            Algorithm::Auto | Algorithm::Vector => Algorithm::Vector,
            other => {
                return Err(Error::invalid(format!(
                    "the cuda backend has no {other} SpMM for csr"
                )))
            }
        };
        let col_major_lanes = col_major_lanes(a.row_stats().mean);
        let dev = DeviceCsr::upload(device, a)?;
        let row_major = Variants::load(device, sources::SPMM, |w, v| {
            format!("spmm_csr_rowmajor_{sfx}_w{w}_v{v}")
        })?;
        let col_major = device.function(
            sources::SPMM,
            &format!("spmm_csr_colmajor_{sfx}_w{col_major_lanes}"),
        )?;
        let scale = device.function(sources::SPMM, &format!("scale_matrix_{sfx}"))?;
        let info = PlanInfo {
            backend: BackendKind::Cuda,
            op: OpKind::Spmm,
            format: Format::Csr,
            precision,
            algorithm,
            bytes: dev.bytes(),
            deterministic: true,
        };
        Ok(CudaSpmmPlan {
            device: device.clone(),
            a: dev,
            row_major,
            col_major,
            col_major_lanes,
            scale,
            info,
        })
    }
}

impl<T: Scalar> SpmmPlan<T> for CudaSpmmPlan<T> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let a = &self.a;
        let n = spmm_width((a.rows as usize, a.cols as usize), &b, &c)?;
        let width = n as usize;
        let c_layout = c.layout();
        let c_ld = to_u32("spmm C leading dimension", c.ld())?;
        let ((b_rs, b_cs), (c_rs, c_cs)) =
            (strides(b.layout(), b.ld()), strides(c.layout(), c.ld()));
        let bb = input(&b, &self.device, "spmm B")?;
        let cb = output(&mut c, &self.device, "spmm C")?;
        if a.rows == 0 || n == 0 {
            return Ok(());
        }
        let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
        let (acc_alpha, acc_beta) = (AccArg::of::<T>(alpha), AccArg::of::<T>(beta));
        let stream = &self.device.stream;
        if alpha == 0.0 {
            return scale_dense(
                &self.device,
                &self.scale,
                (a.rows, n),
                c_layout,
                c_ld,
                &mut cb.bytes,
                acc_beta,
            );
        }
        let (function, config) = match b.layout() {
            Layout::RowMajor => {
                let values = Variants::values(width, &[Some(b.ld())]);
                let lanes = Variants::lanes(width, values);
                (
                    self.row_major.get(lanes, values),
                    launch_config(a.rows, lanes, n.div_ceil(lanes * values)),
                )
            }
            Layout::ColMajor => (
                &self.col_major,
                launch_config(a.rows, self.col_major_lanes, n.div_ceil(COLMAJOR_COLS)),
            ),
        };
        let mut args = stream.launch_builder(function);
        args.arg(&a.rows)
            .arg(&n)
            .arg(&a.row_ptr)
            .arg(&a.col_idx)
            .arg(&a.values.bytes)
            .arg(&bb.bytes)
            .arg(&b_rs)
            .arg(&b_cs)
            .arg(&mut cb.bytes)
            .arg(&c_rs)
            .arg(&c_cs);
        acc_alpha.push(&mut args);
        acc_beta.push(&mut args);
        // SAFETY: arguments match the kernel; the CSR is canonical with columns < cols = B's
        // rows; B spans cols x n and C rows x n at their strides (checked by the Dense views);
        // a row-major kernel with V > 1 is chosen only when V divides B's ld and n, so its
        // vector loads (from an allocation aligned to 256 bytes) are aligned and inside B's rows.
        unsafe { args.launch(config) }.map_err(|e| driver_error("spmm", e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_divide_the_width_and_every_contiguous_leading_dimension() {
        assert_eq!(Variants::values(128, &[Some(128)]), 4);
        assert_eq!(Variants::values(100, &[Some(104)]), 4);
        assert_eq!(Variants::values(34, &[Some(34)]), 2);
        // ld allows 4 but a lane's span would cross the end of the row.
        assert_eq!(Variants::values(33, &[Some(36)]), 1);
        assert_eq!(Variants::values(64, &[Some(64), Some(66)]), 2);
        assert_eq!(Variants::values(64, &[Some(64), None]), 1);
    }

    #[test]
    fn sub_warps_span_the_row_within_the_instantiated_widths() {
        assert_eq!(Variants::lanes(32, 4), 8);
        assert_eq!(Variants::lanes(64, 4), 16);
        assert_eq!(Variants::lanes(128, 4), 32);
        assert_eq!(Variants::lanes(256, 4), 32);
        assert_eq!(Variants::lanes(33, 1), 32);
        assert_eq!(Variants::lanes(1, 1), 4);
        assert_eq!(Variants::lanes(0, 4), 4);
        assert_eq!(col_major_lanes(0.0), 4);
        assert_eq!(col_major_lanes(12.0), 16);
        assert_eq!(col_major_lanes(1e6), 32);
    }
}
