//! CSR SpMM plans on CUDA cores, `C = alpha*A*B + beta*C` (`spmm.cu` has the kernels).
//!
//! The `vector` algorithm (`auto` picks it or RoDe, see `rode.rs`): a sub-warp per row of A.
//! The kernel variant is picked at every run from B's layout, leading dimension and width N:
//! - row-major B: lanes across N with V = 4, 2 or 1 values each, the widest V dividing both
//!   B's leading dimension and N (so each lane reads its B values with one vector load); W lanes
//!   per row, N / V rounded up to a power of two in 4..=32, so a tile of W*V columns spans N
//!   where it can; wider N is cut into tiles over grid.y.
//! - column-major B: lanes across the row's entries, W the mean row length rounded to a power
//!   of two in 4..=32 (fixed at plan time), each lane keeping [`COLMAJOR_COLS`] columns of
//!   partial sums.

use std::sync::Arc;

use cudarc::driver::LaunchConfig;
use sparse_core::{Algorithm, CsrRef, Layout, Result, RowStats, Scalar, SpIndex, SpmmDesc};

use crate::device::Device;
use crate::kernel::{c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec};
use crate::matrix::DeviceCsr;
use crate::operand::{Run, SpmmDense, SpmmOperands};
use crate::plan::{CudaPlan, Kernels, Phase, PlanBase, PlanClock, SpmmKernels, Values, WidthDesc};

/// Threads per block (`SPMM_BLOCK`).
const BLOCK: u32 = 256;
/// Columns of C one sub-warp of the column-major kernel computes (`COLMAJOR_COLS`).
const COLMAJOR_COLS: u32 = 8;
/// The largest grid.y; the kernels stride over the column tiles beyond it.
const MAX_GRID_Y: u32 = 65_535;
/// Sub-warp widths and values per lane the row-major SpMM and the SDDMM kernels are
/// instantiated for.
pub(crate) const SUBWARPS: [u32; 4] = [4, 8, 16, 32];
pub(crate) const VECTORS: [u32; 3] = [1, 2, 4];

kernel_params! {
    /// `spmm_csr_rowmajor<W, V>` and `spmm_csr_colmajor<W>`.
    pub(crate) struct SpmmCsr<T> {
        rows: u32,
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        values: ptr(T),
        dense: sub(SpmmDense),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "spmm",
    code: include_str!("../kernels/spmm.cu"),
    params: &[
        <SpmmDense<f32> as KernelParams>::C_DECL,
        <SpmmCsr<f32> as KernelParams>::C_DECL,
    ],
    defines: &[("SPMM_BLOCK", BLOCK), ("COLMAJOR_COLS", COLMAJOR_COLS)],
};

fn row_major<T: Scalar>(lanes: u32, values: u32) -> Result<Entry<SpmmCsr<T>>> {
    Entry::new(
        &SOURCE,
        "spmm_csr_rowmajor",
        &[&c_type(T::DTYPE)?, &lanes, &values],
    )
}

fn col_major<T: Scalar>(lanes: u32) -> Result<Entry<SpmmCsr<T>>> {
    Entry::new(&SOURCE, "spmm_csr_colmajor", &[&c_type(T::DTYPE)?, &lanes])
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let mut specs: Vec<KernelSpec> = Variants::entries(row_major::<T>)?
        .iter()
        .map(|e| e.spec().clone())
        .collect();
    for lanes in SUBWARPS {
        specs.push(col_major::<T>(lanes)?.spec().clone());
    }
    Ok(specs)
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = specs_of::<f64>()?;
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    Ok(specs)
}

/// A kernel instantiated for every sub-warp width W and values per lane V (the row-major SpMM
/// kernels, the SDDMM kernels), loaded at plan time since the run's operands pick one.
pub(crate) struct Variants<P>(Vec<Kernel<P>>);

impl<P: KernelParams> Variants<P> {
    /// The entries `entry(w, v)` for every instantiated pair, W major.
    pub(crate) fn entries(entry: impl Fn(u32, u32) -> Result<Entry<P>>) -> Result<Vec<Entry<P>>> {
        SUBWARPS
            .iter()
            .flat_map(|&w| VECTORS.iter().map(move |&v| (w, v)))
            .map(|(w, v)| entry(w, v))
            .collect()
    }

    pub(crate) fn load(device: &Arc<Device>, entries: &[Entry<P>]) -> Result<Self> {
        entries
            .iter()
            .map(|e| device.kernel(e))
            .collect::<Result<_>>()
            .map(Variants)
    }

    pub(crate) fn get(&self, lanes: u32, values: u32) -> &Kernel<P> {
        let position = |list: &[u32], x: u32| {
            list.iter()
                .position(|&y| y == x)
                .expect("an instantiated width")
        };
        &self.0[position(&SUBWARPS, lanes) * VECTORS.len() + position(&VECTORS, values)]
    }
}

/// The widest V that divides `len` and the leading dimension of every operand read along it
/// (`None` for an operand whose elements along it are not contiguous, which forces 1), so each
/// lane's V elements are one aligned vector, all inside or all outside the row.
pub(crate) fn vector_values(len: usize, lds: &[Option<usize>]) -> u32 {
    VECTORS
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
pub(crate) fn subwarp_lanes(len: usize, values: u32) -> u32 {
    len.div_ceil(values as usize)
        .next_power_of_two()
        .clamp(4, 32) as u32
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
            tiles.clamp(1, MAX_GRID_Y),
            1,
        ),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The CSR SpMM kernels of one plan and the matrix they read.
pub(crate) struct SpmmFamily<T: Scalar> {
    a: DeviceCsr<T>,
    row_major: Variants<SpmmCsr<T>>,
    col_major: Kernel<SpmmCsr<T>>,
    col_major_lanes: u32,
}

/// A planned `vector` CSR SpMM.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    stats: &RowStats,
    desc: &SpmmDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, SpmmFamily<T>>> {
    let col_major_lanes = col_major_lanes(stats.mean);
    let row_entries = Variants::entries(row_major::<T>)?;
    let col_entry = col_major::<T>(col_major_lanes)?;
    let mut specs: Vec<&KernelSpec> = row_entries.iter().map(|e| e.spec()).collect();
    specs.push(col_entry.spec());
    let info = desc.info(Algorithm::Vector);
    let (base, mut clock) = PlanBase::new(device, a, info, &specs, clock)?;
    let family = SpmmFamily {
        row_major: Variants::load(device, &row_entries)?,
        col_major: device.kernel(&col_entry)?,
        col_major_lanes,
        a: DeviceCsr::upload(device, a)?,
    };
    clock.lap(device, Phase::Transfer)?;
    let bytes = family.a.bytes();
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> SpmmKernels<T> for SpmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmmOperands, T::Acc>) -> Result<()> {
        let (a, ops, n) = (&self.a, &run.ops, run.ops.n);
        let (kernel, config) = match ops.b.layout {
            Layout::RowMajor => {
                let values = vector_values(n as usize, &[Some(ops.b.ld as usize)]);
                let lanes = subwarp_lanes(n as usize, values);
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
        let (row_ptr, col_idx, values) = a.pointers(&base.device);
        let params = SpmmCsr {
            rows: a.rows,
            row_ptr,
            col_idx,
            values,
            dense: SpmmDense::new(run),
        };
        // SAFETY: the CSR is canonical with columns < cols = B's rows; B spans cols x n and C
        // rows x n at their strides (bound operands); a row-major kernel with V > 1 is chosen
        // only when V divides B's ld and n, so its vector loads (from an allocation aligned to
        // 256 bytes) are aligned and inside B's rows.
        unsafe { kernel.launch(config, &params) }
    }
}

impl<T: Scalar> Kernels<T> for SpmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values::csr_order(&self.a.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_divide_the_width_and_every_contiguous_leading_dimension() {
        assert_eq!(vector_values(128, &[Some(128)]), 4);
        assert_eq!(vector_values(100, &[Some(104)]), 4);
        assert_eq!(vector_values(34, &[Some(34)]), 2);
        // ld allows 4 but a lane's span would cross the end of the row.
        assert_eq!(vector_values(33, &[Some(36)]), 1);
        assert_eq!(vector_values(64, &[Some(64), Some(66)]), 2);
        assert_eq!(vector_values(64, &[Some(64), None]), 1);
    }

    #[test]
    fn sub_warps_span_the_row_within_the_instantiated_widths() {
        assert_eq!(subwarp_lanes(32, 4), 8);
        assert_eq!(subwarp_lanes(64, 4), 16);
        assert_eq!(subwarp_lanes(128, 4), 32);
        assert_eq!(subwarp_lanes(256, 4), 32);
        assert_eq!(subwarp_lanes(33, 1), 32);
        assert_eq!(subwarp_lanes(1, 1), 4);
        assert_eq!(subwarp_lanes(0, 4), 4);
        assert_eq!(col_major_lanes(0.0), 4);
        assert_eq!(col_major_lanes(12.0), 16);
        assert_eq!(col_major_lanes(1e6), 32);
    }
}
