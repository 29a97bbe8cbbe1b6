//! TileSpMV plans (Niu et al., IPDPS'21) on Tiled16: `tilespmv.cu` has the kernels and says how
//! a warp walks its tiles. A plan converts the CSR to Tiled16 on the device ([`build`]: the same
//! tiles as the format crate's conversion for the same selection; [`gpu_selection`] says which),
//! with each CSR entry's slot in the values (value updates scatter through it), and cuts tile
//! rows of more than [`segment_tiles`] tiles into segments, one warp each ([`Segments`]), longer
//! ones where a small matrix's launch then takes fewer waves ([`choose_segments`]).
//! Deferred very sparse tiles are a CSR. In matrices under [`LATENCY_BOUND_NNZ`] entries whose
//! deferred rows are short ([`FUSED_DEFERRED_MAX`]), the tile kernels add each row's deferred
//! entries before writing it; otherwise spmv's `scalar` or `vector-split` kernels add them after
//! the tile pass, with beta = 1 (`vector-split` cuts a hub row's many deferred entries into
//! segments too).

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use sparse_core::{
    Accumulator, Algorithm, BackendKind, CsrRef, Error, Format, OpKind, PlanInfo, Precision,
    Result, Scalar, SpIndex, SpmvDesc, SpmvPlan,
};
use sparse_formats::{DeferredCoo, FillLimit, TileSelection, Tiled16, TILED16_TILE};

use crate::device::Device;
use crate::executor::CudaBackend;
use crate::flashsparse::build::download;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, MutPtr, Ptr,
};
use crate::operand::{to_u32, Run, SpmvDense, SpmvOperands};
use crate::plan::{
    check_request, CudaPlan, Kernels, Phase, PlanBase, PlanClock, SpmvKernels, Values,
};
use crate::registry;
use crate::spmv::{self, CsrRows};
use crate::spmv_auto::scalar_streams;
use build::{BuildEntries, DeviceTiled16, TileBuild, TileRule};

mod build;

/// The shortest and longest segments (in tiles) tile rows are cut into.
const SEGMENT_TILES: std::ops::RangeInclusive<u32> = 2..=16;
/// Warps a launch should have at least, where segments can be short enough: eight waves of
/// 64 warps on each of 128 SMs.
const TARGET_WARPS: usize = 1 << 16;
/// Rows (and columns) of a tile.
const TILE: u32 = TILED16_TILE as u32;
/// Warps of a TileSpMV block.
const BLOCK_WARPS: usize = spmv::BLOCK as usize / 32;
/// Tiles a segment of a packed tile row may hold where the matrix's segments are shorter: a
/// few more steps of a warp's walk cost less than the second launch that longer tile rows
/// need (small matrices).
const PACKED_SEGMENT_TILES: u32 = 8;
/// Segment lengths a small matrix's plan tries beyond [`segment_tiles`]'s ([`choose_segments`]).
const LONGER_SEGMENT_TILES: [u32; 4] = [3, 4, 6, 8];
/// [`gpu_selection`]'s thresholds.
const SPARSE_TILE_MAX: usize = 32;
const SPARSE_TILE_MEAN: f64 = 16.0;
const DENSE_TILE_MEAN: f64 = 48.0;
/// Matrices under this many entries take as long as their longest chain of dependent loads, not
/// as their bytes take to stream: the tile kernels add their deferred entries themselves.
const LATENCY_BOUND_NNZ: usize = 1 << 21;
/// The longest row of deferred entries the tile kernels add themselves (two lanes a row, each
/// walking every other entry). Longer rows, a graph's hubs, go to the second launch, where
/// `vector-split` cuts them.
const FUSED_DEFERRED_MAX: u32 = 64;

kernel_params! {
    /// A Tiled16 matrix on the device as the kernels read it (`tile_format` one byte per tile,
    /// [`sparse_formats::TileFormat`] as `u8`).
    pub(crate) struct TileMatrix<T> {
        rows: u32,
        cols: u32,
        tile_rows: u32,
        tile_ptr: ptr(u32),
        tile_col: ptr(u32),
        tile_nnz: ptr(u32),
        tile_format: ptr(u8),
        byte_ptr: ptr(u32),
        value_ptr: ptr(u32),
        bytes: ptr(u8),
        values: ptr(T),
        /// Per tile, 16 bytes placing its rows' entries (`DeviceTiled16::row_start`).
        row_start: ptr(u8),
        /// The deferred CSR where the tile kernels add it, else null.
        deferred_ptr: ptr(u32),
        deferred_col: ptr(u32),
        deferred_values: ptr(T),
    }
}

kernel_params! {
    /// `tile_spmv`: tile rows of at most `segment_tiles` tiles write y; the `packed_warps` from
    /// warp `packed_base` add the segments of longer tile rows in shared memory and write y; the
    /// `segments` after them, of the longest tile rows, write 16 sums each to `partial`.
    pub(crate) struct TileSpmv<T> {
        a: sub(TileMatrix),
        segment_tiles: u32,
        packed_base: u32,
        packed_warps: u32,
        segments: u32,
        segment_row: ptr(u32),
        segment_first: ptr(u32),
        segment_end: ptr(u32),
        segment_span: ptr(u32),
        partial: out(acc),
        dense: sub(SpmvDense),
    }
}

kernel_params! {
    /// `tile_combine`: each long tile row's segment sums added in order, then its rows' fused
    /// deferred entries (the only reads of `a` and x).
    pub(crate) struct TileCombine<T> {
        a: sub(TileMatrix),
        long_rows: u32,
        long_row: ptr(u32),
        first_segment: ptr(u32),
        partial: ptr(acc),
        dense: sub(SpmvDense),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "tilespmv",
    code: include_str!("../kernels/tilespmv.cu"),
    params: &[
        <SpmvDense<f32> as KernelParams>::C_DECL,
        <TileMatrix<f32> as KernelParams>::C_DECL,
        <TileSpmv<f32> as KernelParams>::C_DECL,
        <TileCombine<f32> as KernelParams>::C_DECL,
        <TileRule as KernelParams>::C_DECL,
        <TileBuild<f32> as KernelParams>::C_DECL,
    ],
    defines: &[
        ("TILE_BLOCK", spmv::BLOCK),
        ("TILE_ADAPTIVE", build::ADAPTIVE),
    ],
};

/// The entries of this file for storage type `T`.
struct Entries<T: Scalar> {
    spmv: Entry<TileSpmv<T>>,
    combine: Entry<TileCombine<T>>,
}

impl<T: Scalar> Entries<T> {
    fn new() -> Result<Self> {
        let t = c_type(T::DTYPE)?;
        Ok(Entries {
            spmv: Entry::new(&SOURCE, "tile_spmv", &[&t])?,
            combine: Entry::new(&SOURCE, "tile_combine", &[&t])?,
        })
    }

    fn specs(&self) -> Vec<&KernelSpec> {
        vec![self.spmv.spec(), self.combine.spec()]
    }
}

/// Every kernel of this file Rust can ask for: the table's precisions, f64 and f32 (the
/// builder's scans are flashsparse.cu's, listed there).
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let (f64s, f32s) = (Entries::<f64>::new()?, Entries::<f32>::new()?);
    let (b64, b32) = (BuildEntries::<f64>::new()?, BuildEntries::<f32>::new()?);
    Ok(f64s
        .specs()
        .into_iter()
        .chain(f32s.specs())
        .chain(b64.own_specs())
        .chain(b32.own_specs())
        .cloned()
        .collect())
}

/// Tiles per segment for a matrix of `tiles` tiles: the longest (a power of two in
/// [`SEGMENT_TILES`]) that still gives [`TARGET_WARPS`] warps or more. Small matrices get short
/// segments, many warps and short chains of dependent loads; large ones write fewer partial sums.
fn segment_tiles(tiles: usize) -> u32 {
    let mut s = *SEGMENT_TILES.start();
    while s < *SEGMENT_TILES.end() && tiles / (2 * s as usize) >= TARGET_WARPS {
        s *= 2;
    }
    s
}

/// The segments of a matrix of `nnz` entries in `tiles` tiles on a device that holds `wave`
/// blocks at once: [`segment_tiles`]'s, or in a matrix under [`LATENCY_BOUND_NNZ`] entries, the
/// shortest of those and [`LONGER_SEGMENT_TILES`] whose launch takes the fewest waves of the
/// blocks that do work ([`Segments::busy_blocks`]). Such a matrix takes as long as its longest
/// chain of dependent loads: a block past a wave starts only when one before it ends, which adds
/// a whole chain, where longer segments add a few steps to each warp's walk.
fn choose_segments(tile_ptr: &[u32], tiles: usize, nnz: usize, wave: usize) -> Result<Segments> {
    let rule = Segments::new(tile_ptr, segment_tiles(tiles))?;
    if nnz >= LATENCY_BOUND_NNZ || wave == 0 {
        return Ok(rule);
    }
    let waves = |s: &Segments| s.busy_blocks(tile_ptr).div_ceil(wave);
    let shortest = rule.tiles;
    let mut best = (waves(&rule), rule);
    for t in LONGER_SEGMENT_TILES.into_iter().filter(|&t| t > shortest) {
        let longer = Segments::new(tile_ptr, t)?;
        let longer_waves = waves(&longer);
        if longer_waves < best.0 {
            best = (longer_waves, longer);
        }
    }
    Ok(best.1)
}

/// Segments of the tile rows of more than `tiles` tiles, from the tile pointers. A tile row that
/// [`BLOCK_WARPS`] segments of at most `tiles` (or [`PACKED_SEGMENT_TILES`]) tiles cover takes
/// that many consecutive warps of one block, which add their sums through shared memory: the
/// packed warps, a whole number of blocks. Longer tile rows, cut into segments of `tiles` tiles,
/// write their segments' sums (listed after the packed warps) for `tile_combine`.
#[derive(Debug, Default, PartialEq)]
struct Segments {
    /// Tiles per segment; tile rows of at most this many are not cut.
    tiles: u32,
    /// Per packed warp, then per segment of the longer tile rows: its tile row, first tile and
    /// the tile past its last. Warps that fill a block hold tile row 0 and no tile.
    row: Vec<u32>,
    first: Vec<u32>,
    end: Vec<u32>,
    /// Per packed warp: in the first warp of a tile row, how many warps hold its segments; 0 in
    /// the others.
    span: Vec<u32>,
    /// The tile rows not packed, and each one's first segment among those after the packed
    /// warps (one more entry).
    long_row: Vec<u32>,
    first_segment: Vec<u32>,
}

impl Segments {
    fn new(tile_ptr: &[u32], tiles: u32) -> Result<Self> {
        let mut s = Segments {
            tiles,
            first_segment: vec![0],
            ..Segments::default()
        };
        // The longer tile rows' segments, appended after the packed warps at the end.
        let mut long = Segments::default();
        for (tr, w) in tile_ptr.windows(2).enumerate() {
            if w[1] - w[0] <= tiles {
                continue;
            }
            let tr = to_u32("tile row", tr)?;
            let packed_step = tiles.max((w[1] - w[0]).div_ceil(BLOCK_WARPS as u32));
            let packed = packed_step <= tiles.max(PACKED_SEGMENT_TILES);
            let step = if packed { packed_step } else { tiles };
            let count = (w[1] - w[0]).div_ceil(step) as usize;
            let cut = if packed {
                if s.span.len() % BLOCK_WARPS + count > BLOCK_WARPS {
                    s.fill_block();
                }
                s.span.push(count as u32);
                s.span.resize(s.span.len() + count - 1, 0);
                &mut s
            } else {
                s.long_row.push(tr);
                s.first_segment
                    .push(to_u32("segment count", long.row.len() + count)?);
                &mut long
            };
            for first in (w[0]..w[1]).step_by(step as usize) {
                cut.row.push(tr);
                cut.first.push(first);
                cut.end.push(w[1].min(first + step));
            }
        }
        s.fill_block();
        s.row.extend(long.row);
        s.first.extend(long.first);
        s.end.extend(long.end);
        Ok(s)
    }

    /// Idle warps up to the end of the last packed block.
    fn fill_block(&mut self) {
        let len = self.span.len().next_multiple_of(BLOCK_WARPS);
        self.span.resize(len, 0);
        self.row.resize(len, 0);
        self.first.resize(len, 0);
        self.end.resize(len, 0);
    }

    /// Segments after the packed warps.
    fn long_segments(&self) -> usize {
        self.row.len() - self.span.len()
    }

    /// Blocks of the `tile_spmv` launch that do work: those of a warp per tile row where one of
    /// their tile rows is not cut (the warps of the others leave at once), then the packed
    /// warps' and the long tile rows' segments'.
    fn busy_blocks(&self, tile_ptr: &[u32]) -> usize {
        let rows: Vec<u32> = tile_ptr.windows(2).map(|w| w[1] - w[0]).collect();
        let whole = rows
            .chunks(BLOCK_WARPS)
            .filter(|block| block.iter().any(|&tiles| tiles <= self.tiles))
            .count();
        whole + self.row.len().div_ceil(BLOCK_WARPS)
    }
}

/// The segments on the device, with the partial sums they write and their kernels.
struct DeviceSegments<T: Scalar> {
    packed_warps: u32,
    /// Segments after the packed warps.
    segments: u32,
    long_rows: u32,
    row: CudaSlice<u32>,
    first: CudaSlice<u32>,
    end: CudaSlice<u32>,
    span: CudaSlice<u32>,
    long_row: CudaSlice<u32>,
    first_segment: CudaSlice<u32>,
    /// 16 accumulation values per segment.
    partial: CudaSlice<u8>,
    combine: Kernel<TileCombine<T>>,
}

impl<T: Scalar> DeviceSegments<T> {
    /// `None` when no tile row is cut.
    fn upload(
        device: &Device,
        s: &Segments,
        combine: Kernel<TileCombine<T>>,
    ) -> Result<Option<Self>> {
        if s.row.is_empty() {
            return Ok(None);
        }
        let upload = |v: &[u32]| device.upload_converted(v, 0, |&i| i);
        Ok(Some(DeviceSegments {
            packed_warps: to_u32("packed warp count", s.span.len())?,
            segments: to_u32("segment count", s.long_segments())?,
            long_rows: to_u32("long tile row count", s.long_row.len())?,
            row: upload(&s.row)?,
            first: upload(&s.first)?,
            end: upload(&s.end)?,
            span: upload(&s.span)?,
            long_row: upload(&s.long_row)?,
            first_segment: upload(&s.first_segment)?,
            partial: device.alloc_zeros::<u8>(
                s.long_segments() * TILE as usize * size_of::<T::Acc>(),
                "allocating tile-row segment partials",
            )?,
            combine,
        }))
    }

    fn bytes(&self) -> usize {
        let warps = self.packed_warps as usize;
        let segments = self.segments as usize;
        (4 * warps + 3 * segments + 2 * self.long_rows as usize + 1) * 4
            + segments * TILE as usize * size_of::<T::Acc>()
    }
}

impl<T: Scalar> DeviceTiled16<T> {
    /// The matrix as the kernels read it, the deferred CSR with it where they add it (`fused`).
    fn params(&self, device: &Device, fused: bool) -> TileMatrix<T> {
        let deferred = self.deferred.as_ref().filter(|_| fused);
        TileMatrix {
            rows: self.rows,
            cols: self.cols,
            tile_rows: self.tile_rows,
            tile_ptr: Ptr::of(&self.tile_ptr, device),
            tile_col: Ptr::of(&self.tile_col, device),
            tile_nnz: Ptr::of(&self.tile_nnz, device),
            tile_format: Ptr::of(&self.tile_format, device),
            byte_ptr: Ptr::of(&self.byte_ptr, device),
            value_ptr: Ptr::of(&self.value_ptr, device),
            bytes: Ptr::of(&self.payload, device),
            values: Ptr::of_buffer(&self.values),
            row_start: Ptr::of(&self.row_start, device),
            deferred_ptr: deferred.map_or(Ptr::NULL, |d| Ptr::of(&d.row_ptr, device)),
            deferred_col: deferred.map_or(Ptr::NULL, |d| Ptr::of(&d.col_idx, device)),
            deferred_values: deferred.map_or(Ptr::NULL, |_| self.deferred_values()),
        }
    }

    /// The deferred entries' values: the last of the value buffer's.
    fn deferred_values(&self) -> Ptr<T> {
        Ptr::of_buffer(&self.values).offset(self.tile_values)
    }
}

/// The TileSpMV kernels of one plan and the matrix they read.
pub(crate) struct TileFamily<T: Scalar> {
    a: DeviceTiled16<T>,
    spmv: Kernel<TileSpmv<T>>,
    /// Tiles per segment, and the most a tile row holds without being cut.
    segment_tiles: u32,
    /// The first packed warp: the tile rows' warps, rounded up to whole blocks.
    packed_base: u32,
    segments: Option<DeviceSegments<T>>,
    deferred: Option<Deferred<T>>,
}

/// Who adds the deferred entries.
enum Deferred<T: Scalar> {
    /// The tile kernels, each row's before it is written: rows of at most
    /// [`FUSED_DEFERRED_MAX`] entries.
    Fused,
    /// `scalar` or `vector-split`, after the tile pass.
    Pass(CsrRows<T>),
}

/// A planned TileSpMV for `desc`, its tiles chosen by [`gpu_selection`]; Tiled16 has no block
/// shape to ask for.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmvDesc,
    clock: PlanClock,
) -> Result<CudaPlan<T, TileFamily<T>>> {
    if let Some(b) = desc.block {
        return Err(Error::invalid(format!(
            "{} has no block shape, but {b} was asked for",
            Format::Tiled16
        )));
    }
    plan_with(device, a, desc.precision, &gpu_selection(a), clock)
}

/// The paper's selection, except that tiles of at most [`SPARSE_TILE_MAX`] entries are deferred
/// to CSR rows in matrices whose tiles hold, on average, fewer than [`DENSE_TILE_MEAN`] entries
/// (under [`LATENCY_BOUND_NNZ`] entries) or [`SPARSE_TILE_MEAN`] (larger ones). On the GPU each
/// tile costs a chain of dependent loads whatever it holds, so the scattered entries of meshes
/// and graphs run faster as CSR rows, which small matrices add in the tile kernels themselves.
/// Block-structured matrices keep their few sparse tiles: there a warp's walk of its deferred
/// rows would lengthen its chain more than the tiles removed shorten it. Large matrices of
/// fuller tiles (stencils) keep them too: there bytes set the time.
fn gpu_selection<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> TileSelection {
    let mean = if a.nnz() < LATENCY_BOUND_NNZ {
        DENSE_TILE_MEAN
    } else {
        SPARSE_TILE_MEAN
    };
    let sparse = (a.nnz() as f64) < mean * tile_count(a) as f64;
    TileSelection {
        deferred_coo: if sparse {
            Some(DeferredCoo {
                max_tile_nnz: SPARSE_TILE_MAX,
                min_matrix_nnz: 0,
            })
        } else {
            TileSelection::default().deferred_coo
        },
        ..TileSelection::default()
    }
}

/// The nonzero 16 x 16 tiles of `a`: per tile row, the distinct tile columns of its entries.
fn tile_count<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> usize {
    let tile = TILE as usize;
    let mut seen = vec![usize::MAX; a.cols().div_ceil(tile)];
    let mut tiles = 0;
    for tr in 0..a.rows().div_ceil(tile) {
        let rows = tr * tile..a.rows().min((tr + 1) * tile);
        let first = a.row_ptr()[rows.start].to_usize();
        let end = a.row_ptr()[rows.end].to_usize();
        for c in &a.col_idx()[first..end] {
            let tc = c.to_usize() / tile;
            if seen[tc] != tr {
                seen[tc] = tr;
                tiles += 1;
            }
        }
    }
    tiles
}

/// A planned TileSpMV of `a` in `precision`, its tiles chosen by `selection`.
fn plan_with<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    precision: Precision,
    selection: &TileSelection,
    clock: PlanClock,
) -> Result<CudaPlan<T, TileFamily<T>>> {
    let entries = Entries::<T>::new()?;
    let builder = BuildEntries::<T>::new()?;
    let info = PlanInfo::new(
        BackendKind::Cuda,
        OpKind::Spmv,
        Format::Tiled16,
        precision,
        Algorithm::TileSpmv,
        true,
    );
    let mut specs = entries.specs();
    specs.extend(builder.specs());
    let (base, mut clock) = PlanBase::new(device, a, info, &specs, clock)?;
    let builder = builder.load(device)?;
    let spmv = device.kernel(&entries.spmv)?;
    let wave = spmv.resident_blocks(spmv::BLOCK)? as usize * device.info.multiprocessors as usize;
    let combine = device.kernel(&entries.combine)?;
    clock.lap(device, Phase::Kernels)?;
    let dev = DeviceTiled16::build(
        device,
        &builder,
        a,
        selection,
        FillLimit::default(),
        &mut clock,
    )?;
    let tiles = dev.host_tile_ptr.last().map_or(0, |&n| n as usize);
    let segments = choose_segments(&dev.host_tile_ptr, tiles, a.nnz(), wave)?;
    let segment_tiles = segments.tiles;
    let packed_base = to_u32(
        "tile row count",
        (dev.tile_rows as usize).next_multiple_of(BLOCK_WARPS),
    )?;
    clock.lap(device, Phase::Host)?;
    let deferred_rows = dev
        .deferred
        .as_ref()
        .map(|d| download(device, &d.row_ptr, dev.rows as usize + 1))
        .transpose()?;
    clock.lap(device, Phase::Transfer)?;
    // Small matrices' short deferred rows are added by the tile kernels. Otherwise they run on
    // the CSR kernel `auto` would give the whole matrix: `scalar` where it streams the matrix
    // best, else `vector-split`. Where bandwidth sets the time, `scalar`'s thread a row streams
    // them better than two lanes of each tile row's warp.
    let scalar = || scalar_streams(&a.row_stats(), a.nnz(), || a.column_span());
    let deferred = deferred_rows
        .map(|row_ptr| -> Result<_> {
            let longest = row_ptr.windows(2).map(|w| w[1] - w[0]).max();
            Ok(
                if a.nnz() < LATENCY_BOUND_NNZ && longest.unwrap_or(0) <= FUSED_DEFERRED_MAX {
                    Deferred::Fused
                } else if scalar() {
                    Deferred::Pass(CsrRows::scalar(device)?)
                } else {
                    let rows = row_ptr.len() - 1;
                    Deferred::Pass(CsrRows::vector_split(device, rows, |i| {
                        row_ptr[i] as usize..row_ptr[i + 1] as usize
                    })?)
                },
            )
        })
        .transpose()?;
    clock.lap(device, Phase::Kernels)?;
    let segments = DeviceSegments::upload(device, &segments, combine)?;
    clock.lap(device, Phase::Transfer)?;
    let bytes = dev.bytes()
        + segments.as_ref().map_or(0, DeviceSegments::bytes)
        + match &deferred {
            Some(Deferred::Pass(rows)) => rows.bytes(),
            _ => 0,
        };
    Ok(base.into_plan(
        clock,
        bytes,
        TileFamily {
            a: dev,
            spmv,
            segment_tiles,
            packed_base,
            segments,
            deferred,
        },
    ))
}

impl<T: Scalar> SpmvKernels<T> for TileFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmvOperands, T::Acc>) -> Result<()> {
        let device = &base.device;
        let fused = matches!(self.deferred, Some(Deferred::Fused));
        let (a, dense) = (self.a.params(device, fused), SpmvDense::new(run));
        let segments = self.segments.as_ref();
        let params = TileSpmv {
            a,
            segment_tiles: self.segment_tiles,
            packed_base: self.packed_base,
            packed_warps: segments.map_or(0, |s| s.packed_warps),
            segments: segments.map_or(0, |s| s.segments),
            segment_row: segments.map_or(Ptr::NULL, |s| Ptr::of(&s.row, device)),
            segment_first: segments.map_or(Ptr::NULL, |s| Ptr::of(&s.first, device)),
            segment_end: segments.map_or(Ptr::NULL, |s| Ptr::of(&s.end, device)),
            segment_span: segments.map_or(Ptr::NULL, |s| Ptr::of(&s.span, device)),
            partial: segments.map_or(MutPtr::NULL, |s| MutPtr::of_bytes(&s.partial, device)),
            dense,
        };
        let warps = u64::from(self.packed_base)
            + u64::from(params.packed_warps)
            + u64::from(params.segments);
        // SAFETY: the device-built Tiled16 holds the invariants `Tiled16::validate` checks (it
        // equals the host conversion): tile pointers, columns and payloads in range, in-tile
        // indices inside each tile, so x is read below cols and y written below rows, at the
        // bound operands' strides. One warp per tile row, then the packed warps from a block
        // boundary, whole blocks of them (each tile row's segments within one block), then one
        // per remaining segment: segments start at tiles of their tile row, and partial holds
        // 16 values for each of those.
        unsafe { self.spmv.launch(spmv::grid(warps * 32)?, &params)? };
        if let Some(s) = segments.filter(|s| s.long_rows > 0) {
            let params = TileCombine {
                a,
                long_rows: s.long_rows,
                long_row: Ptr::of(&s.long_row, device),
                first_segment: Ptr::of(&s.first_segment, device),
                partial: Ptr::of_bytes(&s.partial, device),
                dense,
            };
            // SAFETY: first_segment holds long_rows + 1 offsets into the partials written above
            // (stream order); one thread per row of a long tile row, rows below `rows` only.
            unsafe {
                s.combine.launch(
                    spmv::grid(u64::from(s.long_rows) * u64::from(TILE))?,
                    &params,
                )?
            };
        }
        if let (Some(Deferred::Pass(rows)), Some(csr)) = (&self.deferred, &self.a.deferred) {
            let pointers = (
                Ptr::of(&csr.row_ptr, device),
                Ptr::of(&csr.col_idx, device),
                self.a.deferred_values(),
            );
            let beta_one = SpmvDense {
                beta: T::Acc::ONE,
                ..dense
            };
            // SAFETY: the deferred CSR is canonical with the matrix's shape, its values the
            // last of the plan's values, and `rows` was planned for it; y holds the tile pass's
            // result (stream order), which beta = 1 adds to.
            unsafe { rows.launch(device, self.a.rows, pointers, beta_one)? };
        }
        Ok(())
    }
}

impl<T: Scalar> Kernels<T> for TileFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values {
            buffer: &self.a.values,
            slots: Some(&self.a.slots),
        }
    }
}

/// Tiled16 of `a` built on `backend`'s device by `selection` and read back: what the plans run
/// on.
pub fn tiled16_on_device<T: Scalar, I: SpIndex>(
    backend: &CudaBackend,
    a: CsrRef<'_, T, I>,
    selection: &TileSelection,
) -> Result<Tiled16<T>> {
    let device = backend.device();
    let builder = BuildEntries::<T>::new()?.load(device)?;
    DeviceTiled16::build(
        device,
        &builder,
        a,
        selection,
        FillLimit::default(),
        &mut PlanClock::start(),
    )?
    .to_host(device)
}

impl CudaBackend {
    /// A TileSpMV plan of `a` in `precision` with its tiles chosen by `selection` (forced
    /// formats, other thresholds, deferred COO at any size); descriptors plan with
    /// [`TileSelection::default`], as the CPU backend converts.
    pub fn plan_tilespmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        precision: Precision,
        selection: &TileSelection,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        let clock = PlanClock::start();
        check_request::<T>(
            BackendKind::Cuda,
            registry::algorithms,
            (
                OpKind::Spmv,
                Format::Tiled16,
                precision,
                Algorithm::TileSpmv,
            ),
        )?;
        Ok(Box::new(plan_with(
            self.device(),
            a,
            precision,
            selection,
            clock,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_formats::Csr;

    /// An n x n matrix with `per_row` entries in each row, at columns i, i + step, ... (mod n).
    fn banded(n: usize, per_row: usize, step: usize) -> Csr<f64> {
        let mut cols: Vec<Vec<u32>> = (0..n)
            .map(|i| (0..per_row).map(|k| ((i + k * step) % n) as u32).collect())
            .collect();
        cols.iter_mut().for_each(|c| c.sort_unstable());
        let row_ptr = (0..=n).map(|i| (i * per_row) as u32).collect();
        Csr::try_new(n, n, row_ptr, cols.concat(), vec![1.0; n * per_row]).unwrap()
    }

    #[test]
    fn tiles_are_counted_per_tile_row() {
        // Columns i and i + 16 of a 32 x 32 matrix: two tiles in each of the two tile rows.
        assert_eq!(tile_count(banded(32, 2, 16).as_ref()), 4);
        // The diagonal of 40 rows: 3 tiles.
        assert_eq!(tile_count(banded(40, 1, 1).as_ref()), 3);
    }

    #[test]
    fn matrices_of_sparse_tiles_defer_them() {
        let deferred = |a: &Csr<f64>| gpu_selection(a.as_ref()).deferred_max_nnz(a.nnz());
        let paper = |a: &Csr<f64>| TileSelection::default().deferred_max_nnz(a.nnz());
        // Entries 4099 columns apart: a tile (at most) per entry; large and small.
        for a in [banded(1 << 19, 4, 4099), banded(1 << 12, 4, 1021)] {
            assert_eq!(deferred(&a), Some(SPARSE_TILE_MAX));
        }
        // Four diagonals 16 columns apart: tiles of 16 entries, sparse for a small matrix only.
        let (small, large) = (banded(1 << 12, 4, 16), banded(1 << 20, 4, 16));
        assert_eq!(deferred(&small), Some(SPARSE_TILE_MAX));
        assert_eq!(deferred(&large), paper(&large));
        // Bands of 64: dense tiles, the paper's rule at any size.
        let a = banded(1 << 12, 64, 1);
        assert_eq!(deferred(&a), paper(&a));
    }

    #[test]
    fn long_tile_rows_are_cut_into_segments_packed_into_blocks() {
        let tiles = 4;
        // Tile rows of 1 tile, 13 (4 segments), 4, 8 (2 segments, which fit beside the 4) and
        // 24 (6, which do not fit beside the 6 before them and start a block).
        let lengths = [1, 13, 4, 8, 24];
        let tile_ptr: Vec<u32> = std::iter::once(0)
            .chain(lengths.iter().scan(0, |end, n| {
                *end += n;
                Some(*end)
            }))
            .collect();
        let s = Segments::new(&tile_ptr, tiles).unwrap();
        let idle = |n| std::iter::repeat_n(0, n);
        let span: Vec<u32> = [4, 0, 0, 0, 2, 0]
            .into_iter()
            .chain(idle(2))
            .chain([6, 0, 0, 0, 0, 0])
            .chain(idle(2))
            .collect();
        assert_eq!(s.span, span);
        assert_eq!(s.row[..6], [1, 1, 1, 1, 3, 3]);
        assert_eq!(s.first[..6], [1, 5, 9, 13, 18, 22]);
        assert_eq!(s.end[..6], [5, 9, 13, 14, 22, 26]);
        assert_eq!(s.row[8..14], [4; 6]);
        assert_eq!(s.end[13], 50);
        assert_eq!(s.long_segments(), 0);
        assert!(s.long_row.is_empty());

        // A block's warps cover a tile row of 33 tiles in segments of 5 (7 of them), but one of
        // 65 only in segments of 9, more than PACKED_SEGMENT_TILES: it goes to tile_combine in
        // segments of `tiles`.
        let s = Segments::new(&[0, 2, 35, 100], tiles).unwrap();
        assert_eq!(s.span[..8], [7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(s.first[..7], [2, 7, 12, 17, 22, 27, 32]);
        assert_eq!(s.end[6], 35);
        assert_eq!(s.long_row, [2]);
        assert_eq!(s.long_segments(), 17);
        assert_eq!(s.first_segment, [0, 17]);
        assert_eq!(s.first[8..], (35..100).step_by(4).collect::<Vec<_>>());
        assert_eq!(s.end[8 + 16], 100);

        assert_eq!(
            Segments::new(&[0, tiles], tiles).unwrap(),
            Segments {
                tiles,
                first_segment: vec![0],
                ..Segments::default()
            }
        );
    }

    #[test]
    fn small_matrices_get_short_segments_and_large_ones_long() {
        assert_eq!(segment_tiles(0), 2);
        assert_eq!(segment_tiles(4 * TARGET_WARPS - 1), 2);
        assert_eq!(segment_tiles(4 * TARGET_WARPS), 4);
        assert_eq!(segment_tiles(usize::MAX), 16);
    }

    #[test]
    fn small_matrices_take_the_segments_of_fewest_waves() {
        // 100 tile rows of 6 tiles: segments of 2 take 3 warps a tile row, two tile rows a block
        // (50 blocks); segments of 3 or 4 take 2 warps, four tile rows a block (25 blocks). The
        // 13 blocks of a warp per tile row work only where some tile row is not cut: with
        // segments of 6, where every tile row is a whole warp's.
        let tile_ptr: Vec<u32> = (0..=100).map(|tr| 6 * tr).collect();
        let tiles = 600;
        let chosen = |nnz, wave| {
            let s = choose_segments(&tile_ptr, tiles, nnz, wave).unwrap();
            (s.tiles, s.busy_blocks(&tile_ptr))
        };
        assert_eq!(chosen(0, 50), (2, 50));
        assert_eq!(chosen(0, 49), (3, 25));
        assert_eq!(chosen(0, 24), (6, 13));
        assert_eq!(chosen(0, 12), (6, 13));
        assert_eq!(chosen(LATENCY_BOUND_NNZ, 12), (2, 50));
    }

    #[test]
    fn the_table_offers_tilespmv_in_f64_and_f32() {
        for precision in [Precision::F64, Precision::F32] {
            assert_eq!(
                registry::family(
                    OpKind::Spmv,
                    Format::Tiled16,
                    precision,
                    Algorithm::TileSpmv
                ),
                Some(registry::Family::TileSpmv)
            );
        }
    }
}
