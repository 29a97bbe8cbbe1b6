//! SpMV plans on CUDA cores.
//!
//! The `auto` choice, from the row-length statistics:
//! - a row longer than [`LONG_ROW`] entries: vector-split, so long rows are spread over many
//!   warps while the others keep the vector kernel;
//! - mean below 1.5 entries: scalar, one thread per row;
//! - otherwise vector with W lanes per row, W the power of two nearest the mean, from 2 to 32.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use sparse_core::{
    Accumulator, Algorithm, BackendKind, CsrRef, DenseMut, DenseRef, Error, Format, Layout, OpKind,
    PlanInfo, Precision, Result, RowStats, Scalar, SpIndex, SpmvPlan,
};

use crate::compile::sources;
use crate::device::{driver_error, Device};
use crate::matrix::DeviceCsr;
use crate::operand::{input, output, strides, suffix, to_u32, AccArg};

const BLOCK: u32 = 256;
/// Merge-path items (row ends plus entries) per thread.
const MERGE_ITEMS: u32 = 8;

/// Rows longer than this are split into segments of this length by `vector-split`: a warp
/// then loops at most 32 times over one row.
pub const LONG_ROW: u32 = 1024;

/// The algorithm `auto` picks for a matrix with these row statistics.
pub fn auto_algorithm(stats: &RowStats) -> Algorithm {
    if stats.max > LONG_ROW as usize {
        Algorithm::VectorSplit
    } else if stats.mean < 1.5 {
        Algorithm::Scalar
    } else {
        Algorithm::Vector
    }
}

/// Lanes per row of the vector kernel.
fn vector_width(mean: f64) -> u32 {
    let w = mean.max(1.0).log2().round().clamp(1.0, 5.0) as u32;
    1 << w
}

/// Long rows of `vector-split`: each cut into segments of [`LONG_ROW`] entries.
struct LongRows {
    segments: u32,
    rows: u32,
    segment_row: CudaSlice<u32>,
    segment_start: CudaSlice<u32>,
    long_row: CudaSlice<u32>,
    first_segment: CudaSlice<u32>,
    partial: CudaSlice<u8>,
    segment_kernel: CudaFunction,
    row_kernel: CudaFunction,
}

enum Kernel {
    Csr {
        function: CudaFunction,
        lanes: u32,
        long: Option<LongRows>,
    },
    Merge {
        function: CudaFunction,
        fixup: CudaFunction,
        threads: u32,
        start_row: CudaSlice<u32>,
        start_entry: CudaSlice<u32>,
        partial_row: CudaSlice<u32>,
        partial_sum: CudaSlice<u8>,
    },
    Coo {
        function: CudaFunction,
        row_idx: CudaSlice<u32>,
    },
}

pub struct CudaSpmvPlan<T> {
    device: Arc<Device>,
    a: DeviceCsr<T>,
    kernel: Kernel,
    scale: CudaFunction,
    info: PlanInfo,
}

fn grid(threads: u64) -> Result<LaunchConfig> {
    let blocks = to_u32(
        "number of thread blocks",
        threads.div_ceil(u64::from(BLOCK)).max(1) as usize,
    )?;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    })
}

impl<T: Scalar> CudaSpmvPlan<T> {
    pub fn new<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        format: Format,
        precision: Precision,
        algorithm: Algorithm,
    ) -> Result<Self> {
        let sfx = suffix(T::DTYPE)
            .ok_or_else(|| Error::invalid(format!("no CUDA SpMV kernel for {}", T::DTYPE)))?;
        let stats = a.row_stats();
        let algorithm = match (format, algorithm) {
            (Format::Coo, Algorithm::Auto) => Algorithm::Atomic,
            (Format::Csr, Algorithm::Auto) => auto_algorithm(&stats),
            (_, chosen) => chosen,
        };
        let dev = DeviceCsr::upload(device, a)?;
        let kernel = match (format, algorithm) {
            (Format::Csr, Algorithm::Scalar) => Kernel::Csr {
                function: device.function(sources::SPMV, &format!("spmv_csr_scalar_{sfx}"))?,
                lanes: 1,
                long: None,
            },
            (Format::Csr, Algorithm::Vector) => {
                let lanes = vector_width(stats.mean);
                Kernel::Csr {
                    function: device
                        .function(sources::SPMV, &format!("spmv_csr_vector_{sfx}_w{lanes}"))?,
                    lanes,
                    long: None,
                }
            }
            (Format::Csr, Algorithm::VectorSplit) => {
                let long = LongRows::new(device, a, sfx, size_of::<T::Acc>())?;
                let (long_rows, long_entries) = long_rows_and_entries(a);
                let mean = (a.nnz() - long_entries) as f64 / (a.rows() - long_rows).max(1) as f64;
                let lanes = vector_width(mean);
                Kernel::Csr {
                    function: device
                        .function(sources::SPMV, &format!("spmv_csr_vector_{sfx}_w{lanes}"))?,
                    lanes,
                    long,
                }
            }
            (Format::Csr, Algorithm::MergePath) => Self::merge(device, &dev, sfx)?,
            (Format::Coo, Algorithm::Atomic) => Kernel::Coo {
                function: device.function(sources::SPMV, &format!("spmv_coo_{sfx}"))?,
                row_idx: DeviceCsr::upload_row_indices(device, a)?,
            },
            (format, other) => {
                return Err(Error::invalid(format!(
                    "the cuda backend has no {other} SpMV for {format}"
                )))
            }
        };
        let extra = match &kernel {
            Kernel::Merge { threads, .. } => {
                (*threads as usize + 1) * 8 + *threads as usize * 2 * (4 + size_of::<T::Acc>())
            }
            Kernel::Coo { .. } => a.nnz() * 4,
            Kernel::Csr { long: Some(l), .. } => {
                (2 * l.segments as usize + 2 * l.rows as usize + 1) * 4
                    + l.segments as usize * size_of::<T::Acc>()
            }
            Kernel::Csr { long: None, .. } => 0,
        };
        let info = PlanInfo {
            backend: BackendKind::Cuda,
            op: OpKind::Spmv,
            format,
            precision,
            algorithm,
            bytes: dev.bytes() + extra,
            deterministic: !matches!(kernel, Kernel::Coo { .. }),
        };
        let scale = device.function(sources::SPMV, &format!("scale_vector_{sfx}"))?;
        Ok(CudaSpmvPlan {
            device: device.clone(),
            a: dev,
            kernel,
            scale,
            info,
        })
    }

    /// Partitions the merge path once, on the device, and sizes the partial-sum workspace.
    fn merge(device: &Arc<Device>, a: &DeviceCsr<T>, sfx: &str) -> Result<Kernel> {
        let items = u64::from(a.rows) + u64::from(a.nnz);
        let threads = to_u32(
            "merge-path threads",
            items.div_ceil(u64::from(MERGE_ITEMS)).max(1) as usize,
        )?;
        let stream = &device.stream;
        let alloc = |n: usize| {
            stream
                .alloc_zeros::<u32>(n)
                .map_err(|e| driver_error("allocating the merge-path partition", e))
        };
        let (mut start_row, mut start_entry) =
            (alloc(threads as usize + 1)?, alloc(threads as usize + 1)?);
        let partition = device.function(sources::SPMV, "spmv_merge_partition")?;
        let mut args = stream.launch_builder(&partition);
        args.arg(&a.rows)
            .arg(&a.nnz)
            .arg(&a.row_ptr)
            .arg(&MERGE_ITEMS)
            .arg(&threads)
            .arg(&mut start_row)
            .arg(&mut start_entry);
        // SAFETY: the arguments match the kernel's signature; the outputs hold threads + 1 entries.
        unsafe { args.launch(grid(u64::from(threads) + 1)?) }
            .map_err(|e| driver_error("spmv_merge_partition", e))?;
        let slots = 2 * threads as usize;
        let partial_sum = stream
            .alloc_zeros::<u8>(slots * size_of::<T::Acc>())
            .map_err(|e| driver_error("allocating merge-path partials", e))?;
        Ok(Kernel::Merge {
            function: device.function(sources::SPMV, &format!("spmv_csr_merge_{sfx}"))?,
            fixup: device.function(sources::SPMV, &format!("spmv_merge_fixup_{sfx}"))?,
            threads,
            start_row,
            start_entry,
            partial_row: alloc(slots)?,
            partial_sum,
        })
    }
}

/// Number of rows longer than [`LONG_ROW`] and the entries they hold.
fn long_rows_and_entries<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> (usize, usize) {
    (0..a.rows())
        .map(|i| a.row_len(i))
        .filter(|&n| n > LONG_ROW as usize)
        .fold((0, 0), |(rows, entries), n| (rows + 1, entries + n))
}

impl LongRows {
    /// The segments of every row longer than [`LONG_ROW`], or `None` when there is none.
    fn new<T, I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        sfx: &str,
        acc_bytes: usize,
    ) -> Result<Option<Self>> {
        let (mut segment_row, mut segment_start, mut long_row, mut first_segment) =
            (Vec::new(), Vec::new(), Vec::new(), vec![0u32]);
        for i in 0..a.rows() {
            let range = a.row_range(i);
            if range.len() > LONG_ROW as usize {
                long_row.push(to_u32("row index", i)?);
                for start in range.step_by(LONG_ROW as usize) {
                    segment_row.push(to_u32("row index", i)?);
                    segment_start.push(to_u32("entry index", start)?);
                }
                first_segment.push(to_u32("segment count", segment_row.len())?);
            }
        }
        if long_row.is_empty() {
            return Ok(None);
        }
        let upload = |v: &[u32]| {
            device
                .stream
                .clone_htod(v)
                .map_err(|e| driver_error("copying the long-row segments", e))
        };
        let partial = device
            .stream
            .alloc_zeros::<u8>(segment_row.len() * acc_bytes)
            .map_err(|e| driver_error("allocating long-row partials", e))?;
        Ok(Some(LongRows {
            segments: to_u32("segment count", segment_row.len())?,
            rows: to_u32("long row count", long_row.len())?,
            segment_row: upload(&segment_row)?,
            segment_start: upload(&segment_start)?,
            long_row: upload(&long_row)?,
            first_segment: upload(&first_segment)?,
            partial,
            segment_kernel: device.function(sources::SPMV, &format!("spmv_long_segments_{sfx}"))?,
            row_kernel: device.function(sources::SPMV, &format!("spmv_long_rows_{sfx}"))?,
        }))
    }
}

/// Stride between consecutive elements of a vector operand.
fn increment(rows: usize, ld: usize, layout: Layout) -> u32 {
    let (row_stride, _) = strides(layout, ld);
    if rows <= 1 {
        1
    } else {
        row_stride
    }
}

impl<T: Scalar> SpmvPlan<T> for CudaSpmvPlan<T> {
    fn info(&self) -> &PlanInfo {
        &self.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        mut y: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let (rows, cols) = (self.a.rows as usize, self.a.cols as usize);
        x.expect_shape("spmv x", (cols, 1))?;
        y.expect_shape("spmv y", (rows, 1))?;
        let incx = increment(cols, x.ld(), x.layout());
        let incy = increment(rows, y.ld(), y.layout());
        let xb = input(&x, &self.device, "spmv x")?;
        let yb = output(&mut y, &self.device, "spmv y")?;
        let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
        let (acc_alpha, acc_beta) = (AccArg::of::<T>(alpha), AccArg::of::<T>(beta));
        let stream = self.device.stream.clone();
        let a = &self.a;
        if alpha == 0.0 || matches!(self.kernel, Kernel::Coo { .. }) {
            let mut args = stream.launch_builder(&self.scale);
            args.arg(&a.rows).arg(&mut yb.bytes).arg(&incy);
            acc_beta.push(&mut args);
            // SAFETY: y holds rows elements at stride incy (checked by the DenseMut).
            unsafe { args.launch(grid(u64::from(a.rows))?) }
                .map_err(|e| driver_error("scale_vector", e))?;
            if alpha == 0.0 {
                return Ok(());
            }
        }
        match &mut self.kernel {
            Kernel::Csr {
                function,
                lanes,
                long,
            } => {
                let limit = if long.is_some() { LONG_ROW } else { u32::MAX };
                let mut args = stream.launch_builder(function);
                args.arg(&a.rows)
                    .arg(&a.row_ptr)
                    .arg(&a.col_idx)
                    .arg(&a.values.bytes);
                args.arg(&xb.bytes).arg(&incx).arg(&mut yb.bytes).arg(&incy);
                acc_alpha.push(&mut args);
                acc_beta.push(&mut args);
                if *lanes > 1 {
                    args.arg(&limit);
                }
                // SAFETY: arguments match the kernel; the CSR is canonical with columns < cols,
                // x spans cols elements at stride incx and y rows at stride incy.
                unsafe { args.launch(grid(u64::from(a.rows) * u64::from(*lanes))?) }
                    .map_err(|e| driver_error("spmv", e))?;
                if let Some(l) = long {
                    let mut args = stream.launch_builder(&l.segment_kernel);
                    args.arg(&l.segments)
                        .arg(&LONG_ROW)
                        .arg(&l.segment_row)
                        .arg(&l.segment_start);
                    args.arg(&a.row_ptr).arg(&a.col_idx).arg(&a.values.bytes);
                    args.arg(&xb.bytes).arg(&incx).arg(&mut l.partial);
                    // SAFETY: segments lie inside their rows; partial holds one value per segment.
                    unsafe { args.launch(grid(u64::from(l.segments) * 32)?) }
                        .map_err(|e| driver_error("spmv_long_segments", e))?;
                    let mut args = stream.launch_builder(&l.row_kernel);
                    args.arg(&l.rows)
                        .arg(&l.long_row)
                        .arg(&l.first_segment)
                        .arg(&l.partial);
                    args.arg(&mut yb.bytes).arg(&incy);
                    acc_alpha.push(&mut args);
                    acc_beta.push(&mut args);
                    // SAFETY: first_segment holds rows + 1 offsets into the partials written above.
                    unsafe { args.launch(grid(u64::from(l.rows) * 32)?) }
                        .map_err(|e| driver_error("spmv_long_rows", e))?;
                }
            }
            Kernel::Merge {
                function,
                fixup,
                threads,
                start_row,
                start_entry,
                partial_row,
                partial_sum,
            } => {
                let mut args = stream.launch_builder(function);
                args.arg(&a.rows)
                    .arg(&a.row_ptr)
                    .arg(&a.col_idx)
                    .arg(&a.values.bytes)
                    .arg(&xb.bytes)
                    .arg(&incx)
                    .arg(&mut yb.bytes)
                    .arg(&incy);
                acc_alpha.push(&mut args);
                acc_beta.push(&mut args);
                args.arg(&*threads)
                    .arg(&*start_row)
                    .arg(&*start_entry)
                    .arg(&mut *partial_row)
                    .arg(&mut *partial_sum);
                // SAFETY: as above; the partition holds threads + 1 points and the partials 2 * threads slots.
                unsafe { args.launch(grid(u64::from(*threads))?) }
                    .map_err(|e| driver_error("spmv_csr_merge", e))?;
                let slots = 2 * *threads;
                let mut args = stream.launch_builder(fixup);
                args.arg(&slots)
                    .arg(&*partial_row)
                    .arg(&*partial_sum)
                    .arg(&mut yb.bytes)
                    .arg(&incy);
                acc_alpha.push(&mut args);
                acc_beta.push(&mut args);
                // SAFETY: the partials were written by the kernel above, in stream order.
                unsafe { args.launch(grid(u64::from(slots))?) }
                    .map_err(|e| driver_error("spmv_merge_fixup", e))?;
            }
            Kernel::Coo { function, row_idx } => {
                let mut args = stream.launch_builder(function);
                let typed_alpha = AccArg::of::<T>(alpha);
                args.arg(&a.nnz)
                    .arg(&*row_idx)
                    .arg(&a.col_idx)
                    .arg(&a.values.bytes)
                    .arg(&xb.bytes)
                    .arg(&incx)
                    .arg(&mut yb.bytes)
                    .arg(&incy);
                typed_alpha.push(&mut args);
                // SAFETY: row and column indices are in range; y was scaled by beta above.
                unsafe { args.launch(grid(u64::from(a.nnz))?) }
                    .map_err(|e| driver_error("spmv_coo", e))?;
            }
        }
        Ok(())
    }
}
