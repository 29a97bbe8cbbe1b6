//! Magicube plans (Li, Osawa, Hoefler, SC'22): SpMM and SDDMM of i8 matrices in SR-BCRS on
//! integer tensor cores, `mma.m16n8k32` with s8 inputs and exact s32 accumulation, for vectors
//! of V = 2, 4 or 8 rows. `magicube.cu` has the kernels and their lane mappings;
//! docs/integer.md the layouts and when the integer path pays.
//!
//! - Format: SR-BCRS with stride 32, the k of the MMA (a descriptor's block shape, when given,
//!   is `V x 32`; without one, V = 8). It is converted on the host (sparse-formats), its
//!   padding vectors given column 0 on the way up so that the kernels read an in-bounds dense
//!   row for them and multiply it by zero.
//! - Any M, N and K: the last vector-row's rows past M are never stored, columns of C and the
//!   inner dimension of SDDMM past their ends are read as zero, byte by byte at a row's ragged
//!   end; dense operands may be row- or column-major (row-major ones take the vector loads).
//! - SpMM: a warp per (work unit, tile of 8W columns of C), W = 4, 8 or 16 bytes of a B row
//!   per lane, chosen per run ([`spmm_run_bytes`]); the B rows are transposed in registers
//!   (byte permutes), the next group's operands loaded before the current group's MMAs and
//!   the columns of the group after it. A work unit is a vector-row, or, when whole vector-rows
//!   give the device too few warps at the run's N, a run of whole groups of one
//!   ([`SpmmUnits`]): the units of a cut vector-row add into C (scaled by beta first) with i32
//!   atomics, whose wrapping sum does not depend on the order they land in.
//! - SDDMM: a warp per tile of 32 vectors, the tiles ordered by their place in their
//!   vector-row ([`Chunks::position_major`]); C is written in SR-BCRS slot order
//!   ([`sparse_core::SddmmPlan::value_order`]), 0 in the slots without an entry, ready to be
//!   an SpMM plan's values.
//! - Results are exact: i32 sums, wrapping on overflow as the oracle's do, so runs are
//!   bit-reproducible, atomics included.
//! - f32 at the edges ([`Precision::F32_VIA_I8`], SpMM): A quantized per row at plan time, B
//!   per column at each run, the sums dequantized in the kernel's epilogue ([`quantized`]).
//! - [`quantized_attention`]: an attention block from the i8 SDDMM and SpMM, softmax in f32.
//! - Other widths as planes ([`mixed`]): 16-bit storage as 8-bit planes, and `magicube-s4`,
//!   `i4` and `l8-r4` as 4-bit planes on `mma.m16n8k64` (stride 64, column indices shuffled).
//! - [`auto_algorithm`]: `magicube-s4` where the s4 MMA outruns the s8 one (sm_80 to sm_89).
//! - [`mma_rates`]: the device's s8 and s4 MMA rates, measured (sm_90 has no 4-bit tensor
//!   cores and emulates the s4 MMA at about 5% of the s8 rate).

mod attention;
mod mixed;
mod probe;
mod quantized;

pub use attention::quantized_attention;
use mixed::PlaneWidth;
pub use probe::{mma_rates, MmaRates};

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{
    Accumulator, Algorithm, BlockShape, Compute, CsrRef, DType, DenseMut, DenseRef, Error, OpKind,
    Precision, Result, Scalar, SddmmDesc, SpIndex, SpmmDesc, SpmmPlan, ValueOrder,
};
use sparse_formats::{FillLimit, SrBcrs, SrBcrsShape, SR_BCRS_PADDING};

use crate::device::Device;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, Ptr,
};
use crate::matrix::FormatValues;
use crate::operand::{bind_spmm, to_u32, Run, SddmmDense, SddmmOperands, SpmmDense, SpmmOperands};
use crate::plan::{
    CudaPlan, Kernels, Phase, PlanBase, PlanClock, SddmmKernels, SpmmKernels, Values, WidthDesc,
};

/// Warps per block (`MC_WARPS`).
const WARPS: u32 = 4;
/// Threads per block (`MC_THREADS`).
const THREADS: u32 = WARPS * 32;
/// Vectors per group: the k of `mma.m16n8k32` (`MC_STRIDE`).
pub const STRIDE: usize = 32;
/// Vectors per group of the 4-bit SpMM (`magicube-s4`): the k of `mma.m16n8k64`.
pub const STRIDE_S4: usize = 64;
/// The vector lengths instantiated.
pub const VECTORS: [usize; 3] = [2, 4, 8];
/// Bytes of a B row a lane of the SpMM reads per vector, narrowest first: a warp covers 8x as
/// many columns of C.
const RUN_BYTES: [u32; 3] = [4, 8, 16];
/// Warps per multiprocessor an SpMM launch should give at least before a wider run is taken:
/// fewer leave the memory system idle on the small DLMC layers (256 vector-rows at V = 8).
const MIN_WARPS_PER_SM: u64 = 16;
/// Warps per multiprocessor whole vector-rows must give (at the narrowest run) for an SpMM to
/// take them rather than cut ones. Below it, cutting long vector-rows gives the device work;
/// above, the atomics and the scaling of C that cut rows need cost more than they gain (on an
/// H100, 2048-row layers at N = 256: 17 µs whole against 29 µs cut).
const WHOLE_ROW_WARPS_PER_SM: u64 = 4;
/// SpMM work units per multiprocessor the cutting of long vector-rows aims at.
const CHUNKS_PER_SM: usize = 4;
/// Groups (of 32 vectors, or 64 on the 4-bit path) an SpMM work unit takes at least: shorter
/// ones would pay more for their atomics than their loads.
const MIN_CHUNK_GROUPS: usize = 4;

kernel_params! {
    /// `mc_spmm<V, W>`: C = alpha*A*B + beta*C for A in SR-BCRS (`vec_col`: padding mapped to
    /// column 0), chunk i the vectors `chunk_start[i]..chunk_end[i]` of vector-row
    /// `chunk_vrow[i]`; with `split`, C holds beta*C already and chunks add into it.
    pub(crate) struct McSpmm<T> {
        chunks: u32,
        rows: u32,
        split: u32,
        chunk_vrow: ptr(u32),
        chunk_start: ptr(u32),
        chunk_end: ptr(u32),
        vec_col: ptr(u32),
        values: ptr(T),
        dense: sub(SpmmDense),
    }
}

kernel_params! {
    /// `mc_sddmm<V>`: tile i is the 32 vectors from `tile_start[i]` of vector-row
    /// `tile_vrow[i]`; C is written in SR-BCRS slot order.
    pub(crate) struct McSddmm<T> {
        tiles: u32,
        rows: u32,
        tile_vrow: ptr(u32),
        tile_start: ptr(u32),
        vec_col: ptr(u32),
        vec_mask: ptr(u8),
        values: ptr(T),
        scale_by_values: u32,
        dense: sub(SddmmDense),
    }
}

kernel_params! {
    /// `mc_spmm_dequant<V, W>`: C (f32) = alpha * row_scale(i) * col_scale(j) * (A_q B_q)(i, j)
    /// + beta * C, for A_q in SR-BCRS (`values` i8) and B_q i8 row-major (`b_ld` bytes a row).
    pub(crate) struct McSpmmDequant<T> {
        chunks: u32,
        rows: u32,
        n: u32,
        b_ld: u32,
        c_rs: u32,
        c_cs: u32,
        chunk_vrow: ptr(u32),
        chunk_start: ptr(u32),
        chunk_end: ptr(u32),
        vec_col: ptr(u32),
        values: ptr(u8),
        b: ptr(u8),
        row_scale: ptr(f32),
        col_scale: ptr(f32),
        c: out(T),
        alpha: f32,
        beta: f32,
    }
}

kernel_params! {
    /// `mc_column_scales` and `mc_quantize`: B (`rows x n` at its strides) quantized with one
    /// scale per column into `q` (row-major, `q_ld` bytes a row).
    pub(crate) struct McQuantize<T> {
        rows: u32,
        n: u32,
        b: ptr(T),
        b_rs: u32,
        b_cs: u32,
        scale: out(f32),
        q: out(u8),
        q_ld: u32,
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "magicube",
    code: include_str!("../kernels/magicube.cu"),
    params: &[
        <SpmmDense<i8> as KernelParams>::C_DECL,
        <SddmmDense<i8> as KernelParams>::C_DECL,
        <McSpmm<i8> as KernelParams>::C_DECL,
        <McSddmm<i8> as KernelParams>::C_DECL,
        <McSpmmDequant<f32> as KernelParams>::C_DECL,
        <McQuantize<f32> as KernelParams>::C_DECL,
        <mixed::McSpmmPlanes as KernelParams>::C_DECL,
        <mixed::McSplit<i8> as KernelParams>::C_DECL,
        <mixed::McSddmmPlanes<i8> as KernelParams>::C_DECL,
        <probe::McProbe as KernelParams>::C_DECL,
    ],
    defines: &[
        ("MC_WARPS", WARPS),
        ("MC_THREADS", THREADS),
        ("MC_STRIDE", STRIDE as u32),
        ("MC_PROBE_CHAINS", probe::CHAINS),
    ],
};

/// The i8 kernels take i8 storage only (the registry routes i16 to the plane kernels).
fn storage<T: Scalar>() -> Result<()> {
    match T::DTYPE {
        DType::I8 => c_type(T::DTYPE).map(drop),
        other => Err(Error::internal(format!(
            "no Magicube kernel takes {other} storage"
        ))),
    }
}

fn spmm_entry<T: Scalar>(vector: usize, run: u32) -> Result<Entry<McSpmm<T>>> {
    storage::<T>()?;
    Entry::new(&SOURCE, "mc_spmm", &[&vector, &run])
}

fn sddmm_entry<T: Scalar>(vector: usize) -> Result<Entry<McSddmm<T>>> {
    storage::<T>()?;
    Entry::new(&SOURCE, "mc_sddmm", &[&vector])
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = Vec::new();
    for v in VECTORS {
        for run in RUN_BYTES {
            specs.push(spmm_entry::<i8>(v, run)?.spec().clone());
        }
        specs.push(sddmm_entry::<i8>(v)?.spec().clone());
    }
    specs.extend(quantized::all_specs()?);
    specs.extend(mixed::all_specs()?);
    specs.extend(probe::all_specs()?);
    Ok(specs)
}

/// The SR-BCRS shape a plan runs: the descriptor's `V x 32`, or 8 x 32.
pub fn shape(op: OpKind, precision: Precision, block: Option<BlockShape>) -> Result<SrBcrsShape> {
    match block {
        None => SrBcrsShape::new(8, STRIDE),
        Some(b) if b.cols == STRIDE && VECTORS.contains(&b.rows) => {
            SrBcrsShape::new(b.rows, STRIDE)
        }
        Some(b) => Err(Error::invalid(format!(
            "{op} on sr-bcrs in {precision} runs vectors of 2, 4 or 8 rows in groups of \
             {STRIDE} (the k of the int8 MMA): a block shape of 2x{STRIDE}, 4x{STRIDE} or \
             8x{STRIDE}, not {b}"
        ))),
    }
}

/// Bytes of a B row per lane for an SpMM of `n` columns over `chunks`: the widest run whose
/// warps still number [`MIN_WARPS_PER_SM`] per multiprocessor, else the narrowest. Wide runs
/// load more per access and share each tile row among fewer warps; narrow ones give more warps
/// to a small matrix.
fn spmm_run_bytes(chunks: u32, n: u32, multiprocessors: u32) -> u32 {
    let wanted = MIN_WARPS_PER_SM * u64::from(multiprocessors.max(1));
    RUN_BYTES
        .iter()
        .rev()
        .copied()
        .find(|&w| u64::from(chunks) * u64::from(n.div_ceil(8 * w)) >= wanted)
        .unwrap_or(RUN_BYTES[0])
}

/// The order of a vector-row's column indices on the device.
#[derive(Clone, Copy, PartialEq)]
enum Columns {
    /// As stored.
    InOrder,
    /// Shuffled in blocks of 8 for the nibble transpose of the 4-bit SpMM (`transpose_run` in
    /// magicube.cu): vector j of a block goes to place (j % 2) * 4 + j / 2.
    Shuffled,
}

/// The pattern of an SR-BCRS matrix on the device.
struct SrBcrsPattern {
    shape: SrBcrsShape,
    rows: u32,
    /// Columns of the stored vectors, padding as column 0, in [`Columns`] order.
    vec_col: CudaSlice<u32>,
    vec_mask: CudaSlice<u8>,
    /// The CSR entry of each slot.
    order: ValueOrder,
    /// Start of each vector-row's vectors, padding included, and the end of the last.
    host_row_ptr: Vec<u32>,
}

impl SrBcrsPattern {
    fn upload<T: Scalar>(device: &Arc<Device>, m: &SrBcrs<T>, columns: Columns) -> Result<Self> {
        let device_column = |c: u32| if c == SR_BCRS_PADDING { 0 } else { c };
        let vec_col = match columns {
            Columns::InOrder => device.upload_converted(m.col_idx(), 0, |&c| device_column(c))?,
            Columns::Shuffled => {
                device.upload_converted(&shuffled(m.col_idx()), 0, |&c| device_column(c))?
            }
        };
        Ok(SrBcrsPattern {
            shape: m.block_shape(),
            rows: to_u32("number of rows", m.rows())?,
            vec_col,
            vec_mask: device.upload_converted(m.vec_mask(), 0, |&b| b)?,
            order: m.value_order(),
            host_row_ptr: m.row_ptr().to_vec(),
        })
    }

    fn stored_vectors(&self) -> usize {
        self.order.len() / self.shape.vector()
    }

    fn bytes(&self) -> usize {
        self.stored_vectors() * 5
    }

    /// The work units of the kernels ([`chunks_of`]).
    fn chunks(&self, groups: usize, keep_empty: bool) -> Chunks {
        chunks_of(
            &self.host_row_ptr,
            self.stored_vectors(),
            self.shape.stride(),
            groups,
            keep_empty,
        )
    }
}

/// Column indices (whole blocks of 8: the stride is a multiple of 8) in [`Columns::Shuffled`]
/// order.
fn shuffled(col_idx: &[u32]) -> Vec<u32> {
    let mut out = col_idx.to_vec();
    for (block, from) in out.chunks_exact_mut(8).zip(col_idx.chunks_exact(8)) {
        for (j, &c) in from.iter().enumerate() {
            block[(j % 2) * 4 + j / 2] = c;
        }
    }
    out
}

/// An SR-BCRS matrix on the device: its pattern and its values in slot order.
struct DeviceSrBcrs<T> {
    pattern: SrBcrsPattern,
    values: FormatValues<T>,
}

impl<T> std::ops::Deref for DeviceSrBcrs<T> {
    type Target = SrBcrsPattern;

    fn deref(&self) -> &SrBcrsPattern {
        &self.pattern
    }
}

impl<T: Scalar> DeviceSrBcrs<T> {
    fn build<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        shape: SrBcrsShape,
        clock: &mut PlanClock,
    ) -> Result<Self> {
        let m = SrBcrs::from_csr(a, shape, FillLimit::default())?;
        clock.lap(device, Phase::Host)?;
        let pattern = SrBcrsPattern::upload(device, &m, Columns::InOrder)?;
        let values = FormatValues::upload(device, &[m.values()], &pattern.order)?;
        clock.lap(device, Phase::Transfer)?;
        Ok(DeviceSrBcrs { pattern, values })
    }

    fn bytes(&self) -> usize {
        self.pattern.bytes() + self.values.bytes()
    }
}

/// The work units over an SR-BCRS of `stored` vectors in groups of `stride` with these row
/// pointers: runs of at most `groups` groups of one vector-row each (`usize::MAX`: whole
/// vector-rows); with `keep_empty`, one empty unit for each vector-row without vectors (whose
/// rows of C an SpMM must still write).
fn chunks_of(
    row_ptr: &[u32],
    stored: usize,
    stride: usize,
    groups: usize,
    keep_empty: bool,
) -> Chunks {
    let step = groups.max(1).saturating_mul(stride);
    let mut chunks = Chunks::default();
    for i in 0..row_ptr.len() / 2 {
        let begin = row_ptr[2 * i] as usize;
        let end = row_ptr.get(2 * i + 2).map_or(stored, |&p| p as usize);
        if begin == end && keep_empty {
            chunks.push(i, begin, end);
        }
        for at in (begin..end).step_by(step) {
            chunks.push(i, at, at.saturating_add(step).min(end));
        }
    }
    chunks
}

/// Work units of the kernels on the host: (vector-row, first vector, end) each.
#[derive(Debug, Default, PartialEq)]
struct Chunks {
    vrow: Vec<u32>,
    start: Vec<u32>,
    end: Vec<u32>,
}

impl Chunks {
    fn push(&mut self, vrow: usize, start: usize, end: usize) {
        // All fit u32: vector-rows and stored vectors are counted in u32 by the format.
        self.vrow.push(vrow as u32);
        self.start.push(start as u32);
        self.end.push(end as u32);
    }

    /// Whether a vector-row is cut into several units.
    fn split(&self) -> bool {
        self.vrow.windows(2).any(|w| w[0] == w[1])
    }

    /// The units ordered by their place in their vector-row (over `row_ptr`, in groups of
    /// `stride`), then by vector-row. The warps running at once then take the same stretch of
    /// many vector-rows, whose columns (sorted in each) lie near each other, and share the
    /// dense rows they read through the cache.
    fn position_major(self, row_ptr: &[u32], stride: usize) -> Chunks {
        let position =
            |i: usize| (self.start[i] - row_ptr[2 * self.vrow[i] as usize]) as usize / stride;
        let mut order: Vec<usize> = (0..self.vrow.len()).collect();
        order.sort_by_key(|&i| (position(i), self.vrow[i]));
        let pick = |of: &[u32]| order.iter().map(|&i| of[i]).collect();
        Chunks {
            vrow: pick(&self.vrow),
            start: pick(&self.start),
            end: pick(&self.end),
        }
    }
}

/// The work units on the device.
struct DeviceChunks {
    count: u32,
    vrow: CudaSlice<u32>,
    start: CudaSlice<u32>,
    end: CudaSlice<u32>,
    split: bool,
}

impl DeviceChunks {
    fn upload(device: &Arc<Device>, chunks: &Chunks) -> Result<Self> {
        Ok(DeviceChunks {
            count: to_u32("number of Magicube work units", chunks.vrow.len())?,
            vrow: device.upload_converted(&chunks.vrow, 0, |&v| v)?,
            start: device.upload_converted(&chunks.start, 0, |&v| v)?,
            end: device.upload_converted(&chunks.end, 0, |&v| v)?,
            split: chunks.split(),
        })
    }

    fn bytes(&self) -> usize {
        self.count as usize * 12
    }

    fn pointers(&self, device: &Device) -> (Ptr<u32>, Ptr<u32>, Ptr<u32>) {
        (
            Ptr::of(&self.vrow, device),
            Ptr::of(&self.start, device),
            Ptr::of(&self.end, device),
        )
    }
}

/// The work units of an SpMM plan: its vector-rows whole, and cut where some are long enough
/// to be ([`chunk_groups`]). Each run takes one of the two ([`SpmmUnits::pick`]).
struct SpmmUnits {
    whole: DeviceChunks,
    cut: Option<DeviceChunks>,
}

impl SpmmUnits {
    /// Both sets of units made on the host and uploaded, each phase lapped on `clock`.
    fn build(device: &Arc<Device>, a: &SrBcrsPattern, clock: &mut PlanClock) -> Result<Self> {
        let groups = chunk_groups(
            a.stored_vectors() / a.shape.stride(),
            device.info.multiprocessors,
        );
        let cut = Some(a.chunks(groups, true)).filter(Chunks::split);
        let whole = a.chunks(usize::MAX, true);
        clock.lap(device, Phase::Host)?;
        let units = SpmmUnits {
            whole: DeviceChunks::upload(device, &whole)?,
            cut: cut.map(|c| DeviceChunks::upload(device, &c)).transpose()?,
        };
        clock.lap(device, Phase::Transfer)?;
        Ok(units)
    }

    fn bytes(&self) -> usize {
        self.whole.bytes() + self.cut.as_ref().map_or(0, DeviceChunks::bytes)
    }

    /// The units for N = `n`: whole vector-rows where they give [`WHOLE_ROW_WARPS_PER_SM`]
    /// warps at the narrowest run, else the cut ones.
    fn pick(&self, n: u32, multiprocessors: u32) -> &DeviceChunks {
        let warps = u64::from(self.whole.count) * u64::from(n.div_ceil(8 * RUN_BYTES[0]));
        match &self.cut {
            Some(cut) if warps < WHOLE_ROW_WARPS_PER_SM * u64::from(multiprocessors.max(1)) => cut,
            _ => &self.whole,
        }
    }
}

/// Groups an SpMM work unit takes at most, for `total` groups on a device of
/// `multiprocessors`: what spreads them over [`CHUNKS_PER_SM`] units per multiprocessor, and
/// at least [`MIN_CHUNK_GROUPS`]. A layer of few vector-rows is then cut so that every
/// multiprocessor has warps, and a long row of a skewed matrix no longer holds one warp.
fn chunk_groups(total: usize, multiprocessors: u32) -> usize {
    let units = CHUNKS_PER_SM * multiprocessors.max(1) as usize;
    total.div_ceil(units).max(MIN_CHUNK_GROUPS)
}

/// Bytes a row of a B the plans rewrite on the device (quantized, or split into planes) is
/// padded to, so that every lane run (at most 16 bytes) is aligned.
const B_ALIGN: usize = 16;
/// Blocks of the kernels that stride over B at most: several waves on the largest devices.
const MAX_STRIDE_BLOCKS: u64 = 4096;

/// The row length of a rewritten B of N = `width` columns ([`B_ALIGN`]).
fn padded_b_row(width: usize) -> Result<usize> {
    width
        .checked_next_multiple_of(B_ALIGN)
        .ok_or_else(|| Error::overflow::<usize>("a row of the device's B", width))
}

/// The bound operands of an SpMM run for a plan's own kernels, or `None` when the run is
/// already done: no rows or columns of C, or alpha = 0, for which C is scaled by beta here.
fn spmm_operands<T: Scalar>(
    base: &PlanBase<T>,
    alpha: T::Acc,
    b: &DenseRef<'_, T>,
    beta: T::Acc,
    c: &mut DenseMut<'_, T::Out>,
) -> Result<Option<SpmmOperands>> {
    let ops = bind_spmm(&base.device, (base.rows, base.cols), b, c)?;
    base.info.check_width(ops.n as usize)?;
    if base.rows == 0 || ops.n == 0 {
        return Ok(None);
    }
    if alpha == T::Acc::ZERO {
        base.scale(&ops.c, beta)?;
        return Ok(None);
    }
    Ok(Some(ops))
}

/// A grid of [`THREADS`]-thread blocks for `items` items, at most [`MAX_STRIDE_BLOCKS`]
/// (the kernels stride over the rest).
fn stride_grid(items: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (items.clamp(1, MAX_STRIDE_BLOCKS) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A grid of `warps` warps, [`WARPS`] a block.
fn warp_grid(warps: u64) -> Result<LaunchConfig> {
    let blocks = warps.div_ceil(u64::from(WARPS)).max(1);
    let blocks = u32::try_from(blocks)
        .ok()
        .filter(|&b| b <= i32::MAX as u32)
        .ok_or_else(|| Error::overflow::<i32>("Magicube thread blocks", blocks as usize))?;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// The Magicube SpMM kernels of one plan (one per lane run, for the plan's V), its matrix and
/// its work units.
pub(crate) struct SpmmFamily<T: Scalar> {
    a: DeviceSrBcrs<T>,
    units: SpmmUnits,
    kernels: Vec<Kernel<McSpmm<T>>>,
}

/// The Magicube algorithm `auto` runs in `precision` on a device of `compute_capability`:
/// `magicube-s4` for 4-bit operands where the s4 MMA runs at twice the s8 rate (sm_80 to
/// sm_89), `magicube` everywhere else. Hopper (sm_90) has no 4-bit tensor cores: its s4 MMA
/// runs at about 5% of the s8 rate (docs/integer.md), and 4-bit values held one per byte go
/// faster through the s8 MMAs.
pub fn auto_algorithm(precision: Precision, compute_capability: (i32, i32)) -> Algorithm {
    let four_bit = matches!(precision.compute, Compute::IntBits { right: 4, .. })
        && precision.storage == DType::I8;
    if four_bit && compute_capability.0 == 8 {
        Algorithm::MagicubeS4
    } else {
        Algorithm::Magicube
    }
}

/// A planned Magicube SpMM: i8, f32 quantized to i8 inside, or integers of other widths as
/// planes.
pub(crate) fn spmm<'a, T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmmDesc,
    algorithm: Algorithm,
    clock: PlanClock,
) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
    let shape = shape(OpKind::Spmm, desc.precision, desc.block)?;
    let v = shape.vector();
    if algorithm == Algorithm::MagicubeS4 {
        return Ok(Box::new(mixed::plan(
            device,
            a,
            desc,
            v,
            PlaneWidth::Nibble,
            clock,
        )?));
    }
    if desc.precision == Precision::F32_VIA_I8 {
        return Ok(Box::new(quantized::plan(device, a, desc, shape, clock)?));
    }
    // Operands stored in i8 (`i4`, `l8-r4`) are multiplied whole, by the i8 kernels; wider
    // ones are split into 8-bit planes.
    if matches!(desc.precision.compute, Compute::IntBits { .. }) && T::DTYPE != DType::I8 {
        return Ok(Box::new(mixed::plan(
            device,
            a,
            desc,
            v,
            PlaneWidth::Byte,
            clock,
        )?));
    }
    Ok(Box::new(spmm_plan(device, a, desc, shape, clock)?))
}

fn spmm_plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmmDesc,
    shape: SrBcrsShape,
    clock: PlanClock,
) -> Result<CudaPlan<T, SpmmFamily<T>>> {
    let entries = RUN_BYTES
        .iter()
        .map(|&w| spmm_entry::<T>(shape.vector(), w))
        .collect::<Result<Vec<_>>>()?;
    let specs: Vec<&KernelSpec> = entries.iter().map(Entry::spec).collect();
    let info = desc.info(Algorithm::Magicube);
    let (base, mut clock) = PlanBase::new(device, a, info, &specs, clock)?;
    let kernels = entries
        .iter()
        .map(|e| device.kernel(e))
        .collect::<Result<Vec<_>>>()?;
    clock.lap(device, Phase::Kernels)?;
    let a = DeviceSrBcrs::build(device, a, shape, &mut clock)?;
    let units = SpmmUnits::build(device, &a, &mut clock)?;
    let bytes = a.bytes() + units.bytes();
    let family = SpmmFamily { a, units, kernels };
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> Kernels<T> for SpmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        self.a.values.target()
    }
}

impl<T: Scalar> SpmmKernels<T> for SpmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmmOperands, T::Acc>) -> Result<()> {
        let (device, a, n) = (&base.device, &self.a, run.ops.n);
        let chunks = self.units.pick(n, device.info.multiprocessors);
        let w = spmm_run_bytes(chunks.count, n, device.info.multiprocessors);
        let pick = RUN_BYTES.iter().position(|&r| r == w).unwrap_or(0);
        if chunks.split {
            // The chunks of a vector-row add into its rows of C.
            base.scale(&run.ops.c, run.beta)?;
        }
        let (chunk_vrow, chunk_start, chunk_end) = chunks.pointers(device);
        let params = McSpmm {
            chunks: chunks.count,
            rows: a.rows,
            split: u32::from(chunks.split),
            chunk_vrow,
            chunk_start,
            chunk_end,
            vec_col: Ptr::of(&a.vec_col, device),
            values: a.values.pointer(),
            dense: SpmmDense::new(run),
        };
        let config = warp_grid(u64::from(chunks.count) * u64::from(n.div_ceil(8 * w)))?;
        // SAFETY: every chunk is whole groups of 32 vectors of one vector-row below the stored
        // count (so the 16-byte column loads and the V x 32 tile rows are inside vec_col and
        // values, both aligned allocations with groups at multiples of 32); columns
        // are < cols = B's rows (padding maps to 0, and a matrix with vectors has a column);
        // B spans cols x n and C rows x n at their strides (bound operands), columns past n
        // are neither read nor written, rows past M are not written, and vector accesses are
        // taken only for contiguous rows whose leading dimension keeps them aligned.
        unsafe { self.kernels[pick].launch(config, &params) }
    }
}

/// The Magicube SDDMM kernel of one plan, the pattern it fills and its tiles (one group of 32
/// vectors each).
pub(crate) struct SddmmFamily<T: Scalar> {
    s: DeviceSrBcrs<T>,
    kernel: SddmmKernel<T>,
    tiles: DeviceChunks,
    scale_by_values: bool,
}

/// i8 operands go to the tensor cores whole, or as 4-bit planes (`magicube-s4`); i16 ones as
/// 8-bit planes.
enum SddmmKernel<T: Scalar> {
    Whole(Kernel<McSddmm<T>>),
    Planes(Box<mixed::SddmmPlanes<T>>),
}

/// A planned Magicube SDDMM.
pub(crate) fn sddmm_plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    s: CsrRef<'_, T, I>,
    desc: &SddmmDesc,
    algorithm: Algorithm,
    clock: PlanClock,
) -> Result<CudaPlan<T, SddmmFamily<T>>> {
    let shape = shape(OpKind::Sddmm, desc.precision, desc.block)?;
    let info = desc.info(algorithm);
    let planes = match (T::DTYPE, algorithm) {
        (DType::I16, _) => Some(mixed::BYTE),
        (_, Algorithm::MagicubeS4) => Some(mixed::NIBBLE),
        _ => None,
    };
    let (base, mut clock, mut kernel) = if let Some(bits) = planes {
        let entries = mixed::SddmmPlanes::<T>::entries(shape.vector(), bits)?;
        let (base, clock) = PlanBase::new(
            device,
            s,
            info,
            &[entries.0.spec(), entries.1.spec()],
            clock,
        )?;
        let planes = mixed::SddmmPlanes::new(device, &entries, bits, (s.rows(), s.cols()))?;
        (base, clock, SddmmKernel::Planes(Box::new(planes)))
    } else {
        let entry = sddmm_entry::<T>(shape.vector())?;
        let (base, clock) = PlanBase::new(device, s, info, &[entry.spec()], clock)?;
        (base, clock, SddmmKernel::Whole(device.kernel(&entry)?))
    };
    let workspace = match &mut kernel {
        SddmmKernel::Planes(planes) => planes.reserve(device, desc.reserved_width())?,
        SddmmKernel::Whole(_) => 0,
    };
    clock.lap(device, Phase::Kernels)?;
    let m = DeviceSrBcrs::build(device, s, shape, &mut clock)?;
    let tiles = m.chunks(1, false).position_major(&m.host_row_ptr, STRIDE);
    clock.lap(device, Phase::Host)?;
    let tiles = DeviceChunks::upload(device, &tiles)?;
    clock.lap(device, Phase::Transfer)?;
    let bytes = m.bytes() + tiles.bytes() + workspace;
    let family = SddmmFamily {
        s: m,
        kernel,
        tiles,
        scale_by_values: desc.scale_by_values,
    };
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> Kernels<T> for SddmmFamily<T> {
    fn values(&self) -> Values<'_, T> {
        self.s.values.target()
    }

    fn reserve(&mut self, base: &PlanBase<T>, width: usize) -> Result<usize> {
        match &mut self.kernel {
            SddmmKernel::Planes(planes) => planes.reserve(&base.device, width),
            SddmmKernel::Whole(_) => Ok(0),
        }
    }
}

impl<T: Scalar> SddmmKernels<T> for SddmmFamily<T> {
    fn value_order(&self) -> Option<&ValueOrder> {
        Some(&self.s.order)
    }

    /// The SDDMM kernel itself: with alpha = 0 it reads no input and writes 0 to the slots
    /// without an entry, as every run does.
    fn scale(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        self.run(base, run)
    }

    fn run(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        let (device, s, tiles) = (&base.device, &self.s, &self.tiles);
        let (tile_vrow, tile_start, _) = tiles.pointers(device);
        let params = McSddmm {
            tiles: tiles.count,
            rows: s.rows,
            tile_vrow,
            tile_start,
            vec_col: Ptr::of(&s.vec_col, device),
            vec_mask: Ptr::of(&s.vec_mask, device),
            values: s.values.pointer(),
            scale_by_values: u32::from(self.scale_by_values),
            dense: SddmmDense::new(run),
        };
        let config = warp_grid(u64::from(tiles.count))?;
        match &mut self.kernel {
            // SAFETY: every tile is a whole group of 32 stored vectors, so its columns, masks
            // and V x 32 slots are inside vec_col, vec_mask and values, and the slots written
            // are below the stored count * V = C's length (a bound operand of that many
            // elements); columns are < cols = Y's rows and X rows past M are never read; X
            // spans rows x k and Y cols x k at their strides, read past k never, by vector only
            // for contiguous rows whose leading dimension keeps the 16-byte runs aligned.
            SddmmKernel::Whole(kernel) => unsafe { kernel.launch(config, &params) },
            SddmmKernel::Planes(planes) => planes.run(device, run, &params, config),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_name_the_vector_length_with_stride_32() {
        let p = Precision::I8;
        assert_eq!(
            shape(OpKind::Spmm, p, None).unwrap(),
            SrBcrsShape::new(8, 32).unwrap()
        );
        for v in VECTORS {
            let s = shape(OpKind::Sddmm, p, Some(BlockShape::new(v, 32))).unwrap();
            assert_eq!((s.vector(), s.stride()), (v, 32));
        }
        for bad in [
            BlockShape::new(8, 16),
            BlockShape::new(16, 32),
            BlockShape::new(1, 32),
        ] {
            assert!(matches!(
                shape(OpKind::Spmm, p, Some(bad)),
                Err(Error::InvalidArgument { .. })
            ));
        }
    }

    #[test]
    fn shuffled_columns_interleave_each_block_of_eight() {
        let cols: Vec<u32> = (0..16).collect();
        assert_eq!(
            shuffled(&cols),
            [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15]
        );
    }

    #[test]
    fn auto_takes_the_s4_mma_for_four_bit_operands_on_ampere_and_ada_only() {
        for cc in [(8, 0), (8, 6), (8, 9)] {
            assert_eq!(auto_algorithm(Precision::I4, cc), Algorithm::MagicubeS4);
            assert_eq!(auto_algorithm(Precision::L8_R4, cc), Algorithm::MagicubeS4);
            assert_eq!(auto_algorithm(Precision::I8, cc), Algorithm::Magicube);
            assert_eq!(auto_algorithm(Precision::L16_R4, cc), Algorithm::Magicube);
        }
        for cc in [(9, 0), (10, 0), (12, 0)] {
            assert_eq!(auto_algorithm(Precision::I4, cc), Algorithm::Magicube);
        }
    }

    #[test]
    fn lanes_take_wide_runs_only_when_warps_abound() {
        // A 2048-row DLMC layer at V = 8 (256 vector-rows) on 132 multiprocessors.
        assert_eq!(spmm_run_bytes(256, 128, 132), 4);
        // 8192 rows, N = 512: 1024 vector-rows x 4 tiles of 128 columns.
        assert_eq!(spmm_run_bytes(1024, 512, 132), 16);
        assert_eq!(spmm_run_bytes(1024, 256, 132), 8);
        assert_eq!(spmm_run_bytes(0, 1, 0), 4);
    }

    #[test]
    fn work_units_cover_every_group_of_every_vector_row() {
        // Vector-rows of 40 real vectors (64 stored), none, and 3 (32 stored).
        let row_ptr = [0, 40, 64, 64, 64, 67];
        let tiles = chunks_of(&row_ptr, 96, STRIDE, 1, false);
        assert_eq!((tiles.vrow, tiles.start), (vec![0, 0, 2], vec![0, 32, 64]));
        let whole = chunks_of(&row_ptr, 96, STRIDE, 4, true);
        assert_eq!(whole.vrow, [0, 1, 2]);
        assert_eq!(
            (whole.start, whole.end),
            (vec![0, 64, 64], vec![64, 64, 96])
        );
        assert!(!chunks_of(&row_ptr, 96, STRIDE, 2, true).split());
        assert!(chunks_of(&row_ptr, 96, STRIDE, 1, true).split());
        // The first groups of vector-rows 0 and 2, then the second of vector-row 0.
        let by_place = chunks_of(&row_ptr, 96, STRIDE, 1, false).position_major(&row_ptr, STRIDE);
        assert_eq!(
            (by_place.vrow, by_place.start),
            (vec![0, 2, 0], vec![0, 64, 32])
        );
        assert_eq!(chunk_groups(5120, 132), 10);
        assert_eq!(chunk_groups(100, 132), MIN_CHUNK_GROUPS);
    }
}
