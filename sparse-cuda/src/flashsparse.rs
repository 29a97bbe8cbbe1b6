//! FlashSparse plans (Shi, Li et al., PPoPP'25): SpMM and SDDMM on ME-BCRS with tensor cores,
//! f16 (mma.m16n8k8, f32 accumulation) and tf32 (mma.m16n8k4 on f32 storage). `flashsparse.cu`
//! has the kernels and their thread mappings; docs/flashsparse.md the design and measurements.
//!
//! - Algorithms: `flashsparse` (what `auto` picks) runs 8x1 vectors by the swap-and-transpose
//!   MMA (C^T = B^T A^T: the 8-row window is the MMA's n side); `flashsparse-16x1` runs 16-row
//!   windows on the m side, the TC-GNN/DTC-SpMM granularity, with the same loads and stores, so
//!   that the gain of 8x1 is measured. A descriptor's block shape, when given, must be the
//!   format's `window x vectors per block` (8x8 or 16x8 for f16, 8x4 or 16x4 for tf32), and with
//!   `auto` a 16-row shape picks the ablation.
//! - Conversion: ME-BCRS is built on the device from the CSR ([`build`]), with the real values;
//!   its time is part of planning (spbench reports it as plan time, apart from the runs).
//! - Any M, N and K: rows, columns and the inner dimension past the ends are predicated, a
//!   window's short last block is read from the window pointers, nothing is padded. B, C, X and
//!   Y may be row- or column-major; the row-major ones take the vector loads and stores.
//! - Work of a warp (SpMM): a task of up to [`work::TASK_VECTORS`] vectors, either several
//!   consecutive windows or one chunk of a longer window. A window is a few blocks, and each
//!   block's loads depend on loads before them (task list, window pointers, columns, B rows), so
//!   a warp per window spends most of its time waiting on the first of them; a warp streams the
//!   blocks of all the windows of its task through one pipeline instead. Tasks are shortened
//!   (down to [`work::MIN_TASK_VECTORS`]) on matrices too small to give every multiprocessor
//!   several warps of them ([`work::task_vectors`]).
//! - Load balance (SpMM): a window longer than a task (the hubs of a power-law graph, one dense
//!   row) is cut into several chunks, which run concurrently on different warps and write f32
//!   partial sums to workspace slots; a second kernel adds each split window's slots in chunk
//!   order and applies alpha and beta. Partials rather than atomics keep the result
//!   bit-reproducible and serve f16 output, which has no f32 atomic add; the other windows
//!   write C directly and pay nothing for it. SDDMM needs no combining: a warp owns a tile of
//!   16 (8x1) or 8 (16x1) vectors and every output slot belongs to one tile, so long windows
//!   simply give many tiles.
//! - SDDMM output: C holds the values in ME-BCRS slot order ([`SddmmPlan::value_order`] maps
//!   them to CSR), 0 in the slots without an entry, ready to be an SpMM plan's values.
//! - Infinities and NaN: the tensor core multiplies the zero fill of a vector too, so an
//!   infinite or NaN element of B (X, Y) read for a vector also reaches the rows of its window
//!   that hold no entry in that column (0 * inf = NaN), where a CSR kernel would leave them
//!   finite. Finite inputs give the CSR results within the f32 accumulation bound.

mod build;
mod work;

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use sparse_core::{
    Accumulator, Algorithm, BackendKind, BlockShape, Compute, CsrRef, DType, DenseMut, DenseRef,
    Error, Format, Layout, OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SddmmPlan,
    SpIndex, SpmmDesc, SpmmPlan, ValueOrder,
};
use sparse_formats::{MeBcrs, MeBcrsShape};

use crate::compile::sources;
use crate::device::{driver_error, Device};
use crate::executor::CudaBackend;
use crate::operand::{input, output, sddmm_inner, spmm_width, strides, suffix, to_u32, AccArg};
use crate::spmm::scale_dense;
use build::DeviceMeBcrs;
use work::{task_vectors, upload, Tasks, Tiles};

/// Warps per block of the SpMM and SDDMM kernels (`FS_WARPS`).
const WARPS: u32 = 4;
const THREADS: u32 = WARPS * 32;
/// Columns of C a warp covers per pass, narrowest first: the SpMM kernels instantiated per
/// window height (`fs_spmm_*_hH_pP_gG` in flashsparse.cu). 16-row windows stop at 64 columns:
/// their accumulators are twice as many.
const WARP_COLS: [u32; 4] = [16, 32, 64, 128];
const WARP_COLS_16X1: usize = 3;
/// Bytes a lane loads of one B row at once, at most: a 16-byte vector.
const RUN_BYTES: u32 = 16;
/// The largest grid.y; the kernels stride over what lies beyond.
const MAX_GRID_Y: u32 = 65_535;
/// A null device pointer, for the workspace of a run without split windows (never read).
const NULL: u64 = 0;

/// The precisions with tensor-core kernels: f16 storage with f32 accumulation, and tf32.
pub(crate) fn supports(precision: Precision) -> bool {
    matches!(
        (precision.storage, precision.compute),
        (DType::F16, Compute::F32) | (DType::F32, Compute::Tf32)
    )
}

/// The algorithm a plan runs and the ME-BCRS shape it needs, from the descriptor.
fn resolve(
    op: OpKind,
    precision: Precision,
    algorithm: Algorithm,
    block: Option<BlockShape>,
) -> Result<(Algorithm, MeBcrsShape)> {
    // Vectors per block: the k of the MMA.
    let k = if precision.storage == DType::F16 {
        8
    } else {
        4
    };
    let window = match algorithm {
        Algorithm::Auto => block.map_or(8, |b| b.rows),
        Algorithm::FlashSparse => 8,
        Algorithm::FlashSparse16x1 => 16,
        other => {
            return Err(Error::Unsupported {
                op,
                format: Format::MeBcrs,
                precision,
                backend: BackendKind::Cuda,
                supported: format!(
                    "{op} on me-bcrs with the algorithms auto, flashsparse and flashsparse-16x1, \
                     not {other}"
                ),
            })
        }
    };
    if let Some(b) = block {
        if b != BlockShape::new(window, k) {
            return Err(Error::invalid(format!(
                "{op} on me-bcrs in {precision} runs blocks of {window}x{k} (window rows x \
                 vectors per block; 8 or 16 rows), not {b}"
            )));
        }
    }
    let chosen = if window == 16 {
        Algorithm::FlashSparse16x1
    } else {
        Algorithm::FlashSparse
    };
    Ok((chosen, MeBcrsShape::new(window, k)?))
}

/// ME-BCRS of `a` built on `backend`'s device and read back: what the plans run on.
pub fn me_bcrs_on_device<T: Scalar, I: SpIndex>(
    backend: &CudaBackend,
    a: CsrRef<'_, T, I>,
    shape: MeBcrsShape,
) -> Result<MeBcrs<T>> {
    DeviceMeBcrs::build(backend.device(), a, shape)?.to_host(backend.device())
}

fn launched(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| driver_error(what, e)
}

fn kernel_suffix<T: Scalar>(op: OpKind) -> Result<&'static str> {
    suffix(T::DTYPE).ok_or_else(|| Error::invalid(format!("no FlashSparse {op} for {}", T::DTYPE)))
}

/// A kernel in its two variants (flashsparse.cu): `_vec` reads each lane's run of a dense
/// operand with one access, `_elem` element by element.
struct RunVariants {
    vec: CudaFunction,
    elem: CudaFunction,
}

impl RunVariants {
    fn load(device: &Device, name: &str) -> Result<Self> {
        Ok(RunVariants {
            vec: device.function(sources::FLASHSPARSE, &format!("{name}_vec"))?,
            elem: device.function(sources::FLASHSPARSE, &format!("{name}_elem"))?,
        })
    }

    fn get(&self, whole_runs: bool) -> &CudaFunction {
        if whole_runs {
            &self.vec
        } else {
            &self.elem
        }
    }
}

/// Whether every run of `run` elements that a lane reads of `d` along its rows, `width` of them,
/// is whole and aligned, so the `_vec` variant applies: rows contiguous, and `run` dividing the
/// leading dimension and the width (allocations are 256-byte aligned).
fn whole_runs<T: Scalar>(d: &DenseRef<'_, T>, run: usize, width: usize) -> bool {
    d.layout() == Layout::RowMajor && d.ld() % run == 0 && width % run == 0
}

/// How a SpMM warp covers its columns: groups of 8 lanes, each lane loading a run of `run`
/// consecutive elements of a B row per vector (flashsparse.cu, "Lane runs").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SpmmTiling {
    run: u32,
    groups: u32,
}

impl SpmmTiling {
    /// `columns` per warp (a power of two from 16) with elements of `bytes`: runs as long as
    /// the columns and a 16-byte load allow, then as many groups as the columns need.
    fn new(columns: u32, bytes: u32) -> Self {
        let run = (columns / 8).min(RUN_BYTES / bytes);
        SpmmTiling {
            run,
            groups: columns / (8 * run),
        }
    }

    fn columns(self) -> u32 {
        8 * self.run * self.groups
    }

    /// Consecutive columns of C a lane writes: its run (8-row windows) or two (16-row).
    fn output_run(self, window: u32) -> u32 {
        if window == 16 {
            2 * self.run
        } else {
            self.run
        }
    }
}

/// A planned FlashSparse SpMM.
pub struct FlashSparseSpmmPlan<T> {
    device: Arc<Device>,
    a: DeviceMeBcrs<T>,
    task_window: CudaSlice<u32>,
    task_windows: CudaSlice<u32>,
    task_start: CudaSlice<u32>,
    task_end: CudaSlice<u32>,
    task_slot: CudaSlice<u32>,
    tasks: u32,
    /// Vectors per task, also the chunk length of split windows.
    task_len: u32,
    split_window: CudaSlice<u32>,
    split_slot: CudaSlice<u32>,
    split: u32,
    slots: u32,
    /// The kernels for each of the plan's [`WARP_COLS`], with their lane run lengths.
    kernels: Vec<(SpmmTiling, RunVariants)>,
    combine: CudaFunction,
    /// `scale_matrix` of spmm.cu, for alpha == 0.
    scale: CudaFunction,
    /// Partial sums of split windows: slots x window x (N rounded up to 4), grown to the widest
    /// N run so far.
    workspace: Option<CudaSlice<f32>>,
    info: PlanInfo,
}

impl<T: Scalar> FlashSparseSpmmPlan<T> {
    pub(crate) fn new<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Self> {
        let (algorithm, shape) = resolve(OpKind::Spmm, desc.precision, desc.algorithm, desc.block)?;
        let sfx = kernel_suffix::<T>(OpKind::Spmm)?;
        let m = DeviceMeBcrs::build(device, a, shape)?;
        let vectors = m.host_window_ptr.last().copied().unwrap_or(0);
        let task_len = task_vectors(u64::from(vectors), device.info.multiprocessors);
        let c = Tasks::new(&m.host_window_ptr, task_len);
        let (task_window, tasks) = upload(device, &c.window)?;
        let (task_windows, _) = upload(device, &c.windows)?;
        let (task_start, _) = upload(device, &c.start)?;
        let (task_end, _) = upload(device, &c.end)?;
        let (task_slot, _) = upload(device, &c.slot)?;
        let (split_window, split) = upload(device, &c.split_window)?;
        let (split_slot, _) = upload(device, &c.split_slot)?;
        let h = shape.window();
        let widths = if h == 16 {
            WARP_COLS_16X1
        } else {
            WARP_COLS.len()
        };
        let kernels = WARP_COLS[..widths]
            .iter()
            .map(|&cols| {
                let tiling = SpmmTiling::new(cols, size_of::<T>() as u32);
                let (p, g) = (tiling.run, tiling.groups);
                let name = format!("fs_spmm_{sfx}_h{h}_p{p}_g{g}");
                Ok((tiling, RunVariants::load(device, &name)?))
            })
            .collect::<Result<Vec<_>>>()?;
        let info = PlanInfo {
            backend: BackendKind::Cuda,
            op: OpKind::Spmm,
            format: Format::MeBcrs,
            precision: desc.precision,
            algorithm,
            bytes: m.bytes() + (5 * c.window.len() + 2 * c.split_window.len()) * 4,
            deterministic: true,
        };
        Ok(FlashSparseSpmmPlan {
            kernels,
            combine: device.function(sources::FLASHSPARSE, &format!("fs_spmm_combine_{sfx}"))?,
            scale: device.function(sources::SPMM, &format!("scale_matrix_{sfx}"))?,
            device: device.clone(),
            a: m,
            task_window,
            task_windows,
            task_start,
            task_end,
            task_slot,
            tasks,
            task_len,
            split_window,
            split_slot,
            split,
            slots: c.slots,
            workspace: None,
            info,
        })
    }

    /// Grows the workspace to hold `ws_ld` columns per row when there are split windows.
    fn grow_workspace(&mut self, ws_ld: u32) -> Result<()> {
        if self.slots == 0 {
            return Ok(());
        }
        let len = (self.slots as usize)
            .checked_mul(self.a.shape.window() * ws_ld as usize)
            .ok_or_else(|| Error::invalid("the FlashSparse workspace size overflows usize"))?;
        self.info.bytes += self.device.grow_zeroed(
            &mut self.workspace,
            len,
            "allocating the FlashSparse workspace",
        )?;
        Ok(())
    }
}

impl<T: Scalar> SpmmPlan<T> for FlashSparseSpmmPlan<T> {
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
        let (rows, cols) = (self.a.rows, self.a.cols);
        let n = spmm_width((rows as usize, cols as usize), &b, &c)?;
        let c_layout = c.layout();
        let c_ld = to_u32("spmm C leading dimension", c.ld())?;
        let (b_rs, b_cs) = strides(b.layout(), b.ld());
        let (c_rs, c_cs) = strides(c_layout, c.ld());
        let h = self.a.shape.window() as u32;
        // The narrowest pass that covers N, else the widest, striding over N.
        let pick = self
            .kernels
            .iter()
            .position(|(t, _)| t.columns() >= n)
            .unwrap_or(self.kernels.len() - 1);
        let tiling = self.kernels[pick].0;
        let b_whole = whole_runs(&b, tiling.run as usize, n as usize);
        // Runs of C are vector-accessed when rows are contiguous and their leading dimension
        // keeps every run aligned (the kernel checks each run is inside N).
        let c_vec =
            u32::from(c_layout == Layout::RowMajor && c.ld() % tiling.output_run(h) as usize == 0);
        let bb = input(&b, &self.device, "spmm B")?;
        let cb = output(&mut c, &self.device, "spmm C")?;
        if rows == 0 || n == 0 {
            return Ok(());
        }
        let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
        if alpha == 0.0 {
            return scale_dense(
                &self.device,
                &self.scale,
                (rows, n),
                c_layout,
                c_ld,
                &mut cb.bytes,
                AccArg::of::<T>(beta),
            );
        }
        let (alpha, beta) = (alpha as f32, beta as f32);
        // Partial sums are stored as whole output runs (16 floats at most), aligned.
        let ws_ld = n.next_multiple_of(16);
        let chunk_len = self.task_len;
        self.grow_workspace(ws_ld)?;
        let workspace = self.workspace.as_ref();
        let stream = &self.device.stream;
        let mut args = stream.launch_builder(self.kernels[pick].1.get(b_whole));
        args.arg(&self.tasks)
            .arg(&self.task_window)
            .arg(&self.task_windows)
            .arg(&self.task_start)
            .arg(&self.task_end)
            .arg(&self.task_slot)
            .arg(&self.a.window_ptr)
            .arg(&self.a.vec_col)
            .arg(&self.a.values.bytes)
            .arg(&rows)
            .arg(&n)
            .arg(&bb.bytes)
            .arg(&b_rs)
            .arg(&b_cs)
            .arg(&cb.bytes)
            .arg(&c_rs)
            .arg(&c_cs)
            .arg(&c_vec)
            .arg(&alpha)
            .arg(&beta);
        match workspace {
            Some(w) => args.arg(w),
            None => args.arg(&NULL),
        };
        args.arg(&ws_ld);
        let config = LaunchConfig {
            grid_dim: (
                self.tasks.div_ceil(WARPS).max(1),
                n.div_ceil(tiling.columns()).min(MAX_GRID_Y),
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: arguments match fs_spmm's entry; a task's windows are below the window count
        // (window_ptr is read at most to index windows), its vectors lie inside them and a
        // chunk holds whole blocks, so every value read is a slot below vectors * h and every
        // column < cols;
        // B spans cols x n and C rows x n at their strides (checked by the Dense views); runs
        // start at multiples of their length and are vector-accessed only when the flags above
        // make them aligned (allocations are 256-byte aligned) and whole (inside N); chunks
        // with a slot write slots * h rows of ws_ld floats, which the workspace holds, in runs
        // that ws_ld (a multiple of 16) keeps aligned.
        unsafe { args.launch(config) }.map_err(launched("fs_spmm"))?;
        if let Some(w) = workspace {
            let group_rows = combine_group_rows(self.split, h, n, self.device.info.multiprocessors);
            // One block row per group of rows of a split window, the kernel striding past
            // MAX_GRID_Y.
            let groups = u64::from(self.split) * u64::from(h.div_ceil(group_rows));
            let grid_y = groups.clamp(1, u64::from(MAX_GRID_Y)) as u32;
            let mut args = stream.launch_builder(&self.combine);
            args.arg(&self.split)
                .arg(&self.split_window)
                .arg(&self.split_slot)
                .arg(&self.a.window_ptr)
                .arg(&chunk_len)
                .arg(&h)
                .arg(&group_rows)
                .arg(&rows)
                .arg(&n)
                .arg(w)
                .arg(&ws_ld)
                .arg(&cb.bytes)
                .arg(&c_rs)
                .arg(&c_cs)
                .arg(&alpha)
                .arg(&beta);
            let config = LaunchConfig {
                grid_dim: (n.div_ceil(THREADS), grid_y, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the split windows' slots were written by fs_spmm before, on this stream;
            // C as above.
            unsafe { args.launch(config) }.map_err(launched("fs_spmm_combine"))?;
        }
        Ok(())
    }
}

/// Threads of the split-window combine per multiprocessor wanted: two waves of 2,048.
const COMBINE_THREADS_PER_SM: u64 = 4096;

/// Rows of a split window that one thread of the combine sums (a power of two up to `h`): one
/// when a thread per row and column leaves at most [`COMBINE_THREADS_PER_SM`] threads per
/// multiprocessor, else as many as bring the count down to it, so that many small split
/// windows do not pay for waves of threads that each wait for one load.
fn combine_group_rows(split: u32, h: u32, n: u32, multiprocessors: u32) -> u32 {
    let threads = u64::from(split) * u64::from(h) * u64::from(n.next_multiple_of(THREADS));
    let wanted = u64::from(multiprocessors.max(1)) * COMBINE_THREADS_PER_SM;
    let per_thread = (threads / wanted).clamp(1, u64::from(h)) as u32;
    1 << per_thread.ilog2()
}

/// A planned FlashSparse SDDMM.
pub struct FlashSparseSddmmPlan<T> {
    device: Arc<Device>,
    s: DeviceMeBcrs<T>,
    tile_window: CudaSlice<u32>,
    tile_start: CudaSlice<u32>,
    tiles: u32,
    kernels: RunVariants,
    order: ValueOrder,
    scale_by_values: bool,
    info: PlanInfo,
}

impl<T: Scalar> FlashSparseSddmmPlan<T> {
    pub(crate) fn new<I: SpIndex>(
        device: &Arc<Device>,
        s: CsrRef<'_, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Self> {
        let (algorithm, shape) =
            resolve(OpKind::Sddmm, desc.precision, desc.algorithm, desc.block)?;
        let sfx = kernel_suffix::<T>(OpKind::Sddmm)?;
        let m = DeviceMeBcrs::build(device, s, shape)?;
        // An MMA covers 16 vectors (8-row windows, m side) or 8 (16-row windows, n side).
        let per_tile = if shape.window() == 8 { 16 } else { 8 };
        let t = Tiles::new(&m.host_window_ptr, per_tile);
        let (tile_window, tiles) = upload(device, &t.window)?;
        let (tile_start, _) = upload(device, &t.start)?;
        let order = m.to_host(device)?.value_order();
        let info = PlanInfo {
            backend: BackendKind::Cuda,
            op: OpKind::Sddmm,
            format: Format::MeBcrs,
            precision: desc.precision,
            algorithm,
            bytes: m.bytes() + 2 * t.window.len() * 4,
            deterministic: true,
        };
        Ok(FlashSparseSddmmPlan {
            kernels: RunVariants::load(device, &format!("fs_sddmm_{sfx}_h{}", shape.window()))?,
            device: device.clone(),
            s: m,
            tile_window,
            tile_start,
            tiles,
            order,
            scale_by_values: desc.scale_by_values,
            info,
        })
    }
}

impl<T: Scalar> SddmmPlan<T> for FlashSparseSddmmPlan<T> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn value_order(&self) -> Option<&ValueOrder> {
        Some(&self.order)
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
        let kdim = sddmm_inner(
            (s.rows as usize, s.cols as usize, self.order.len()),
            &x,
            &y,
            &c,
        )?;
        to_u32("sddmm C leading dimension", c.ld())?;
        let (c_inc, _) = strides(c.layout(), c.ld());
        let (x_rs, x_cs) = strides(x.layout(), x.ld());
        let (y_rs, y_cs) = strides(y.layout(), y.ld());
        // Each lane reads 16 bytes of the inner dimension at once: 8 f16 or 4 f32.
        let run = (RUN_BYTES as usize) / size_of::<T>();
        let kernel = self
            .kernels
            .get(whole_runs(&x, run, kdim as usize) && whole_runs(&y, run, kdim as usize));
        let xb = input(&x, &self.device, "sddmm X")?;
        let yb = input(&y, &self.device, "sddmm Y")?;
        let cb = output(&mut c, &self.device, "sddmm C")?;
        if self.tiles == 0 {
            return Ok(());
        }
        let alpha = Accumulator::to_f64(alpha) as f32;
        let beta = Accumulator::to_f64(beta) as f32;
        let scale_by_values = u32::from(self.scale_by_values);
        let mut args = self.device.stream.launch_builder(kernel);
        args.arg(&self.tiles)
            .arg(&self.tile_window)
            .arg(&self.tile_start)
            .arg(&s.window_ptr)
            .arg(&s.vec_col)
            .arg(&s.vec_mask)
            .arg(&s.values.bytes)
            .arg(&scale_by_values)
            .arg(&s.rows)
            .arg(&kdim)
            .arg(&xb.bytes)
            .arg(&x_rs)
            .arg(&x_cs)
            .arg(&yb.bytes)
            .arg(&y_rs)
            .arg(&y_cs)
            .arg(&cb.bytes)
            .arg(&c_inc)
            .arg(&alpha)
            .arg(&beta);
        let config = LaunchConfig {
            grid_dim: (self.tiles.div_ceil(WARPS), 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: arguments match fs_sddmm's entry; tiles lie inside their windows, so every
        // slot written is below vectors * h = c's length, columns are < cols = Y's rows and rows
        // past M are never read; X spans rows x k, Y cols x k and C its slots at their strides
        // (checked by the Dense views); vector loads only where the flags make them aligned.
        unsafe { args.launch(config) }.map_err(launched("fs_sddmm"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_pick_the_granularity() {
        let f16 = Precision::F16;
        let pick = |algorithm, block| resolve(OpKind::Spmm, f16, algorithm, block);
        let (a, s) = pick(Algorithm::Auto, None).unwrap();
        assert_eq!((a, s), (Algorithm::FlashSparse, MeBcrsShape::f16()));
        let (a, s) = pick(Algorithm::Auto, Some(BlockShape::new(16, 8))).unwrap();
        assert_eq!(
            (a, s.window(), s.block()),
            (Algorithm::FlashSparse16x1, 16, 8)
        );
        let (_, s) = resolve(
            OpKind::Sddmm,
            Precision::TF32,
            Algorithm::FlashSparse16x1,
            None,
        )
        .unwrap();
        assert_eq!((s.window(), s.block()), (16, 4));
        assert!(matches!(
            pick(Algorithm::FlashSparse, Some(BlockShape::new(16, 8))),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(matches!(
            pick(Algorithm::Rode, None),
            Err(Error::Unsupported { .. })
        ));
        assert!(supports(Precision::TF32) && supports(f16) && !supports(Precision::F32));
    }

    #[test]
    fn the_combine_gives_a_thread_more_rows_only_when_threads_abound() {
        // 32 split windows (a DLMC layer): a thread per row.
        assert_eq!(combine_group_rows(32, 8, 128, 132), 1);
        // 2,000 split windows of a graph: 2M threads for 540k wanted, 2 rows a thread.
        assert_eq!(combine_group_rows(2000, 8, 128, 132), 2);
        // Never more than a window's rows.
        assert_eq!(combine_group_rows(1 << 20, 16, 256, 1), 16);
        assert_eq!(combine_group_rows(0, 8, 1, 132), 1);
    }

    #[test]
    fn warps_take_16_byte_runs_then_groups() {
        let tiling = |cols, bytes| {
            let t = SpmmTiling::new(cols, bytes);
            assert_eq!(t.columns(), cols);
            (t.run, t.groups)
        };
        assert_eq!(tiling(16, 2), (2, 1));
        assert_eq!(tiling(32, 2), (4, 1));
        assert_eq!(tiling(64, 2), (8, 1));
        assert_eq!(tiling(128, 2), (8, 2));
        assert_eq!(tiling(64, 4), (4, 2));
        assert_eq!(tiling(128, 4), (4, 4));
        assert_eq!(SpmmTiling::new(64, 2).output_run(16), 16);
    }
}
