//! RoDe plans (row decomposition, Pang et al., PPoPP'24): CSR SpMM and SDDMM over rows cut into
//! block segments and residuals (`rode.cu` has the kernels and their design), and the rule
//! `auto` uses to choose them over the `vector` kernels.
//!
//! Segments have 512 entries, fewer on matrices too small to fill the device with those
//! ([`segment_length`]); only rows of at least a segment and a tile are split in several
//! segments; the others are written by their one part. The two algorithms differ in how split rows are combined:
//! - `rode`: the segments add into C with atomics after C = beta*C on those rows, so results
//!   may differ in the last bits from run to run (f16 storage excepted: it has no atomic add of
//!   f32 sums, so its split rows are combined as below).
//! - `rode-deterministic`: each segment stores its sums in a workspace slot, and the last of a
//!   row's segments to finish adds the row's slots in order, in the same launch. The workspace
//!   (slots x N sums, and arrival counters) is sized at plan time for the reserved N and grows
//!   only in `reserve`.
//!
//! Segments and residuals run in one launch on the device's stream, the segments' blocks first in
//! the grid so that the long work starts first: the two parts still run concurrently, and a run
//! pays no fork and join of a second stream (about 1.3 us a run on an H200, docs/results/rode.md).
//! A deterministic SpMM and every SDDMM are that one launch; the atomic SpMM of a matrix with
//! split rows is two.
//! SDDMM writes every output from exactly one part: both algorithms are the same deterministic
//! kernels.

mod decomposition;

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{
    Algorithm, CsrRef, DType, Error, OpKind, Precision, Result, RowStats, Scalar, SddmmDesc,
    SpIndex, SpmmDesc,
};

use crate::device::Device;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, MutPtr, Ptr,
};
use crate::matrix::DeviceCsr;
use crate::operand::{Bound, Run, SddmmDense, SddmmOperands, SpmmDense, SpmmOperands};
use crate::plan::{
    CudaPlan, Kernels, Phase, PlanBase, PlanClock, SddmmKernels, SpmmKernels, Values, WidthDesc,
};
use crate::spmm::VECTORS;
use decomposition::{
    Combine, Decomposition, Preprocess, RodeCount, RodeFill, RodeScan, ALIGN, NONE, PRE_ROWS,
    PRE_THREADS, SCAN_THREADS, TILE,
};

/// Entries per block segment at most: the published code's length, used as is on matrices
/// large enough to fill the device with segments of it.
const SEGMENT: u32 = 512;
/// Entries per block segment at least: two tiles, so the double-buffered copies overlap.
const MIN_SEGMENT: u32 = 2 * TILE;
/// ... for SDDMM: one tile, since its segments share no output and splitting a row costs only
/// the X row's second read.
const SDDMM_MIN_SEGMENT: u32 = TILE;
/// Sub-warps per multiprocessor the segment length is chosen to give: a full multiprocessor at
/// 32 lanes per sub-warp, a quarter at 8.
const SEGMENTS_PER_SM: u64 = 64;
/// Threads per block of the SpMM and SDDMM kernels (`RODE_BLOCK`).
const BLOCK: u32 = 128;
/// The largest grid.x; both parts' blocks must fit in it.
const MAX_GRID_X: u32 = (1 << 31) - 1;
/// The largest grid.y; the SpMM kernels stride over the column tiles beyond it.
const MAX_GRID_Y: u32 = 65_535;
/// Tiles of shared memory per sub-warp (`RODE_BUFFERS`): the double buffer of a
/// segment, and a residual's one tile in the first of them.
const BUFFERS: u32 = 2;
/// Entries of a sub-block of the kernels' register pipeline (`RODE_SUB`; half as many for f64).
const SUB: u32 = 8;
/// Lanes the SDDMM kernels need at least: their reduction leaves one entry of a sub-block
/// (`rode_sub<T>::N`, at most [`SUB`]) in each lane.
const SDDMM_MIN_LANES: u32 = SUB;
/// Lanes the SpMM kernels take at least.
const SPMM_MIN_LANES: u32 = 4;

/// Entries per block segment for a matrix of `nnz` entries on a device of `multiprocessors`:
/// [`SEGMENT`] where the matrix has entries for [`SEGMENTS_PER_SM`] segments of it on every
/// multiprocessor, else shorter, down to `min` ([`MIN_SEGMENT`] for SpMM,
/// [`SDDMM_MIN_SEGMENT`]), a multiple of the tile. A matrix of a few thousand long rows (a pruned
/// layer, a dense-ish block) otherwise keeps a few sub-warps per multiprocessor busy; shorter
/// SpMM segments cost one more partial sum of C per segment. One-tile SDDMM segments made
/// `rode-deterministic` SDDMM 1.06x faster on the 20 corpus matrices under 100k entries and 1.05x
/// on the 18 of 100k to 578k (H200, docs/results/rode.md); one-tile SpMM segments were 0.92x as
/// fast at N = 128 on the latter.
fn segment_length(nnz: usize, multiprocessors: u32, min: u32) -> u32 {
    let per_segment = nnz as u64 / (u64::from(multiprocessors.max(1)) * SEGMENTS_PER_SM);
    let tiles = (per_segment / u64::from(TILE)).min(u64::from(SEGMENT / TILE)) as u32;
    (tiles * TILE).max(min)
}

/// `auto` picks RoDe for a matrix with a row at least this long: one RoDe splits even at its
/// shortest segment.
const AUTO_LONG_ROW: usize = (MIN_SEGMENT + TILE) as usize;
/// ... for a matrix with fewer entries than this, whose time is the latency of its longest row
/// rather than the throughput of all of them;
const AUTO_SMALL_NNZ: usize = 100_000;
/// ... and for SDDMM, for a matrix whose mean row is at least this long,
const AUTO_SDDMM_MEAN_ROW: f64 = 13.0;
/// ... unless it is in f64 and has at least this many entries;
const AUTO_SDDMM_F64_VECTOR_NNZ: usize = 1 << 20;
/// ... and for SpMM, for a matrix of fewer rows than this: about the warps an H100 or H200
/// holds at once (132 multiprocessors of 64), so `vector`'s rows leave it short of one full
/// wave. bcsstk16 (4,884 rows of 59) and a 3D stencil of 4 x 4 blocks of 5,324 rows of 26 ran
/// RoDe 1.3x-1.8x as fast at N = 32 and `vector` at most 4% faster at N = 128; at 8,788 to
/// 15,444 rows the two traded places (H200, `docs/results/h200-2026-11-29g.md`).
const AUTO_SPMM_FEW_ROWS: usize = 8192;
/// The RoDe algorithm `auto` picks: the deterministic one, so `auto` stays bit-reproducible as
/// `vector` is; its workspace traffic costs about what the atomic variant's read-modify-writes
/// of C do.
const AUTO_RODE: Algorithm = Algorithm::RodeDeterministic;

/// The algorithm `auto` runs for CSR SpMM and SDDMM on the cuda backend: RoDe for a matrix with
/// a row of at least [`AUTO_LONG_ROW`] entries, or fewer than [`AUTO_SMALL_NNZ`] entries, for
/// SDDMM also for one whose mean row has at least [`AUTO_SDDMM_MEAN_ROW`], except in f64 from
/// [`AUTO_SDDMM_F64_VECTOR_NNZ`] entries on, and for SpMM also for one of fewer than
/// [`AUTO_SPMM_FEW_ROWS`] rows; `vector` otherwise.
///
/// `vector` gives a row to one sub-warp, which walks it one dependent load after another, so its
/// time follows the longest row: on a matrix too small to fill the device that is the whole time, a
/// load latency per entry. RoDe's time follows the entries (segments of at most [`SEGMENT`], tiles
/// copied ahead), plus a fixed cost: masked tile ends, the combining of split rows. Calibrated on
/// an H100 and checked again on an H200 after the one-launch changes (f32; SpMM N = 32 and 128,
/// SDDMM K = 32; the 49 corpus matrices and a generated Poisson 3D and R-MAT; docs/results/rode.md),
/// H200 figures:
/// - a longest row of 96 or more: RoDe faster in all 66 cases, 1.12x to 84x;
/// - fewer than 100k entries and rows under 96: RoDe faster in 45 of 48 cases (the 3 others are
///   SpMM at N = 128 on matrices of rows under 32, where `vector` is 1.3x to 1.45x faster; at
///   N = 32 RoDe wins on the same matrices, and N is unknown at plan time);
/// - 100k entries or more and rows under 96: `vector`'s SpMM faster in 23 of 26 cases (up to
///   2.1x); its SDDMM faster on 5 of the 8 matrices of mean row under 13, RoDe's on all 5 of mean
///   row 13 or more (1.26x to 2.5x).
///
/// On the H200 the picks lose 1.3% (geomean) against always taking the faster of the two; the
/// best of a grid of other thresholds (longest row 64, 96 or 128; SDDMM mean row 8 to 20) loses
/// 1.2%.
///
/// In f64, RoDe's SDDMM tiles of X and Y hold half as many columns as in f32. Over SDDMM of mean
/// rows of 13 or more and no row of 96, K = 32 and 128, `vector` was faster in all 10 f64 cases
/// of 1M entries or more (5% to 19%: xenon1, stencils of 4 x 4 blocks, uniform matrices), in 5
/// of the 8 below (RoDe up to 1.5x faster on bcsstk16 at K = 32), and RoDe in 16 of the 18 f32
/// cases (H200, `docs/results/h200-2026-11-29f.md`).
///
/// The layout and width of the dense operands are unknown at plan time and play no part.
pub(crate) fn auto_algorithm(
    op: OpKind,
    stats: &RowStats,
    (rows, nnz): (usize, usize),
    precision: Precision,
) -> Algorithm {
    if prefers_rode(op, stats, (rows, nnz), precision) {
        AUTO_RODE
    } else {
        Algorithm::Vector
    }
}

/// Columns of B (SpMM) or of X and Y (SDDMM) from which `auto` runs cuSPARSE on the matrices
/// [`spmm_wide_on_vendor`] and [`sddmm_wide_on_vendor`] accept.
pub(crate) const AUTO_VENDOR_WIDTH: usize = 128;
/// SpMM: matrices of at least this many entries, and of long rows, hand wide f32 products to
/// cuSPARSE.
const AUTO_VENDOR_MIN_NNZ: usize = 500_000;
/// SDDMM: matrices whose mean row holds at least this many entries hand wide products to
/// cuSPARSE.
const AUTO_VENDOR_SDDMM_MEAN_ROW: f64 = 20.0;

/// Whether `auto` SpMM hands products of at least [`AUTO_VENDOR_WIDTH`] columns to cuSPARSE's
/// SpMM (its default algorithm) where it runs RoDe for narrower ones: in f32, on matrices of a
/// row of [`AUTO_LONG_ROW`] entries or more (RoDe's) and at least [`AUTO_VENDOR_MIN_NNZ`]
/// entries: power-law graphs and circuits whose B rows stream from memory. On an H200
/// (`docs/results/h200-2026-11-29h.md`), cuSPARSE's default algorithm against RoDe there:
/// - N = 128: R-MAT of 8.4M and 34M entries 1.14x and 1.09x as fast, musae_github 1.04x,
///   c-62 0.99x;
/// - N = 256: R-MAT of 8.4M entries 1.19x, musae_github 1.13x, c-62 1.08x;
/// - N = 64: RoDe 1.20x-1.52x as fast on all four, so narrower products keep it.
///
/// In f64 RoDe was 1.07x-1.24x as fast at every width on the same matrices, and in f16 3.2x on
/// R-MAT at N = 128 (`docs/results/h200-2026-11-27j.md`). On musae_facebook (342k entries)
/// cuSPARSE's default algorithm ran 0.87x as fast at N = 128.
pub(crate) fn spmm_wide_on_vendor(stats: &RowStats, nnz: usize, precision: Precision) -> bool {
    precision.storage == DType::F32 && stats.max >= AUTO_LONG_ROW && nnz >= AUTO_VENDOR_MIN_NNZ
}

/// Whether `auto` SDDMM hands products of at least [`AUTO_VENDOR_WIDTH`] columns (K) to
/// cuSPARSE's SDDMM where it runs RoDe or `vector` for narrower ones: in f64 and f32, on matrices
/// whose mean row holds at least [`AUTO_VENDOR_SDDMM_MEAN_ROW`] entries (FEM and block matrices,
/// pruned layers), unless the output is scaled by A's values (cuSPARSE's SDDMM only samples), and
/// except in f32 on matrices of fewer than [`AUTO_SMALL_NNZ`] entries. On an H200
/// (`docs/results/h200-2026-11-29h.md`), cuSPARSE's SDDMM against `auto`'s pick on the six
/// such matrices measured (mean rows of 24 to 60):
/// - f64: K = 128 1.09x-1.47x as fast, K = 256 1.26x-1.70x; at K = 64 0.95x-1.34x;
/// - f32: K = 128 0.94x-1.21x (0.94x: bcsstk14, 11.7 against 11.0 µs), K = 256 1.36x-1.90x; at
///   K = 64 0.78x-1.02x.
///
/// On the matrices of mean rows of 4 to 16 measured it ran 0.37x-0.88x as fast at K = 128.
///
/// Small matrices in f32 (`docs/results/h200-2026-11-29j.md`, with RoDe taking K in
/// pipelined chunks): on four pruned layers and `mbeacxc`, of 13k to 79k entries and mean rows
/// of 26 to 154, and on bcsstk14, RoDe ran 0.97x-1.71x cuSPARSE's speed at K = 128 and 256
/// (geomean 1.22x); cuSPARSE's SDDMM took 10 µs or more on each. In f64 the same matrices ran
/// 0.82x-1.58x, so f64 keeps cuSPARSE. From 118k entries on, cuSPARSE was as fast or faster in
/// f32 on nine of the twelve matrices measured; RoDe was faster on a pruned layer of 118k
/// entries, `dnn_images1024_subset` (123k) and `facebook_MIT8` (502k, rows of up to 708).
pub(crate) fn sddmm_wide_on_vendor(
    stats: &RowStats,
    nnz: usize,
    precision: Precision,
    scale_by_values: bool,
) -> bool {
    let small_f32 = precision.storage == DType::F32 && nnz < AUTO_SMALL_NNZ;
    matches!(precision.storage, DType::F64 | DType::F32)
        && stats.mean >= AUTO_VENDOR_SDDMM_MEAN_ROW
        && !scale_by_values
        && !small_f32
}

fn prefers_rode(
    op: OpKind,
    stats: &RowStats,
    (rows, nnz): (usize, usize),
    precision: Precision,
) -> bool {
    let f64_stream = precision.storage == DType::F64 && nnz >= AUTO_SDDMM_F64_VECTOR_NNZ;
    stats.max >= AUTO_LONG_ROW
        || nnz < AUTO_SMALL_NNZ
        || (op == OpKind::Sddmm && stats.mean >= AUTO_SDDMM_MEAN_ROW && !f64_stream)
        || (op == OpKind::Spmm && rows < AUTO_SPMM_FEW_ROWS)
}

kernel_params! {
    /// How the segments of split rows reach C: `partials` null for atomics, else the workspace
    /// (slots x n accumulation values) and `arrivals` (slots x column tiles counters);
    /// `row_ptr` and `seg_len` lead the last segment of a row to the row's slots.
    pub(crate) struct Combining<T> {
        partials: out(acc),
        arrivals: out(u32),
        row_ptr: ptr(u32),
        seg_len: u32,
    }
}

kernel_params! {
    /// The parts' grid of `rode_spmm` and `rode_sddmm`: sub-warps of `lanes` lanes over the parts
    /// (row, lo, hi), the segments in grid blocks `0..block_ctas`, the residuals after them.
    pub(crate) struct RodeParts {
        lanes: u32,
        block_ctas: u32,
        segments: u32,
        residuals: u32,
        part_row: ptr(u32),
        part_lo: ptr(u32),
        part_hi: ptr(u32),
    }
}

kernel_params! {
    /// `rode_spmm<T, V>`: the parts, each segment's workspace slot, and A.
    pub(crate) struct RodeSpmm<T> {
        parts: plain(RodeParts),
        seg_slot: ptr(u32),
        col_idx: ptr(u32),
        values: ptr(T),
        combining: sub(Combining),
        dense: sub(SpmmDense),
    }
}

kernel_params! {
    /// `rode_scale_rows<T>`: C = beta*C on the `listed` rows of `listed_row` (B unused).
    pub(crate) struct RodeScaleRows<T> {
        listed: u32,
        listed_row: ptr(u32),
        dense: sub(SpmmDense),
    }
}

kernel_params! {
    /// `rode_sddmm<T, V, WHOLE>`: the parts, and S's pattern and values.
    pub(crate) struct RodeSddmm<T> {
        parts: plain(RodeParts),
        col_idx: ptr(u32),
        s_values: ptr(T),
        scale_by_values: u32,
        dense: sub(SddmmDense),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "rode",
    code: include_str!("../kernels/rode.cu"),
    params: &[
        <SpmmDense<f32> as KernelParams>::C_DECL,
        <SddmmDense<f32> as KernelParams>::C_DECL,
        <Combining<f32> as KernelParams>::C_DECL,
        <RodeParts as KernelParams>::C_DECL,
        <RodeSpmm<f32> as KernelParams>::C_DECL,
        <RodeScaleRows<f32> as KernelParams>::C_DECL,
        <RodeSddmm<f32> as KernelParams>::C_DECL,
        <RodeCount as KernelParams>::C_DECL,
        <RodeScan as KernelParams>::C_DECL,
        <RodeFill as KernelParams>::C_DECL,
    ],
    defines: &[
        ("RODE_TILE", TILE),
        ("RODE_ALIGN", ALIGN),
        ("RODE_NONE", NONE),
        ("RODE_BLOCK", BLOCK),
        ("RODE_BUFFERS", BUFFERS),
        ("RODE_SUB", SUB),
        ("RODE_PRE_THREADS", PRE_THREADS),
        ("RODE_PRE_ROWS", PRE_ROWS),
        ("RODE_SCAN_THREADS", SCAN_THREADS),
    ],
};

fn spmm_entry<T: Scalar>(values: u32) -> Result<Entry<RodeSpmm<T>>> {
    Entry::new(&SOURCE, "rode_spmm", &[&c_type(T::DTYPE)?, &values])
}

fn sddmm_entry<T: Scalar>(shape: SddmmShape) -> Result<Entry<RodeSddmm<T>>> {
    Entry::new(
        &SOURCE,
        "rode_sddmm",
        &[
            &c_type(T::DTYPE)?,
            &shape.values,
            &shape.whole,
            &shape.chunked,
        ],
    )
}

/// What picks an SDDMM kernel: V, whether V divides K (`WHOLE` in rode.cu), and whether K spans
/// more than one chunk of W*V columns (`CHUNKED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SddmmShape {
    values: u32,
    whole: bool,
    chunked: bool,
}

impl SddmmShape {
    /// Every shape a run can take: for V = 1 spans are always whole.
    fn all() -> impl Iterator<Item = SddmmShape> {
        VECTORS.iter().flat_map(|&values| {
            [true, false]
                .into_iter()
                .filter(move |&whole| whole || values > 1)
                .flat_map(move |whole| {
                    [false, true].map(move |chunked| SddmmShape {
                        values,
                        whole,
                        chunked,
                    })
                })
        })
    }

    fn of(lanes: Lanes, k: u32) -> Self {
        SddmmShape {
            values: lanes.values,
            whole: k % lanes.values == 0,
            chunked: u64::from(k) > u64::from(lanes.lanes * lanes.values),
        }
    }
}

fn scale_rows_entry<T: Scalar>() -> Result<Entry<RodeScaleRows<T>>> {
    Entry::new(&SOURCE, "rode_scale_rows", &[&c_type(T::DTYPE)?])
}

/// Whether split rows of `dtype` may be combined with atomic adds into C (`atomic_combine` in
/// rode.cu): f16 has no atomic add of f32 sums into f16 storage.
fn atomic_combine(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F64)
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let mut specs: Vec<KernelSpec> = Variants::entries(VECTORS.iter().copied(), spmm_entry::<T>)?
        .iter()
        .map(|(_, e)| e.spec().clone())
        .collect();
    specs.extend(
        Variants::entries(SddmmShape::all(), sddmm_entry::<T>)?
            .iter()
            .map(|(_, e)| e.spec().clone()),
    );
    if atomic_combine(T::DTYPE) {
        specs.push(scale_rows_entry::<T>()?.spec().clone());
    }
    Ok(specs)
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs: Vec<KernelSpec> = Preprocess::new()?.specs().into_iter().cloned().collect();
    specs.extend(specs_of::<f64>()?);
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    Ok(specs)
}

/// One kernel per variant `K` of a template: SpMM's per V of [`VECTORS`], SDDMM's per
/// [`SddmmShape`]; the sub-warp width is a parameter.
struct Variants<K, P>(Vec<(K, Kernel<P>)>);

impl<K: Copy + PartialEq + std::fmt::Debug, P: KernelParams> Variants<K, P> {
    fn entries(
        keys: impl IntoIterator<Item = K>,
        entry: impl Fn(K) -> Result<Entry<P>>,
    ) -> Result<Vec<(K, Entry<P>)>> {
        keys.into_iter().map(|k| Ok((k, entry(k)?))).collect()
    }

    fn load(device: &Arc<Device>, entries: &[(K, Entry<P>)]) -> Result<Self> {
        entries
            .iter()
            .map(|(k, e)| Ok((*k, device.kernel(e)?)))
            .collect::<Result<_>>()
            .map(Variants)
    }

    fn get(&self, key: K) -> Result<&Kernel<P>> {
        self.0
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, kernel)| kernel)
            .ok_or_else(|| Error::internal(format!("no RoDe kernel for {key:?}")))
    }
}

/// The sub-warp shape of a run: W lanes of V values each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lanes {
    lanes: u32,
    values: u32,
}

impl Lanes {
    /// V the widest of [`VECTORS`] for which every operand read with vector loads has rows in
    /// runs of V (row-major, its leading dimension a multiple of V); unlike `vector`'s, the RoDe
    /// kernels read the last, partial span of a row element by element, so the row length need
    /// not be a multiple of V. W spans `len` where the widths allow, at least `min`.
    fn new(len: usize, operands: &[&Bound], min: u32) -> Self {
        let values = VECTORS
            .iter()
            .rev()
            .copied()
            .find(|&v| operands.iter().all(|d| d.rows_in_runs(v as usize)))
            .unwrap_or(1);
        Lanes {
            lanes: crate::spmm::subwarp_lanes(len, values).max(min),
            values,
        }
    }

    /// Column tiles of W*V columns over `n` columns.
    fn column_tiles(self, n: u32) -> u32 {
        n.div_ceil(self.lanes * self.values)
    }

    /// The most column tiles an SpMM run of at most `width` columns has, whatever its shape: one
    /// while a sub-warp spans the row, else at most one per 32 columns (32 lanes of at least one
    /// value each).
    fn most_column_tiles(width: usize) -> usize {
        width.div_ceil(32).max(1)
    }

    /// The parts' grid of a launch ([`Lanes::config`]) whose first `block_ctas` blocks take the
    /// segments.
    fn parts(self, parts: &Decomposition, device: &Device, block_ctas: u32) -> RodeParts {
        RodeParts {
            lanes: self.lanes,
            block_ctas,
            segments: parts.segments,
            residuals: parts.residuals,
            part_row: Ptr::of(&parts.part_row, device),
            part_lo: Ptr::of(&parts.part_lo, device),
            part_hi: Ptr::of(&parts.part_hi, device),
        }
    }

    /// The parts' launch: one sub-warp per segment, then one per residual, over grid.x,
    /// `col_tiles` over grid.y; [`BUFFERS`] tiles of shared memory per sub-warp of
    /// `bytes_per_entry` (the size rode.cu's `tile_cols`/`tile_vals` carve). Returns the
    /// segments' blocks (the first ones) with it.
    fn config(
        self,
        segments: u32,
        residuals: u32,
        col_tiles: u32,
        bytes_per_entry: u32,
    ) -> Result<(u32, LaunchConfig)> {
        let subwarps = BLOCK / self.lanes;
        let block_ctas = segments.div_ceil(subwarps);
        let ctas = u64::from(block_ctas) + u64::from(residuals.div_ceil(subwarps));
        let ctas = u32::try_from(ctas)
            .ok()
            .filter(|&ctas| ctas <= MAX_GRID_X)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "RoDe's {segments} segments and {residuals} residuals need {ctas} blocks, \
                     more than grid.x's {MAX_GRID_X}"
                ))
            })?;
        Ok((
            block_ctas,
            LaunchConfig {
                grid_dim: (ctas, col_tiles.clamp(1, MAX_GRID_Y), 1),
                block_dim: (BLOCK, 1, 1),
                // At most 32 sub-warps * 2 tiles * 32 entries * 12 bytes = 24 KiB, under the
                // 48 KiB a kernel gets without opting in.
                shared_mem_bytes: subwarps * BUFFERS * TILE * bytes_per_entry,
            },
        ))
    }
}

/// The workspace of split rows combined through partials: `sums` (slots x N accumulation
/// values) and `arrivals` (slots x column tiles counters, zero between runs: the last segment
/// of a row clears its counter). Both are sized for the reserved N; none is held without split
/// rows.
#[derive(Default)]
struct Partials {
    sums: Option<CudaSlice<u8>>,
    arrivals: Option<CudaSlice<u32>>,
}

/// The length of a workspace array of `per` elements of `size` units per slot.
fn workspace_len(slots: u32, per: usize, size: usize) -> Result<usize> {
    (slots as usize)
        .checked_mul(per)
        .and_then(|v| v.checked_mul(size))
        .ok_or_else(|| {
            Error::invalid(format!(
                "a RoDe workspace of {slots} slots x {per} x {size} bytes overflows usize"
            ))
        })
}

impl Partials {
    /// Grows the workspace for runs up to `width` columns; returns the bytes it grew by.
    fn reserve<T: Scalar>(&mut self, device: &Device, slots: u32, width: usize) -> Result<usize> {
        let sums = workspace_len(slots, width, size_of::<T::Acc>())?;
        let counters = workspace_len(slots, Lanes::most_column_tiles(width), 1)?;
        Ok(
            device.grow_zeroed(&mut self.sums, sums, "allocating the RoDe workspace")?
                + device.grow_zeroed(
                    &mut self.arrivals,
                    counters,
                    "allocating the RoDe arrival counters",
                )?,
        )
    }

    /// The workspace of a run of `n` columns in `col_tiles` tiles (null pointers without split
    /// rows), checked to hold what the run writes.
    fn pointers<T: Scalar>(
        &self,
        device: &Device,
        slots: u32,
        n: u32,
        col_tiles: u32,
    ) -> Result<(MutPtr<T::Acc>, MutPtr<u32>)> {
        let sums = workspace_len(slots, n as usize, size_of::<T::Acc>())?;
        let counters = workspace_len(slots, col_tiles as usize, 1)?;
        let held_sums = self.sums.as_ref().map_or(0, |s| s.len());
        let held_counters = self.arrivals.as_ref().map_or(0, |a| a.len());
        if sums > held_sums || counters > held_counters {
            return Err(Error::internal(format!(
                "the RoDe workspace was not sized for a run of {n} columns in {col_tiles} tiles"
            )));
        }
        Ok((
            self.sums
                .as_ref()
                .map_or(MutPtr::NULL, |s| MutPtr::of_bytes(s, device)),
            self.arrivals
                .as_ref()
                .map_or(MutPtr::NULL, |a| MutPtr::of(a, device)),
        ))
    }
}

/// How the segments of split rows reach C.
enum SplitRows<T: Scalar> {
    /// `rode_scale_rows` (C = beta*C on the listed rows), then atomic adds.
    Atomics(Kernel<RodeScaleRows<T>>),
    /// Sums stored in the workspace, added by the last segment of each row to arrive.
    Partials(Partials),
}

/// A RoDe SpMM plan's kernels, the matrix and its decomposition.
pub(crate) struct RodeSpmmFamily<T: Scalar> {
    a: DeviceCsr<T>,
    parts: Decomposition,
    combine: Combine,
    kernels: Variants<u32, RodeSpmm<T>>,
    split_rows: SplitRows<T>,
}

/// A planned RoDe CSR SpMM; `algorithm` is [`Algorithm::Rode`] or
/// [`Algorithm::RodeDeterministic`].
pub(crate) fn spmm_plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmmDesc,
    algorithm: Algorithm,
    clock: PlanClock,
) -> Result<CudaPlan<T, RodeSpmmFamily<T>>> {
    let atomics = match algorithm {
        Algorithm::Rode => atomic_combine(T::DTYPE),
        Algorithm::RodeDeterministic => false,
        other => return Err(Error::internal(format!("{other} is not a RoDe algorithm"))),
    };
    let preprocess = Preprocess::new()?;
    let entries = Variants::entries(VECTORS.iter().copied(), spmm_entry::<T>)?;
    let scale_rows = atomics.then(scale_rows_entry::<T>).transpose()?;
    let mut specs: Vec<&KernelSpec> = preprocess.specs().to_vec();
    specs.extend(entries.iter().map(|(_, e)| e.spec()));
    specs.extend(scale_rows.iter().map(|e| e.spec()));
    let (mut base, mut clock) = PlanBase::new(device, a, desc.info(algorithm), &specs, clock)?;
    let seg_len = segment_length(a.nnz(), device.info.multiprocessors, MIN_SEGMENT);
    let csr = DeviceCsr::upload(device, a)?;
    clock.lap(device, Phase::Transfer)?;
    let (parts, combine) = Decomposition::for_spmm(device, &preprocess, &csr, seg_len)?;
    let split_rows = match &scale_rows {
        Some(entry) => SplitRows::Atomics(device.kernel(entry)?),
        None => SplitRows::Partials(Partials::default()),
    };
    let mut family = RodeSpmmFamily {
        a: csr,
        parts,
        combine,
        kernels: Variants::load(device, &entries)?,
        split_rows,
    };
    let workspace = family.reserve(&base, base.info.reserved_width)?;
    clock.lap(device, Phase::Device)?;
    // Atomics only ever add into rows split in several parts.
    base.info.deterministic = !(atomics && family.combine.slots > 0);
    let bytes = family.a.bytes() + family.parts.bytes() + family.combine.bytes() + workspace;
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> Kernels<T> for RodeSpmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values::csr_order(&self.a.values)
    }

    fn reserve(&mut self, base: &PlanBase<T>, width: usize) -> Result<usize> {
        match &mut self.split_rows {
            SplitRows::Atomics(_) => Ok(0),
            SplitRows::Partials(partials) => {
                partials.reserve::<T>(&base.device, self.combine.slots, width)
            }
        }
    }
}

impl<T: Scalar> SpmmKernels<T> for RodeSpmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmmOperands, T::Acc>) -> Result<()> {
        let (device, a, parts, combine, n) =
            (&base.device, &self.a, &self.parts, &self.combine, run.ops.n);
        let shape = Lanes::new(n as usize, &[&run.ops.b], SPMM_MIN_LANES);
        let col_tiles = shape.column_tiles(n);
        let value_bytes = size_of::<T>() as u32;
        let (block_ctas, config) =
            shape.config(parts.segments, parts.residuals, col_tiles, 4 + value_bytes)?;
        let dense = SpmmDense::new(run);
        let (partials, arrivals) = match &self.split_rows {
            SplitRows::Atomics(scale_rows) => {
                if combine.listed > 0 {
                    let params = RodeScaleRows {
                        listed: combine.listed,
                        listed_row: Ptr::of(&combine.listed_row, device),
                        dense,
                    };
                    let config = LaunchConfig {
                        grid_dim: (n.div_ceil(BLOCK), combine.listed.clamp(1, MAX_GRID_Y), 1),
                        block_dim: (BLOCK, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    // SAFETY: listed_row holds `listed` rows < rows; C spans rows x n at its
                    // strides (a bound operand); the grid covers n on x, the listed rows over y.
                    unsafe { scale_rows.launch(config, &params)? };
                }
                (MutPtr::NULL, MutPtr::NULL)
            }
            SplitRows::Partials(partials) => {
                partials.pointers::<T>(device, combine.slots, n, col_tiles)?
            }
        };
        let params = RodeSpmm {
            parts: shape.parts(parts, device, block_ctas),
            seg_slot: Ptr::of(&combine.seg_slot, device),
            col_idx: Ptr::of(&a.col_idx, device),
            values: Ptr::of_buffer(&a.values),
            combining: Combining {
                partials,
                arrivals,
                row_ptr: Ptr::of(&a.row_ptr, device),
                seg_len: parts.seg_len,
            },
            dense,
        };
        // SAFETY: the lists come from this matrix's decomposition, and the grid's first
        // block_ctas blocks cover the `segments` segments, BLOCK / W each, the others the
        // `residuals` residuals, so a sub-warp past either list's end leaves before reading it.
        // A segment reads entries from its tiles' aligned start (at most 3 before its first
        // entry) to its end, a residual its whole row of fewer than TILE entries, and columns
        // < cols; B spans cols x n and C rows x n at their strides (bound operands); V > 1 only
        // when B's rows come in runs of V (allocations are 256-byte aligned), so full vector
        // spans are aligned. With partials, the workspace holds slots x n accumulation values
        // and `arrivals` slots x col_tiles zeroed counters (checked above), which each run
        // leaves zeroed (the stream orders the runs); without, both are null and the kernel
        // adds atomically after rode_scale_rows, earlier on this stream. Shared memory is what
        // the kernel carves for BLOCK / W sub-warps of BUFFERS tiles, whichever part a block
        // runs.
        unsafe { self.kernels.get(shape.values)?.launch(config, &params) }
    }
}

/// A RoDe SDDMM plan's kernels, the pattern and its decomposition.
pub(crate) struct RodeSddmmFamily<T: Scalar> {
    s: DeviceCsr<T>,
    parts: Decomposition,
    kernels: Variants<SddmmShape, RodeSddmm<T>>,
    scale_by_values: bool,
}

/// A planned RoDe CSR SDDMM; `algorithm` is [`Algorithm::Rode`] or
/// [`Algorithm::RodeDeterministic`]: the same kernels, since no output is shared between parts.
pub(crate) fn sddmm_plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    s: CsrRef<'_, T, I>,
    desc: &SddmmDesc,
    algorithm: Algorithm,
    clock: PlanClock,
) -> Result<CudaPlan<T, RodeSddmmFamily<T>>> {
    if !matches!(algorithm, Algorithm::Rode | Algorithm::RodeDeterministic) {
        return Err(Error::internal(format!(
            "{algorithm} is not a RoDe algorithm"
        )));
    }
    let preprocess = Preprocess::new()?;
    let entries = Variants::entries(SddmmShape::all(), sddmm_entry::<T>)?;
    let mut specs: Vec<&KernelSpec> = preprocess.specs().to_vec();
    specs.extend(entries.iter().map(|(_, e)| e.spec()));
    let (base, mut clock) = PlanBase::new(device, s, desc.info(algorithm), &specs, clock)?;
    let seg_len = segment_length(s.nnz(), device.info.multiprocessors, SDDMM_MIN_SEGMENT);
    let csr = DeviceCsr::upload(device, s)?;
    clock.lap(device, Phase::Transfer)?;
    let family = RodeSddmmFamily {
        parts: Decomposition::for_sddmm(device, &preprocess, &csr, seg_len)?,
        s: csr,
        kernels: Variants::load(device, &entries)?,
        scale_by_values: desc.scale_by_values,
    };
    clock.lap(device, Phase::Device)?;
    let bytes = family.s.bytes() + family.parts.bytes();
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> SddmmKernels<T> for RodeSddmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        let (device, s, parts, ops) = (&base.device, &self.s, &self.parts, &run.ops);
        let shape = Lanes::new(ops.k as usize, &[&ops.x, &ops.y], SDDMM_MIN_LANES);
        let (block_ctas, config) = shape.config(parts.segments, parts.residuals, 1, 4)?;
        let params = RodeSddmm {
            parts: shape.parts(parts, device, block_ctas),
            col_idx: Ptr::of(&s.col_idx, device),
            s_values: Ptr::of_buffer(&s.values),
            scale_by_values: u32::from(self.scale_by_values),
            dense: SddmmDense::new(run),
        };
        // SAFETY: the grid's first block_ctas blocks cover the `segments` segments, BLOCK / W
        // each, the others the `residuals` residuals, so a sub-warp past either list's end
        // leaves before reading it. Segments read column indices from their tiles' aligned
        // starts (at most 3 before their first entries) to their ends, residuals their whole
        // rows of fewer than TILE entries, and each part writes only its row's entries; S is
        // canonical with columns < cols = Y's rows; X spans rows x k, Y cols x k and C nnz
        // elements at their strides (bound operands); V > 1 only when both X's and Y's rows
        // come in runs of V; W >= SDDMM_MIN_LANES lanes as the reduction needs; shared memory
        // is what the kernel carves for BLOCK / W sub-warps of BUFFERS column-index tiles.
        unsafe {
            self.kernels
                .get(SddmmShape::of(shape, ops.k))?
                .launch(config, &params)
        }
    }
}

impl<T: Scalar> Kernels<T> for RodeSddmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values::csr_order(&self.s.values)
    }
}

#[cfg(test)]
mod tests {
    use sparse_core::Layout;

    use super::*;

    fn stats(max: usize, mean: f64) -> RowStats {
        RowStats {
            min: 0,
            max,
            mean,
            cv: 0.0,
            empty_rows: 0,
        }
    }

    #[test]
    fn wide_products_go_to_cusparse_on_the_matrices_measured_faster_there() {
        let (f64, f32, f16) = (Precision::F64, Precision::F32, Precision::F16);
        let skewed = stats(AUTO_LONG_ROW, 15.0);
        let large = AUTO_VENDOR_MIN_NNZ;
        assert!(spmm_wide_on_vendor(&skewed, large, f32));
        assert!(!spmm_wide_on_vendor(&skewed, large - 1, f32), "smaller");
        assert!(
            !spmm_wide_on_vendor(&stats(AUTO_LONG_ROW - 1, 15.0), large, f32),
            "no long row"
        );
        for other in [f64, f16] {
            assert!(
                !spmm_wide_on_vendor(&skewed, large, other),
                "spmm in {other}"
            );
        }
        let fem = stats(80, AUTO_VENDOR_SDDMM_MEAN_ROW);
        let (small, larger) = (AUTO_SMALL_NNZ - 1, AUTO_SMALL_NNZ);
        for precision in [f64, f32] {
            assert!(sddmm_wide_on_vendor(&fem, larger, precision, false));
            assert!(
                !sddmm_wide_on_vendor(&fem, larger, precision, true),
                "scaled by values"
            );
            assert!(
                !sddmm_wide_on_vendor(&stats(80, 16.0), larger, precision, false),
                "mean row 16"
            );
        }
        assert!(
            sddmm_wide_on_vendor(&fem, small, f64, false),
            "small in f64"
        );
        assert!(
            !sddmm_wide_on_vendor(&fem, small, f32, false),
            "small in f32"
        );
        assert!(
            !sddmm_wide_on_vendor(&fem, larger, f16, false),
            "sddmm in f16"
        );
    }

    #[test]
    fn auto_picks_rode_for_long_rows_small_matrices_and_sddmm_on_long_mean_rows() {
        let long = AUTO_LONG_ROW;
        let large = AUTO_SMALL_NNZ;
        // Many rows unless a case says otherwise.
        let many = 1 << 20;
        let prefers_rode =
            |op, stats: &RowStats, nnz| prefers_rode(op, stats, (many, nnz), Precision::F32);
        for op in [OpKind::Spmm, OpKind::Sddmm] {
            assert!(
                !prefers_rode(op, &stats(long - 1, 2.0), large),
                "{op}: short rows"
            );
            assert!(
                prefers_rode(op, &stats(long, 2.0), large),
                "{op}: one long row"
            );
            assert!(
                prefers_rode(op, &stats(long - 1, 2.0), large - 1),
                "{op}: small"
            );
            assert!(
                prefers_rode(op, &stats(100_000, 15.0), large),
                "{op}: power law"
            );
        }
        assert!(
            !prefers_rode(OpKind::Spmm, &stats(80, 60.0), large),
            "spmm: even rows"
        );
        assert!(
            prefers_rode(OpKind::Sddmm, &stats(80, 60.0), large),
            "sddmm: even rows"
        );
        assert!(
            !prefers_rode(OpKind::Sddmm, &stats(40, 12.0), large),
            "sddmm: short rows"
        );
        let huge = AUTO_SDDMM_F64_VECTOR_NNZ;
        let f64 = Precision::F64;
        assert!(
            super::prefers_rode(OpKind::Sddmm, &stats(80, 60.0), (many, huge - 1), f64),
            "sddmm f64: even rows"
        );
        assert!(
            !super::prefers_rode(OpKind::Sddmm, &stats(80, 60.0), (many, huge), f64),
            "sddmm f64: even rows, large"
        );
        assert!(
            super::prefers_rode(OpKind::Sddmm, &stats(100_000, 15.0), (many, huge), f64),
            "sddmm f64: power law, large"
        );
        assert!(
            prefers_rode(OpKind::Sddmm, &stats(80, 60.0), huge),
            "sddmm f32: even rows, large"
        );
        // SpMM on few rows, too few for `vector` to fill the device; not SDDMM on short rows.
        let few = AUTO_SPMM_FEW_ROWS;
        let f32 = Precision::F32;
        let even = stats(80, 60.0);
        assert!(super::prefers_rode(
            OpKind::Spmm,
            &even,
            (few - 1, 290_000),
            f32
        ));
        assert!(!super::prefers_rode(
            OpKind::Spmm,
            &even,
            (few, 290_000),
            f32
        ));
        let short = stats(40, 12.0);
        assert!(!super::prefers_rode(
            OpKind::Sddmm,
            &short,
            (few - 1, large),
            f32
        ));
    }

    #[test]
    fn segments_shorten_until_they_fill_the_device() {
        let m = MIN_SEGMENT;
        assert_eq!(segment_length(0, 132, m), m);
        assert_eq!(segment_length(300_000, 132, m), m);
        assert_eq!(segment_length(300_000, 132, SDDMM_MIN_SEGMENT), TILE);
        assert_eq!(segment_length(1 << 20, 132, m), 96);
        assert_eq!(segment_length(30_000_000, 132, m), SEGMENT);
        assert_eq!(segment_length(usize::MAX, 0, m), SEGMENT);
        for nnz in [1usize, 5_000, 123_456, 7_654_321] {
            assert_eq!(segment_length(nnz, 108, m) % TILE, 0);
        }
    }

    /// An operand whose rows are `ld` apart: row-major with `Some(ld)`, column-major with
    /// `None`.
    fn operand(ld: Option<usize>) -> Bound {
        Bound {
            address: 0,
            rows: 2,
            cols: 2,
            layout: if ld.is_some() {
                Layout::RowMajor
            } else {
                Layout::ColMajor
            },
            ld: ld.unwrap_or(2) as u32,
        }
    }

    fn shape(len: usize, lds: &[Option<usize>], min: u32) -> Lanes {
        let operands: Vec<Bound> = lds.iter().map(|&ld| operand(ld)).collect();
        let refs: Vec<&Bound> = operands.iter().collect();
        Lanes::new(len, &refs, min)
    }

    #[test]
    fn lanes_take_vectors_from_the_leading_dimensions_alone() {
        let shape = |len, lds: &[Option<usize>], min| {
            let l = shape(len, lds, min);
            (l.lanes, l.values)
        };
        assert_eq!(shape(128, &[Some(128)], 4), (32, 4));
        assert_eq!(shape(32, &[Some(32)], 4), (8, 4));
        // N = 33 over a padded ld of 36: 9 vector spans, the last one partial.
        assert_eq!(shape(33, &[Some(36)], 4), (16, 4));
        assert_eq!(shape(33, &[Some(33)], 4), (32, 1));
        assert_eq!(shape(7, &[None], 4), (8, 1));
        assert_eq!(shape(1, &[Some(1)], 4), (4, 1));
        assert_eq!(shape(16, &[Some(16), Some(18)], SDDMM_MIN_LANES), (8, 2));
    }

    #[test]
    fn sddmm_kernels_take_k_in_chunks_only_past_one_sub_warp_span() {
        let of = |k: usize, ld| {
            let s = SddmmShape::of(shape(k, &[Some(ld)], SDDMM_MIN_LANES), k as u32);
            (s.values, s.whole, s.chunked)
        };
        assert_eq!(of(128, 128), (4, true, false));
        assert_eq!(of(256, 256), (4, true, true));
        // 257 columns over a padded ld of 260: three chunks of 32 lanes of 4, the last partial.
        assert_eq!(of(257, 260), (4, false, true));
        assert_eq!(of(32, 33), (1, true, false));
        assert_eq!(of(33, 33), (1, true, true));
        assert!(SddmmShape::all().any(|s| s
            == SddmmShape {
                values: 4,
                whole: false,
                chunked: true
            }));
        assert_eq!(SddmmShape::all().count(), 2 * (1 + 2 * (VECTORS.len() - 1)));
    }

    #[test]
    fn the_arrival_counters_cover_every_run_within_the_reservation() {
        for width in 1..=700usize {
            let most = Lanes::most_column_tiles(width);
            for n in 1..=width {
                for ld in [Some(n), Some(n + 1), Some(n + 3), None] {
                    let l = shape(n, &[ld], SPMM_MIN_LANES);
                    let tiles = l.column_tiles(n as u32) as usize;
                    assert!(
                        tiles <= most,
                        "n {n} in width {width}: {tiles} > {most} tiles"
                    );
                }
            }
        }
    }

    #[test]
    fn the_parts_grid_puts_segments_first_and_fits_grid_x() {
        let l = Lanes {
            lanes: 8,
            values: 1,
        };
        // 16 sub-warps per block: 3 blocks of segments, then 1 of residuals.
        let (block_ctas, config) = l.config(33, 5, 70_000, 8).unwrap();
        assert_eq!(block_ctas, 3);
        assert_eq!(config.grid_dim, (4, MAX_GRID_Y, 1));
        assert_eq!(config.shared_mem_bytes, 16 * BUFFERS * TILE * 8);
        let (block_ctas, config) = l.config(0, 17, 0, 4).unwrap();
        assert_eq!((block_ctas, config.grid_dim), (0, (2, 1, 1)));
        // 4 sub-warps per block: grid.x overflows only when both lists near 2^32 parts.
        let l = Lanes {
            lanes: 32,
            values: 1,
        };
        assert_eq!(l.config(u32::MAX, 0, 1, 4).unwrap().1.grid_dim.0, 1 << 30);
        assert!(l.config(u32::MAX, u32::MAX - 4, 1, 4).is_ok());
        assert!(l.config(u32::MAX, u32::MAX, 1, 4).is_err());
    }

    #[test]
    fn shared_memory_stays_under_the_static_limit() {
        for lanes in [4, 8, 16, 32] {
            let l = Lanes { lanes, values: 4 };
            let bytes = l.config(1, 1, 1, 4 + 8).unwrap().1.shared_mem_bytes;
            assert!(bytes <= 48 * 1024, "{lanes} lanes: {bytes} bytes");
        }
    }
}
