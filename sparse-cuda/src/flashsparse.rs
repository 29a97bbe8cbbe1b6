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
//!   write C directly and pay nothing for it. The workspace depends on N: it is sized at plan
//!   time for the descriptor's widest N and grows only in `reserve`. SDDMM needs no combining:
//!   a warp owns a tile of 16 (8x1) or 8 (16x1) vectors and every output slot belongs to one
//!   tile, so long windows simply give many tiles, and no workspace.
//! - SDDMM output: C holds the values in ME-BCRS slot order
//!   ([`sparse_core::SddmmPlan::value_order`] maps them to CSR), 0 in the slots without an
//!   entry, ready to be an SpMM plan's values.
//! - Value updates: the builder also records the slot of every CSR entry, so new values in CSR
//!   order are scattered into ME-BCRS order on the device, with no conversion.
//! - Infinities and NaN: the tensor core multiplies the zero fill of a vector too, so an
//!   infinite or NaN element of B (X, Y) read for a vector also reaches the rows of its window
//!   that hold no entry in that column (0 * inf = NaN), where a CSR kernel would leave them
//!   finite. Finite inputs give the CSR results within the f32 accumulation bound.

pub(crate) mod build;
mod work;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{
    Algorithm, BlockShape, CsrRef, DType, Error, OpKind, Precision, Result, Scalar, SddmmDesc,
    SpIndex, SpmmDesc, ValueOrder,
};
use sparse_formats::{MeBcrs, MeBcrsShape};

use crate::device::Device;
use crate::executor::CudaBackend;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, MutPtr, Ptr,
};
use crate::operand::{Run, SddmmDense, SddmmOperands, SpmmDense, SpmmOperands};
use crate::plan::{
    CudaPlan, Kernels, Phase, PlanBase, PlanClock, SddmmKernels, SpmmKernels, Values, WidthDesc,
};
use build::{BuildEntries, DeviceMeBcrs};
use work::{task_vectors, DeviceTasks, DeviceTiles, Tasks, Tiles};

/// Warps per block of the SpMM, combine and SDDMM kernels (`FS_WARPS`).
const WARPS: u32 = 4;
/// Threads per block of those kernels (`FS_THREADS`).
const THREADS: u32 = WARPS * 32;
/// Stages of the SpMM pipeline through shared memory (`FS_STAGES`; flashsparse.cu says why two).
const STAGES: u32 = 2;
/// Partial sums of a split window the combine loads at once (`FS_COMBINE_BATCH`).
const COMBINE_BATCH: u32 = 8;
/// Bytes a lane loads of one row of a dense operand at once, at most: a 16-byte vector
/// (`FS_RUN_BYTES`).
const RUN_BYTES: u32 = 16;
/// Columns of C a warp covers per pass, narrowest first: the SpMM kernels instantiated per
/// window height. 16-row windows stop at 64 columns: their accumulators are twice as many.
const WARP_COLS: [u32; 4] = [16, 32, 64, 128];
const WARP_COLS_16X1: usize = 3;
/// Floats a row of the split-window workspace is padded to: partial sums are stored as whole
/// output runs (16 floats at most), aligned.
const WORKSPACE_ALIGN: u32 = 16;
/// The largest grid.y; the kernels stride over what lies beyond.
const MAX_GRID_Y: u32 = 65_535;

kernel_params! {
    /// `fs_spmm<T, H, P, G, VEC>`: the tasks of one SpMM; chunks with a workspace slot write
    /// `ws` (`ws_ld` floats per row), the others C.
    pub(crate) struct FsSpmm<T> {
        tasks: u32,
        task_window: ptr(u32),
        task_windows: ptr(u32),
        task_start: ptr(u32),
        task_end: ptr(u32),
        task_slot: ptr(u32),
        window_ptr: ptr(u32),
        vec_col: ptr(u32),
        values: ptr(T),
        rows: u32,
        c_vec: u32,
        ws: out(f32),
        ws_ld: u32,
        dense: sub(SpmmDense),
    }
}

kernel_params! {
    /// `fs_spmm_combine<T>`: the `split` windows' partial sums added into C, `group_rows` rows
    /// of a window per thread (B unused).
    pub(crate) struct FsCombine<T> {
        split: u32,
        split_window: ptr(u32),
        split_slot: ptr(u32),
        window_ptr: ptr(u32),
        chunk_len: u32,
        h: u32,
        group_rows: u32,
        rows: u32,
        ws: ptr(f32),
        ws_ld: u32,
        dense: sub(SpmmDense),
    }
}

kernel_params! {
    /// `fs_sddmm<T, H, VEC>`: tile i covers vectors `tile_start[i]..` of window
    /// `tile_window[i]`; C is written in ME-BCRS slot order, `c_inc` apart.
    pub(crate) struct FsSddmm<T> {
        tiles: u32,
        tile_window: ptr(u32),
        tile_start: ptr(u32),
        window_ptr: ptr(u32),
        vec_col: ptr(u32),
        vec_mask: ptr(u8),
        values: ptr(T),
        scale_by_values: u32,
        rows: u32,
        dense: sub(SddmmDense),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "flashsparse",
    code: include_str!("../kernels/flashsparse.cu"),
    params: &[
        <SpmmDense<f32> as KernelParams>::C_DECL,
        <SddmmDense<f32> as KernelParams>::C_DECL,
        <FsSpmm<f32> as KernelParams>::C_DECL,
        <FsCombine<f32> as KernelParams>::C_DECL,
        <FsSddmm<f32> as KernelParams>::C_DECL,
        <build::FsBuildFirst as KernelParams>::C_DECL,
        <build::FsScan as KernelParams>::C_DECL,
        <build::FsBuildWindowPtr as KernelParams>::C_DECL,
        <build::FsBuildFill<f32> as KernelParams>::C_DECL,
    ],
    defines: &[
        ("FS_WARPS", WARPS),
        ("FS_THREADS", THREADS),
        ("FS_STAGES", STAGES),
        ("FS_COMBINE_BATCH", COMBINE_BATCH),
        ("FS_RUN_BYTES", RUN_BYTES),
        ("FS_NONE", work::NO_SLOT),
        ("FS_TASK_WINDOWS", work::TASK_WINDOWS),
        ("FS_BUILD_THREADS", build::THREADS),
        ("FS_SCAN_ITEMS", build::SCAN_ITEMS),
    ],
};

/// The C storage type of the kernels for `T`: f16, or f32 (whose MMAs compute in tf32).
fn storage<T: Scalar>() -> Result<&'static str> {
    match T::DTYPE {
        DType::F16 | DType::F32 => c_type(T::DTYPE),
        other => Err(Error::internal(format!(
            "no FlashSparse kernel takes {other} storage"
        ))),
    }
}

fn spmm_entry<T: Scalar>(
    window: usize,
    tiling: SpmmTiling,
    whole_runs: bool,
) -> Result<Entry<FsSpmm<T>>> {
    Entry::new(
        &SOURCE,
        "fs_spmm",
        &[
            &storage::<T>()?,
            &window,
            &tiling.run,
            &tiling.groups,
            &whole_runs,
        ],
    )
}

fn combine_entry<T: Scalar>() -> Result<Entry<FsCombine<T>>> {
    Entry::new(&SOURCE, "fs_spmm_combine", &[&storage::<T>()?])
}

fn sddmm_entry<T: Scalar>(window: usize, whole_runs: bool) -> Result<Entry<FsSddmm<T>>> {
    Entry::new(
        &SOURCE,
        "fs_sddmm",
        &[&storage::<T>()?, &window, &whole_runs],
    )
}

/// The SpMM kernels of windows of `window` rows: each tiling with its two variants.
fn spmm_entries<T: Scalar>(window: usize) -> Result<Vec<(SpmmTiling, VariantEntries<FsSpmm<T>>)>> {
    let widths = if window == 16 {
        WARP_COLS_16X1
    } else {
        WARP_COLS.len()
    };
    WARP_COLS[..widths]
        .iter()
        .map(|&cols| {
            let tiling = SpmmTiling::new(cols, size_of::<T>() as u32);
            let entries = RunVariants::entries(|whole| spmm_entry::<T>(window, tiling, whole))?;
            Ok((tiling, entries))
        })
        .collect()
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let mut specs = vec![combine_entry::<T>()?.spec().clone()];
    for window in [8, 16] {
        for (_, entries) in spmm_entries::<T>(window)? {
            specs.extend(entries.iter().map(|e| e.spec().clone()));
        }
        let sddmm = RunVariants::entries(|whole| sddmm_entry::<T>(window, whole))?;
        specs.extend(sddmm.iter().map(|e| e.spec().clone()));
    }
    Ok(specs)
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = build::all_specs()?;
    specs.extend(specs_of::<half::f16>()?);
    specs.extend(specs_of::<f32>()?);
    Ok(specs)
}

/// The algorithm `auto` runs on ME-BCRS: 16x1 vectors when the descriptor's block shape has
/// 16 rows, 8x1 otherwise.
pub(crate) fn auto_algorithm(block: Option<BlockShape>) -> Algorithm {
    if block.is_some_and(|b| b.rows == 16) {
        Algorithm::FlashSparse16x1
    } else {
        Algorithm::FlashSparse
    }
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
    let algorithm = match algorithm {
        Algorithm::Auto => auto_algorithm(block),
        chosen => chosen,
    };
    let window = match algorithm {
        Algorithm::FlashSparse => 8,
        Algorithm::FlashSparse16x1 => 16,
        other => {
            return Err(Error::internal(format!(
                "{op} with {other} was routed to the FlashSparse family"
            )))
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
    Ok((algorithm, MeBcrsShape::new(window, k)?))
}

/// ME-BCRS of `a` built on `backend`'s device and read back: what the plans run on.
pub fn me_bcrs_on_device<T: Scalar, I: SpIndex>(
    backend: &CudaBackend,
    a: CsrRef<'_, T, I>,
    shape: MeBcrsShape,
) -> Result<MeBcrs<T>> {
    let device = backend.device();
    let builder = BuildEntries::<T>::new(shape.window())?.load(device)?;
    DeviceMeBcrs::build(device, &builder, a, shape, &mut PlanClock::start())?.to_host(device)
}

/// The entries of a kernel's two variants ([`RunVariants`]), the whole-run one first.
type VariantEntries<P> = [Entry<P>; 2];

/// A kernel in its two variants (flashsparse.cu): `whole` reads each lane's run of a dense
/// operand with one access, `elem` element by element.
struct RunVariants<P> {
    whole: Kernel<P>,
    elem: Kernel<P>,
}

impl<P: KernelParams> RunVariants<P> {
    /// The entries of both variants, `entry(whole_runs)`.
    fn entries(entry: impl Fn(bool) -> Result<Entry<P>>) -> Result<VariantEntries<P>> {
        Ok([entry(true)?, entry(false)?])
    }

    fn load(device: &Arc<Device>, [whole, elem]: &VariantEntries<P>) -> Result<Self> {
        Ok(RunVariants {
            whole: device.kernel(whole)?,
            elem: device.kernel(elem)?,
        })
    }

    fn get(&self, whole_runs: bool) -> &Kernel<P> {
        if whole_runs {
            &self.whole
        } else {
            &self.elem
        }
    }
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

/// Floats of the split-window workspace for N up to `width`: `slots` slots of `window` rows
/// of N rounded up to [`WORKSPACE_ALIGN`].
fn workspace_len(slots: u32, window: usize, width: usize) -> Result<usize> {
    width
        .checked_next_multiple_of(WORKSPACE_ALIGN as usize)
        .and_then(|ld| ld.checked_mul(window))
        .and_then(|row| row.checked_mul(slots as usize))
        .ok_or_else(|| {
            Error::invalid(format!(
                "a FlashSparse workspace for N = {width} overflows usize"
            ))
        })
}

/// The FlashSparse SpMM kernels of one plan, the ME-BCRS matrix and the work they share.
pub(crate) struct SpmmFamily<T: Scalar> {
    a: DeviceMeBcrs<T>,
    tasks: DeviceTasks,
    /// The kernels for each of the plan's [`WARP_COLS`], with their lane run lengths.
    kernels: Vec<(SpmmTiling, RunVariants<FsSpmm<T>>)>,
    combine: Kernel<FsCombine<T>>,
    /// Partial sums of split windows ([`workspace_len`]), sized for the reserved N; `None`
    /// when no window is split.
    workspace: Option<CudaSlice<f32>>,
}

/// A planned FlashSparse SpMM.
pub(crate) fn spmm_plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmmDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, SpmmFamily<T>>> {
    let (algorithm, shape) = resolve(OpKind::Spmm, desc.precision, desc.algorithm, desc.block)?;
    let builder = BuildEntries::<T>::new(shape.window())?;
    let spmm = spmm_entries::<T>(shape.window())?;
    let combine = combine_entry::<T>()?;
    let mut specs = builder.specs();
    specs.extend(spmm.iter().flat_map(|(_, e)| e.iter().map(Entry::spec)));
    specs.push(combine.spec());
    let (base, mut clock) = PlanBase::new(device, a, desc.info(algorithm), &specs, clock)?;
    let builder = builder.load(device)?;
    let kernels = spmm
        .iter()
        .map(|(tiling, entries)| Ok((*tiling, RunVariants::load(device, entries)?)))
        .collect::<Result<Vec<_>>>()?;
    let combine = device.kernel(&combine)?;
    clock.lap(device, Phase::Kernels)?;
    let m = DeviceMeBcrs::build(device, &builder, a, shape, &mut clock)?;
    let task_len = task_vectors(m.vectors() as u64, device.info.multiprocessors);
    let tasks = Tasks::new(&m.host_window_ptr, task_len);
    clock.lap(device, Phase::Host)?;
    let tasks = DeviceTasks::upload(device, &tasks, task_len)?;
    clock.lap(device, Phase::Transfer)?;
    let mut family = SpmmFamily {
        a: m,
        tasks,
        kernels,
        combine,
        workspace: None,
    };
    let workspace = family.reserve(&base, desc.reserved_width())?;
    clock.lap(device, Phase::Device)?;
    let bytes = family.a.bytes() + family.tasks.bytes() + workspace;
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> Kernels<T> for SpmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values {
            buffer: &self.a.values,
            slots: Some(&self.a.slots),
        }
    }

    fn reserve(&mut self, base: &PlanBase<T>, width: usize) -> Result<usize> {
        if self.tasks.slots == 0 {
            return Ok(0);
        }
        let len = workspace_len(self.tasks.slots, self.a.shape.window(), width)?;
        base.device.grow_zeroed(
            &mut self.workspace,
            len,
            "allocating the FlashSparse workspace",
        )
    }
}

impl<T: Scalar> SpmmKernels<T> for SpmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmmOperands, T::Acc>) -> Result<()> {
        let (device, ops, n) = (&base.device, &run.ops, run.ops.n);
        let h = self.a.shape.window() as u32;
        // The narrowest pass that covers N, else the widest, striding over N.
        let pick = self
            .kernels
            .iter()
            .position(|(t, _)| t.columns() >= n)
            .unwrap_or(self.kernels.len() - 1);
        let (tiling, variants) = &self.kernels[pick];
        let b_whole = ops.b.rows_in_runs(tiling.run as usize) && n % tiling.run == 0;
        // Runs of C are vector-accessed when rows are contiguous and their leading dimension
        // keeps every run aligned (the kernel checks each run is inside N).
        let c_vec = ops.c.rows_in_runs(tiling.output_run(h) as usize);
        let ws_ld = n
            .checked_next_multiple_of(WORKSPACE_ALIGN)
            .ok_or_else(|| Error::overflow::<u32>("FlashSparse workspace row", n as usize))?;
        let workspace = match &self.workspace {
            Some(w) if w.len() >= workspace_len(self.tasks.slots, h as usize, n as usize)? => {
                Some(w)
            }
            None if self.tasks.slots == 0 => None,
            _ => {
                return Err(Error::internal(format!(
                    "the FlashSparse workspace is smaller than a run of N = {n} within the \
                     reservation needs"
                )))
            }
        };
        let (tasks, dense) = (&self.tasks, SpmmDense::new(run));
        let params = FsSpmm {
            tasks: tasks.count,
            task_window: Ptr::of(&tasks.window, device),
            task_windows: Ptr::of(&tasks.windows, device),
            task_start: Ptr::of(&tasks.start, device),
            task_end: Ptr::of(&tasks.end, device),
            task_slot: Ptr::of(&tasks.slot, device),
            window_ptr: Ptr::of(&self.a.window_ptr, device),
            vec_col: Ptr::of(&self.a.vec_col, device),
            values: Ptr::of_buffer(&self.a.values),
            rows: self.a.rows,
            c_vec: u32::from(c_vec),
            ws: workspace.map_or(MutPtr::NULL, |w| MutPtr::of(w, device)),
            ws_ld,
            dense,
        };
        let config = LaunchConfig {
            grid_dim: (
                tasks.count.div_ceil(WARPS).max(1),
                n.div_ceil(tiling.columns()).min(MAX_GRID_Y),
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: a task's windows are below the window count (window_ptr is read at most to
        // index windows), its vectors lie inside them and a chunk holds whole blocks, so every
        // value read is a slot below vectors * h and every column < cols = B's rows; B spans
        // cols x n and C rows x n at their strides (bound operands); runs start at multiples of
        // their length and are vector-accessed only when the flags above make them aligned
        // (allocations are 256-byte aligned) and whole (inside N); chunks with a slot write
        // slots * h rows of ws_ld floats, which the workspace holds (checked above), in runs that
        // ws_ld (a multiple of 16) keeps aligned.
        unsafe { variants.get(b_whole).launch(config, &params) }?;
        let Some(workspace) = workspace else {
            return Ok(());
        };
        let group_rows = combine_group_rows(tasks.split, h, n, device.info.multiprocessors);
        // One block row per group of rows of a split window, the kernel striding past
        // MAX_GRID_Y.
        let groups = u64::from(tasks.split) * u64::from(h.div_ceil(group_rows));
        let params = FsCombine {
            split: tasks.split,
            split_window: Ptr::of(&tasks.split_window, device),
            split_slot: Ptr::of(&tasks.split_slot, device),
            window_ptr: Ptr::of(&self.a.window_ptr, device),
            chunk_len: tasks.len,
            h,
            group_rows,
            rows: self.a.rows,
            ws: Ptr::of(workspace, device),
            ws_ld,
            dense,
        };
        let config = LaunchConfig {
            grid_dim: (
                n.div_ceil(THREADS),
                groups.clamp(1, u64::from(MAX_GRID_Y)) as u32,
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the split windows' slots were written by fs_spmm before, on this stream, for
        // every row of the window below `rows` and every column below n; C as above.
        unsafe { self.combine.launch(config, &params) }
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

/// The FlashSparse SDDMM kernels of one plan and the ME-BCRS pattern they fill.
pub(crate) struct SddmmFamily<T: Scalar> {
    s: DeviceMeBcrs<T>,
    tiles: DeviceTiles,
    kernels: RunVariants<FsSddmm<T>>,
    order: ValueOrder,
    scale_by_values: bool,
}

/// A planned FlashSparse SDDMM.
pub(crate) fn sddmm_plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    s: CsrRef<'_, T, I>,
    desc: &SddmmDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, SddmmFamily<T>>> {
    let (algorithm, shape) = resolve(OpKind::Sddmm, desc.precision, desc.algorithm, desc.block)?;
    let builder = BuildEntries::<T>::new(shape.window())?;
    let sddmm = RunVariants::entries(|whole| sddmm_entry::<T>(shape.window(), whole))?;
    let mut specs = builder.specs();
    specs.extend(sddmm.iter().map(Entry::spec));
    let (base, mut clock) = PlanBase::new(device, s, desc.info(algorithm), &specs, clock)?;
    let builder = builder.load(device)?;
    let kernels = RunVariants::load(device, &sddmm)?;
    clock.lap(device, Phase::Kernels)?;
    let m = DeviceMeBcrs::build(device, &builder, s, shape, &mut clock)?;
    let slots = m.download_slots(device)?;
    clock.lap(device, Phase::Device)?;
    let order = m.value_order(&slots)?;
    // An MMA covers 16 vectors (8-row windows, m side) or 8 (16-row windows, n side).
    let per_tile = if shape.window() == 8 { 16 } else { 8 };
    let tiles = Tiles::new(&m.host_window_ptr, per_tile);
    clock.lap(device, Phase::Host)?;
    let tiles = DeviceTiles::upload(device, &tiles)?;
    clock.lap(device, Phase::Transfer)?;
    let bytes = m.bytes() + tiles.bytes();
    let family = SddmmFamily {
        s: m,
        tiles,
        kernels,
        order,
        scale_by_values: desc.scale_by_values,
    };
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> Kernels<T> for SddmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values {
            buffer: &self.s.values,
            slots: Some(&self.s.slots),
        }
    }
}

impl<T: Scalar> SddmmKernels<T> for SddmmFamily<T> {
    fn value_order(&self) -> Option<&ValueOrder> {
        Some(&self.order)
    }

    /// The SDDMM kernel itself: with alpha = 0 it reads no input and writes 0 to the slots
    /// without an entry, as every run does.
    fn scale(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        self.run(base, run)
    }

    fn run(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        let (device, s, ops) = (&base.device, &self.s, &run.ops);
        // Each lane reads RUN_BYTES of the inner dimension at once: 8 f16 or 4 f32.
        let lane_run = RUN_BYTES as usize / size_of::<T>();
        let whole_runs = ops.x.rows_in_runs(lane_run)
            && ops.y.rows_in_runs(lane_run)
            && ops.k as usize % lane_run == 0;
        let params = FsSddmm {
            tiles: self.tiles.count,
            tile_window: Ptr::of(&self.tiles.window, device),
            tile_start: Ptr::of(&self.tiles.start, device),
            window_ptr: Ptr::of(&s.window_ptr, device),
            vec_col: Ptr::of(&s.vec_col, device),
            vec_mask: Ptr::of(&s.vec_mask, device),
            values: Ptr::of_buffer(&s.values),
            scale_by_values: u32::from(self.scale_by_values),
            rows: s.rows,
            dense: SddmmDense::new(run),
        };
        let config = LaunchConfig {
            grid_dim: (self.tiles.count.div_ceil(WARPS), 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: tiles lie inside their windows, so every slot written is below vectors * h =
        // C's length (a bound operand of that many elements), columns are < cols = Y's rows and
        // rows past M are never read; X spans rows x k and Y cols x k at their strides (bound
        // operands); vector loads only where `whole_runs` makes them aligned and inside the rows.
        unsafe { self.kernels.get(whole_runs).launch(config, &params) }
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
        // The table refuses other algorithms before the family sees them.
        assert!(matches!(
            pick(Algorithm::Rode, None),
            Err(Error::Internal { .. })
        ));
        assert_eq!(
            auto_algorithm(Some(BlockShape::new(16, 4))),
            Algorithm::FlashSparse16x1
        );
        assert_eq!(auto_algorithm(None), Algorithm::FlashSparse);
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
