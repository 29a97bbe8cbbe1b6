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
//!   row's segments to finish adds the row's slots in order, in the same launch.
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

use cudarc::driver::{CudaFunction, CudaSlice, LaunchArgs, LaunchConfig, PushKernelArg};
use sparse_core::{
    Accumulator, Algorithm, BackendKind, CsrRef, DType, DenseMut, DenseRef, Error, Format, Layout,
    OpKind, PlanInfo, Precision, Result, RowStats, Scalar, SddmmPlan, SpIndex, SpmmPlan,
};

use crate::compile::sources;
use crate::device::{driver_error, Device};
use crate::matrix::DeviceCsr;
use crate::operand::{input, output, sddmm_inner, spmm_width, strides, suffix, to_u32, AccArg};
use crate::spmm::{scale_dense, Variants};
use decomposition::{Decomposition, TILE};

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
/// Threads per block of the SpMM and SDDMM kernels (`RODE_BLOCK` in rode.cu).
const BLOCK: u32 = 128;
/// The largest grid.x; both parts' blocks must fit in it.
const MAX_GRID_X: u32 = (1 << 31) - 1;
/// The largest grid.y; the SpMM kernels stride over the column tiles beyond it.
const MAX_GRID_Y: u32 = 65_535;
/// Tiles of shared memory per sub-warp (`RODE_BUFFERS` in rode.cu): the double buffer of a
/// segment, and a residual's one tile in the first of them.
const BUFFERS: u32 = 2;
/// Lanes the SDDMM kernels need at least: their reduction leaves one entry of a sub-block of 8
/// (`rode_sub<T>::N`) in each lane.
const SDDMM_MIN_LANES: u32 = 8;

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
/// ... and for SDDMM, for a matrix whose mean row is at least this long.
const AUTO_SDDMM_MEAN_ROW: f64 = 13.0;
/// The RoDe algorithm `auto` picks: the deterministic one, so `auto` stays bit-reproducible as
/// `vector` is; its workspace traffic costs about what the atomic variant's read-modify-writes
/// of C do.
const AUTO_RODE: Algorithm = Algorithm::RodeDeterministic;

/// The algorithm `auto` runs for CSR SpMM and SDDMM on the cuda backend: RoDe for a matrix with
/// a row of at least [`AUTO_LONG_ROW`] entries, or fewer than [`AUTO_SMALL_NNZ`] entries, and for
/// SDDMM also for one whose mean row has at least [`AUTO_SDDMM_MEAN_ROW`]; `vector` otherwise.
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
/// The layout and width of the dense operands are unknown at plan time and play no part.
pub(crate) fn auto_algorithm<T, I: SpIndex>(op: OpKind, a: CsrRef<'_, T, I>) -> Algorithm {
    if prefers_rode(op, &a.row_stats(), a.nnz()) {
        AUTO_RODE
    } else {
        Algorithm::Vector
    }
}

fn prefers_rode(op: OpKind, rows: &RowStats, nnz: usize) -> bool {
    rows.max >= AUTO_LONG_ROW
        || nnz < AUTO_SMALL_NNZ
        || (op == OpKind::Sddmm && rows.mean >= AUTO_SDDMM_MEAN_ROW)
}

/// One kernel per values-per-lane V (1, 2 and 4, as rode.cu instantiates them); the sub-warp
/// width is a kernel argument.
struct PerVector([CudaFunction; 3]);

impl PerVector {
    fn load(device: &Device, name: impl Fn(u32) -> String) -> Result<Self> {
        Ok(PerVector([
            device.function(sources::RODE, &name(1))?,
            device.function(sources::RODE, &name(2))?,
            device.function(sources::RODE, &name(4))?,
        ]))
    }

    fn get(&self, values: u32) -> &CudaFunction {
        match values {
            4 => &self.0[2],
            2 => &self.0[1],
            _ => &self.0[0],
        }
    }
}

/// The sub-warp shape of a run: W lanes of V values each.
#[derive(Clone, Copy)]
struct Lanes {
    lanes: u32,
    values: u32,
}

impl Lanes {
    /// V the widest of 4, 2, 1 dividing the leading dimension of every operand whose rows are
    /// read with vector loads (`None` for a column-major one, which forces 1); unlike `vector`'s,
    /// the RoDe kernels read the last, partial span of a row element by element, so the row length
    /// need not be a multiple of V (0 is). W spans `len` where the widths allow, at least `min`.
    fn new(len: usize, lds: &[Option<usize>], min: u32) -> Self {
        let values = Variants::values(0, lds);
        Lanes {
            lanes: Variants::lanes(len, values).max(min),
            values,
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

/// How the segments of split rows reach C.
enum Combining {
    /// `rode_scale_rows` (C = beta*C on the listed rows), then atomic adds.
    Atomics { scale_rows: CudaFunction },
    /// Sums stored in `workspace` (slots x N accumulation values), added by the last segment of
    /// each row to arrive, counted in `arrivals` (slots x column tiles, zero between runs: the
    /// last segment clears its counter). Both grow to the widest N run so far.
    Partials {
        workspace: Option<CudaSlice<u8>>,
        arrivals: Option<CudaSlice<u32>>,
    },
}

/// A planned RoDe SpMM.
pub struct RodeSpmmPlan<T> {
    device: Arc<Device>,
    a: DeviceCsr<T>,
    parts: Decomposition,
    /// `rode_spmm`: segments and residuals.
    kernel: PerVector,
    /// `scale_matrix` of spmm.cu, for alpha == 0.
    scale: CudaFunction,
    combining: Combining,
    info: PlanInfo,
}

impl<T: Scalar> RodeSpmmPlan<T> {
    /// `algorithm` is [`Algorithm::Rode`] or [`Algorithm::RodeDeterministic`].
    pub fn new<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        precision: Precision,
        algorithm: Algorithm,
    ) -> Result<Self> {
        let sfx = suffix(T::DTYPE)
            .ok_or_else(|| Error::invalid(format!("no CUDA SpMM kernel for {}", T::DTYPE)))?;
        let atomics = match algorithm {
            Algorithm::Rode => T::DTYPE != DType::F16,
            Algorithm::RodeDeterministic => false,
            other => return Err(Error::invalid(format!("{other} is not a RoDe algorithm"))),
        };
        let dev = DeviceCsr::upload(device, a)?;
        let parts = Decomposition::build(
            device,
            &dev,
            segment_length(a.nnz(), device.info.multiprocessors, MIN_SEGMENT),
            true,
        )?;
        let combining = if atomics {
            Combining::Atomics {
                scale_rows: device.function(sources::RODE, &format!("rode_scale_rows_{sfx}"))?,
            }
        } else {
            Combining::Partials {
                workspace: None,
                arrivals: None,
            }
        };
        let split_rows = parts.combine.as_ref().is_some_and(|c| c.slots > 0);
        let info = PlanInfo {
            backend: BackendKind::Cuda,
            op: OpKind::Spmm,
            format: Format::Csr,
            precision,
            algorithm,
            bytes: dev.bytes() + parts.bytes(),
            // Atomics only ever add into rows split in several parts.
            deterministic: !(atomics && split_rows),
        };
        Ok(RodeSpmmPlan {
            kernel: PerVector::load(device, |v| format!("rode_spmm_{sfx}_v{v}"))?,
            scale: device.function(sources::SPMM, &format!("scale_matrix_{sfx}"))?,
            device: device.clone(),
            a: dev,
            parts,
            combining,
            info,
        })
    }
}

/// The first arguments of `rode_spmm` and `rode_sddmm`: the sub-warp width, the segments'
/// blocks, and the parts.
fn push_parts<'a>(
    args: &mut LaunchArgs<'a>,
    lanes: &'a u32,
    block_ctas: &'a u32,
    parts: &'a Decomposition,
) {
    args.arg(lanes)
        .arg(block_ctas)
        .arg(&parts.segments)
        .arg(&parts.residuals)
        .arg(&parts.part_row)
        .arg(&parts.part_lo)
        .arg(&parts.part_hi);
}

/// `rode_spmm`'s `partials` and `arrivals` arguments for atomics.
const NULL: u64 = 0;

/// A launch error with the kernel's name.
fn launched(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| driver_error(what, e)
}

impl<T: Scalar> SpmmPlan<T> for RodeSpmmPlan<T> {
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
        let (b_strides, c_strides) = (strides(b.layout(), b.ld()), strides(c_layout, c.ld()));
        let b_row_major = (b.layout() == Layout::RowMajor).then(|| b.ld());
        let bb = input(&b, &self.device, "spmm B")?;
        let cb = output(&mut c, &self.device, "spmm C")?;
        if a.rows == 0 || n == 0 {
            return Ok(());
        }
        let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
        let (acc_alpha, acc_beta) = (AccArg::of::<T>(alpha), AccArg::of::<T>(beta));
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
        let parts = &self.parts;
        let combine = parts
            .combine
            .as_ref()
            .ok_or_else(|| Error::invalid("unreachable: SpMM decompositions list split rows"))?;
        let shape = Lanes::new(width, &[b_row_major], 4);
        let col_tiles = n.div_ceil(shape.lanes * shape.values);
        let value_bytes = size_of::<T>() as u32;
        let (block_ctas, parts_config) =
            shape.config(parts.segments, parts.residuals, col_tiles, 4 + value_bytes)?;
        let main = &self.device.stream;
        let rows_config = LaunchConfig {
            grid_dim: (n.div_ceil(BLOCK), combine.listed.clamp(1, MAX_GRID_Y), 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        match &mut self.combining {
            Combining::Atomics { scale_rows } if combine.listed > 0 => {
                let mut args = main.launch_builder(scale_rows);
                args.arg(&combine.listed)
                    .arg(&combine.listed_row)
                    .arg(&n)
                    .arg(&cb.bytes)
                    .arg(&c_strides.0)
                    .arg(&c_strides.1);
                acc_beta.push(&mut args);
                // SAFETY: listed_row holds `listed` rows < rows; C spans rows x n at its strides
                // (checked by the DenseMut); the grid covers n on x, the listed rows over y.
                unsafe { args.launch(rows_config) }.map_err(launched("rode_scale_rows"))?;
            }
            Combining::Atomics { .. } => {}
            Combining::Partials {
                workspace,
                arrivals,
            } => {
                let acc = if T::DTYPE == DType::F64 { 8 } else { 4 };
                let slots = combine.slots as usize;
                let overflow = || Error::invalid("the RoDe workspace size overflows usize");
                let sums = slots
                    .checked_mul(width)
                    .and_then(|v| v.checked_mul(acc))
                    .ok_or_else(overflow)?;
                let counters = slots.checked_mul(col_tiles as usize).ok_or_else(overflow)?;
                self.info.bytes += self.device.grow_zeroed(
                    workspace,
                    sums.max(1),
                    "allocating the RoDe workspace",
                )?;
                self.info.bytes += self.device.grow_zeroed(
                    arrivals,
                    counters.max(1),
                    "allocating the RoDe arrival counters",
                )?;
            }
        }
        if parts.segments == 0 && parts.residuals == 0 {
            return Ok(());
        }
        let mut args = main.launch_builder(self.kernel.get(shape.values));
        push_parts(&mut args, &shape.lanes, &block_ctas, parts);
        args.arg(&combine.seg_slot)
            .arg(&parts.seg_len)
            .arg(&a.row_ptr)
            .arg(&a.col_idx)
            .arg(&a.values.bytes);
        match &self.combining {
            Combining::Partials {
                workspace: Some(workspace),
                arrivals: Some(arrivals),
            } => args.arg(workspace).arg(arrivals),
            _ => args.arg(&NULL).arg(&NULL),
        };
        args.arg(&n)
            .arg(&bb.bytes)
            .arg(&b_strides.0)
            .arg(&b_strides.1)
            .arg(&cb.bytes)
            .arg(&c_strides.0)
            .arg(&c_strides.1);
        acc_alpha.push(&mut args);
        acc_beta.push(&mut args);
        // SAFETY: arguments match rode_spmm; the lists come from this matrix's decomposition,
        // and the grid's first block_ctas blocks cover the `segments` segments, BLOCK / W each,
        // the others the `residuals` residuals, so a sub-warp past either list's end leaves
        // before reading it. A segment reads entries from its tiles' aligned start (at most 3
        // before its first entry) to its end, a residual its whole row of fewer than TILE
        // entries, and columns < cols; B spans cols x n and C rows x n at their strides (checked
        // by the Dense views); V > 1 only when V divides B's leading dimension (allocations are
        // 256-byte aligned), so full vector spans are aligned. With partials, the workspace holds
        // slots x n accumulation values and `arrivals` slots x col_tiles zeroed counters, which
        // each run leaves zeroed (the stream orders the runs); without, both are null and the
        // kernel adds atomically after rode_scale_rows, earlier on this stream. Shared memory is
        // what the kernel carves for BLOCK / W sub-warps of BUFFERS tiles, whichever part a block
        // runs.
        unsafe { args.launch(parts_config) }
            .map_err(launched("rode_spmm"))
            .map(drop)
    }
}

/// A planned RoDe SDDMM.
pub struct RodeSddmmPlan<T> {
    device: Arc<Device>,
    s: DeviceCsr<T>,
    parts: Decomposition,
    /// `rode_sddmm`: segments and residuals.
    kernel: PerVector,
    /// `scale_matrix` of spmm.cu, for alpha == 0 (C is a dense nnz x 1 matrix).
    scale: CudaFunction,
    scale_by_values: bool,
    info: PlanInfo,
}

impl<T: Scalar> RodeSddmmPlan<T> {
    /// `algorithm` is [`Algorithm::Rode`] or [`Algorithm::RodeDeterministic`]: the same kernels,
    /// since no output is shared between parts.
    pub fn new<I: SpIndex>(
        device: &Arc<Device>,
        s: CsrRef<'_, T, I>,
        precision: Precision,
        algorithm: Algorithm,
        scale_by_values: bool,
    ) -> Result<Self> {
        let sfx = suffix(T::DTYPE)
            .ok_or_else(|| Error::invalid(format!("no CUDA SDDMM kernel for {}", T::DTYPE)))?;
        if !matches!(algorithm, Algorithm::Rode | Algorithm::RodeDeterministic) {
            return Err(Error::invalid(format!(
                "{algorithm} is not a RoDe algorithm"
            )));
        }
        let dev = DeviceCsr::upload(device, s)?;
        let parts = Decomposition::build(
            device,
            &dev,
            segment_length(s.nnz(), device.info.multiprocessors, SDDMM_MIN_SEGMENT),
            false,
        )?;
        let info = PlanInfo {
            backend: BackendKind::Cuda,
            op: OpKind::Sddmm,
            format: Format::Csr,
            precision,
            algorithm,
            bytes: dev.bytes() + parts.bytes(),
            deterministic: true,
        };
        Ok(RodeSddmmPlan {
            kernel: PerVector::load(device, |v| format!("rode_sddmm_{sfx}_v{v}"))?,
            scale: device.function(sources::SPMM, &format!("scale_matrix_{sfx}"))?,
            device: device.clone(),
            s: dev,
            parts,
            scale_by_values,
            info,
        })
    }
}

impl<T: Scalar> SddmmPlan<T> for RodeSddmmPlan<T> {
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
        let (c_inc, _) = strides(c_layout, c.ld());
        let row_major = |d: &DenseRef<'_, T>| (d.layout() == Layout::RowMajor).then(|| d.ld());
        let shape = Lanes::new(k as usize, &[row_major(&x), row_major(&y)], SDDMM_MIN_LANES);
        let (x_strides, y_strides) = (strides(x.layout(), x.ld()), strides(y.layout(), y.ld()));
        let xb = input(&x, &self.device, "sddmm X")?;
        let yb = input(&y, &self.device, "sddmm Y")?;
        let cb = output(&mut c, &self.device, "sddmm C")?;
        if s.nnz == 0 {
            return Ok(());
        }
        let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
        let (acc_alpha, acc_beta) = (AccArg::of::<T>(alpha), AccArg::of::<T>(beta));
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
        let parts = &self.parts;
        if parts.segments == 0 && parts.residuals == 0 {
            return Ok(());
        }
        let (block_ctas, parts_config) = shape.config(parts.segments, parts.residuals, 1, 4)?;
        let scale_by_values = u32::from(self.scale_by_values);
        let mut args = self
            .device
            .stream
            .launch_builder(self.kernel.get(shape.values));
        push_parts(&mut args, &shape.lanes, &block_ctas, parts);
        args.arg(&s.col_idx)
            .arg(&s.values.bytes)
            .arg(&scale_by_values)
            .arg(&k)
            .arg(&xb.bytes)
            .arg(&x_strides.0)
            .arg(&x_strides.1)
            .arg(&yb.bytes)
            .arg(&y_strides.0)
            .arg(&y_strides.1)
            .arg(&cb.bytes)
            .arg(&c_inc);
        acc_alpha.push(&mut args);
        acc_beta.push(&mut args);
        // SAFETY: arguments match rode_sddmm; the grid's first block_ctas blocks cover the
        // `segments` segments, BLOCK / W each, the others the `residuals` residuals, so a sub-warp
        // past either list's end leaves before reading it. Segments read column indices from
        // their tiles' aligned starts (at most 3 before their first entries) to their ends,
        // residuals their whole rows of fewer than TILE entries, and each part writes only its row's entries; S is canonical with
        // columns < cols = Y's rows; X spans rows x k, Y cols x k and C nnz elements at their
        // strides (checked by the Dense views); V > 1 only when V divides both row-major leading
        // dimensions; W >= 8 lanes as the reduction needs; shared memory is what the kernel
        // carves for BLOCK / W sub-warps of BUFFERS column-index tiles.
        unsafe { args.launch(parts_config) }
            .map_err(launched("rode_sddmm"))
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
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
    fn auto_picks_rode_for_long_rows_small_matrices_and_sddmm_on_long_mean_rows() {
        let long = AUTO_LONG_ROW;
        let large = AUTO_SMALL_NNZ;
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

    #[test]
    fn lanes_take_vectors_from_the_leading_dimensions_alone() {
        let shape = |len, lds: &[Option<usize>], min| {
            let l = Lanes::new(len, lds, min);
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
