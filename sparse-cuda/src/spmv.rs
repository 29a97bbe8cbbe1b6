//! SpMV plans on CUDA cores (`spmv.cu` has the kernels). `auto` on CSR is `spmv_auto`'s.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{
    Algorithm, BackendKind, CsrRef, Error, Format, OpKind, PlanInfo, Precision, Result, RowStats,
    Scalar, SpIndex,
};

use crate::device::Device;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, MutPtr, Ptr,
};
use crate::matrix::DeviceCsr;
use crate::operand::{to_u32, Run, SpmvDense, SpmvOperands};
use crate::plan::{CudaPlan, Kernels, Phase, PlanBase, PlanClock, SpmvKernels, Values};
use crate::spmv_auto;

/// Threads per block of every SpMV kernel but the merge-path product (`SPMV_BLOCK`, and the
/// ELL, HYB and BSR files').
pub(crate) const BLOCK: u32 = 256;
/// Threads per block of the merge-path product (`MERGE_BLOCK`).
const MERGE_BLOCK: u32 = 128;
/// Merge-path items (row ends plus entries) per thread (`MERGE_ITEMS`).
const MERGE_ITEMS: u32 = 8;
/// Merge-path items per block: a tile.
const MERGE_TILE: u32 = MERGE_BLOCK * MERGE_ITEMS;
/// Rows of a merge-path plan stay below this: the partial slots keep two flag bits beside the
/// row (`PARTIAL_ROW` in spmv.cu).
const MERGE_MAX_ROWS: usize = 1 << 30;
/// Lanes per row the vector kernel is instantiated for (per block row, the BSR kernel).
pub(crate) const VECTOR_LANES: [u32; 5] = [2, 4, 8, 16, 32];
/// Steps whose loads a lane of `vector` issues together where the stream sets the time
/// ([`vector_shape`]), as whole warps do on long rows.
const STREAM_GROUP: u32 = 4;
/// The shapes `spmv_csr_vector` is instantiated for: every lane count of [`vector_shape`]'s
/// plain loops, then those of its streaming rows.
const VECTOR_SHAPES: [VectorShape; 9] = [
    VectorShape::new(2, 1),
    VectorShape::new(4, 1),
    VectorShape::new(8, 1),
    VectorShape::new(16, 1),
    VectorShape::new(32, STREAM_GROUP),
    VectorShape::new(2, STREAM_GROUP),
    VectorShape::new(4, STREAM_GROUP),
    VectorShape::new(8, STREAM_GROUP),
    VectorShape::new(16, STREAM_GROUP),
];

/// Rows longer than this are skewed for `auto`, and HYB cuts its overflow rows into segments of
/// this length: a warp then loops at most 32 times over one row.
pub const LONG_ROW: u32 = 1024;
/// Iterations over its row a lane of `vector-split` takes at most: rows of more entries than
/// this many per lane are cut into segments of this many iterations of a whole warp.
const SPLIT_DEPTH: u32 = 8;
/// Entries of a `vector-split` segment.
const SPLIT_SEGMENT: u32 = 32 * SPLIT_DEPTH;

kernel_params! {
    /// `spmv_csr_scalar`, `spmv_csr_vector<W, G>`: rows longer than `long_row` are skipped.
    pub(crate) struct SpmvCsr<T> {
        rows: u32,
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        values: ptr(T),
        dense: sub(SpmvDense),
        long_row: u32,
    }
}

kernel_params! {
    /// `spmv_long_segments`: one warp per segment of a long row, its sum to `partial` (y
    /// unused).
    pub(crate) struct SpmvSegments<T> {
        segments: u32,
        segment_length: u32,
        segment_row: ptr(u32),
        segment_start: ptr(u32),
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        values: ptr(T),
        partial: out(acc),
        dense: sub(SpmvDense),
    }
}

kernel_params! {
    /// `spmv_csr_split<W>`: the first `segment_blocks` blocks take the segments of the rows
    /// longer than `csr.long_row`, a warp each; the others W lanes a row of the rest.
    pub(crate) struct SpmvSplit<T> {
        csr: sub(SpmvCsr),
        segment_blocks: u32,
        segments: u32,
        segment_start: ptr(u32),
        segment_end: ptr(u32),
        /// Per segment, its long row (an index into `matrix_row`).
        segment_row: ptr(u32),
        /// Per long row, its row of the matrix.
        matrix_row: ptr(u32),
        /// Per long row, its first segment (long rows + 1).
        first_segment: ptr(u32),
        partial: out(acc),
        /// Per long row, the segments done in this launch; zero between launches.
        arrived: out(u32),
    }
}

kernel_params! {
    /// `spmv_merge_partition`: where each merge-path tile starts (`threads` tiles of `items`).
    pub(crate) struct MergePartition {
        rows: u32,
        nnz: u32,
        row_ptr: ptr(u32),
        items: u32,
        threads: u32,
        start_row: out(u32),
        start_entry: out(u32),
    }
}

kernel_params! {
    /// `spmv_csr_merge`: the CSR product over the merge-path tiles, one block each; two partial
    /// slots per tile.
    pub(crate) struct SpmvMerge<T> {
        csr: sub(SpmvCsr),
        start_row: ptr(u32),
        start_entry: ptr(u32),
        partial_row: out(u32),
        partial_sum: out(acc),
    }
}

kernel_params! {
    /// `spmv_merge_fixup`: the rows split between merge-path tiles (x unused).
    pub(crate) struct SpmvMergeFixup<T> {
        slots: u32,
        partial_row: ptr(u32),
        partial_sum: ptr(acc),
        dense: sub(SpmvDense),
    }
}

kernel_params! {
    /// `coo_rows`: the row of every entry.
    pub(crate) struct CooRows {
        rows: u32,
        row_ptr: ptr(u32),
        row_idx: out(u32),
    }
}

kernel_params! {
    /// `spmv_coo`: atomic adds into a y already scaled by beta (beta unused).
    pub(crate) struct SpmvCoo<T> {
        nnz: u32,
        row_idx: ptr(u32),
        col_idx: ptr(u32),
        values: ptr(T),
        dense: sub(SpmvDense),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "spmv",
    code: include_str!("../kernels/spmv.cu"),
    params: &[
        <SpmvDense<f32> as KernelParams>::C_DECL,
        <SpmvCsr<f32> as KernelParams>::C_DECL,
        <SpmvSegments<f32> as KernelParams>::C_DECL,
        <SpmvSplit<f32> as KernelParams>::C_DECL,
        <MergePartition as KernelParams>::C_DECL,
        <SpmvMerge<f32> as KernelParams>::C_DECL,
        <SpmvMergeFixup<f32> as KernelParams>::C_DECL,
        <CooRows as KernelParams>::C_DECL,
        <SpmvCoo<f32> as KernelParams>::C_DECL,
    ],
    defines: &[
        ("SPMV_BLOCK", BLOCK),
        ("MERGE_BLOCK", MERGE_BLOCK),
        ("MERGE_ITEMS", MERGE_ITEMS),
    ],
};

/// The entries of this file for storage type `T`: the names Rust can form, each built once here.
struct Entries<T: Scalar> {
    scalar: Entry<SpmvCsr<T>>,
    /// One per [`VECTOR_SHAPES`].
    vector: Vec<Entry<SpmvCsr<T>>>,
    /// One per [`VECTOR_LANES`].
    split: Vec<Entry<SpmvSplit<T>>>,
    segments: Entry<SpmvSegments<T>>,
    partition: Entry<MergePartition>,
    merge: Entry<SpmvMerge<T>>,
    fixup: Entry<SpmvMergeFixup<T>>,
    coo_rows: Entry<CooRows>,
    coo: Entry<SpmvCoo<T>>,
}

impl<T: Scalar> Entries<T> {
    fn new() -> Result<Self> {
        let t = c_type(T::DTYPE)?;
        Ok(Entries {
            scalar: Entry::new(&SOURCE, "spmv_csr_scalar", &[&t])?,
            vector: VECTOR_SHAPES
                .iter()
                .map(|v| Entry::new(&SOURCE, "spmv_csr_vector", &[&t, &v.lanes, &v.group]))
                .collect::<Result<_>>()?,
            split: VECTOR_LANES
                .iter()
                .map(|lanes| Entry::new(&SOURCE, "spmv_csr_split", &[&t, lanes]))
                .collect::<Result<_>>()?,
            segments: segments_entry()?,
            partition: Entry::over_params(&SOURCE, "spmv_merge_partition")?,
            merge: Entry::new(&SOURCE, "spmv_csr_merge", &[&t])?,
            fixup: Entry::new(&SOURCE, "spmv_merge_fixup", &[&t])?,
            coo_rows: Entry::over_params(&SOURCE, "coo_rows")?,
            coo: Entry::new(&SOURCE, "spmv_coo", &[&t])?,
        })
    }

    fn vector(&self, shape: VectorShape) -> Result<&Entry<SpmvCsr<T>>> {
        let i = VECTOR_SHAPES
            .iter()
            .position(|&v| v == shape)
            .ok_or_else(|| Error::internal(format!("no vector SpMV of shape {shape:?}")))?;
        Ok(&self.vector[i])
    }

    fn split(&self, lanes: u32) -> Result<&Entry<SpmvSplit<T>>> {
        Ok(&self.split[lanes_index(lanes)?])
    }

    /// Every entry of storage type `T` (the COO kernel only where atomics add `T`), with the
    /// ones that take no `T` when `untyped`.
    fn specs(&self, untyped: bool) -> Vec<KernelSpec> {
        let mut specs = vec![
            self.scalar.spec(),
            self.segments.spec(),
            self.merge.spec(),
            self.fixup.spec(),
        ];
        specs.extend(self.vector.iter().map(Entry::spec));
        specs.extend(self.split.iter().map(Entry::spec));
        if coo_atomics(T::DTYPE) {
            specs.push(self.coo.spec());
        }
        if untyped {
            specs.extend([self.partition.spec(), self.coo_rows.spec()]);
        }
        specs.into_iter().cloned().collect()
    }
}

/// Where `lanes` is in [`VECTOR_LANES`].
fn lanes_index(lanes: u32) -> Result<usize> {
    VECTOR_LANES
        .iter()
        .position(|&l| l == lanes)
        .ok_or_else(|| Error::internal(format!("no vector SpMV of {lanes} lanes")))
}

/// `spmv_long_segments` of storage type `T`, which HYB also runs on its overflow entries.
pub(crate) fn segments_entry<T: Scalar>() -> Result<Entry<SpmvSegments<T>>> {
    Entry::new(&SOURCE, "spmv_long_segments", &[&c_type(T::DTYPE)?])
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = Entries::<f64>::new()?.specs(true);
    specs.extend(Entries::<f32>::new()?.specs(false));
    specs.extend(Entries::<half::f16>::new()?.specs(false));
    Ok(specs)
}

/// COO SpMV adds into y with atomics, which exist for f32 and f64.
pub(crate) fn coo_atomics(dtype: sparse_core::DType) -> bool {
    matches!(dtype, sparse_core::DType::F32 | sparse_core::DType::F64)
}

/// The algorithm `auto` picks on `format` other than CSR (whose choice is `spmv_auto`'s).
pub fn auto_algorithm(format: Format) -> Algorithm {
    match format {
        Format::Coo => Algorithm::Atomic,
        Format::Ell | Format::Hyb => Algorithm::Scalar,
        Format::Bsr => Algorithm::Vector,
        Format::Tiled16 => Algorithm::TileSpmv,
        _ => Algorithm::MergePath,
    }
}

/// Lanes per row of the vector kernel: the power of two nearest `mean` entries, from 2 to 32.
pub(crate) fn vector_width(mean: f64) -> u32 {
    let w = mean.max(1.0).log2().round().clamp(1.0, 5.0) as u32;
    1 << w
}

/// How `vector` walks rows: `lanes` a row, each lane issuing the loads of `group` steps together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct VectorShape {
    pub lanes: u32,
    pub group: u32,
}

impl VectorShape {
    const fn new(lanes: u32, group: u32) -> Self {
        VectorShape { lanes, group }
    }
}

/// `vector`'s shape for rows of `mean` entries. Where chains of dependent loads set the time, a
/// lane a row entry ([`vector_width`]), so that a row takes one step or few; whole warps issue
/// four steps' loads at once. Where the stream does (`streams`: `spmv_auto::rows_stream`), a lane
/// for about four entries, each lane's four steps issued together: a warp then has a whole
/// batch of rows in flight, not one row's 32 entries. On block-poisson3d 65³ x 4 (28 entries a
/// row), 8 lanes streamed the matrix 2.5x (f64) and 2.8x (f32) as fast as 32 lanes, 1.30x and
/// 1.15x cuSPARSE's CSR SpMV (`docs/results/h200-2026-11-29f.md`).
pub(crate) fn vector_shape(mean: f64, streams: bool) -> VectorShape {
    if streams {
        return VectorShape::new(vector_width(mean / STREAM_GROUP as f64), STREAM_GROUP);
    }
    let lanes = vector_width(mean);
    VectorShape::new(lanes, if lanes == 32 { STREAM_GROUP } else { 1 })
}

/// One thread per `items` items, in blocks of [`BLOCK`].
pub(crate) fn grid(items: u64) -> Result<LaunchConfig> {
    let blocks = to_u32(
        "number of thread blocks",
        items.div_ceil(u64::from(BLOCK)).max(1) as usize,
    )?;
    Ok(LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// The rows `vector-split` gives whole warps (those of more than [`SPLIT_DEPTH`] entries a
/// lane), cut into segments of [`SPLIT_SEGMENT`] entries, with a partial sum per segment and a
/// counter per row.
struct SplitRows {
    segments: u32,
    /// Thread blocks of the segments: a warp each.
    blocks: u32,
    start: CudaSlice<u32>,
    end: CudaSlice<u32>,
    segment_row: CudaSlice<u32>,
    matrix_row: CudaSlice<u32>,
    first_segment: CudaSlice<u32>,
    partial: CudaSlice<u8>,
    arrived: CudaSlice<u32>,
}

/// [`SplitRows`] on the host: the long rows' [`Segments`] (their `row` an index into
/// `matrix_row`), where each segment ends, and each long row's row of the matrix.
#[derive(Debug, PartialEq)]
struct SplitSegments {
    segments: Segments,
    end: Vec<u32>,
    matrix_row: Vec<u32>,
}

impl SplitSegments {
    /// The segments of the rows of more than `long_row` entries.
    fn of(rows: usize, row_range: impl Fn(usize) -> Range<usize>, long_row: u32) -> Result<Self> {
        let matrix_row: Vec<u32> = (0..rows)
            .filter(|&i| row_range(i).len() > long_row as usize)
            .map(|i| to_u32("row index", i))
            .collect::<Result<_>>()?;
        let long_range = |k: u32| row_range(matrix_row[k as usize] as usize);
        // Fits: k counts long rows, fewer than the rows, whose indices fit u32 (checked above).
        let long = (0..matrix_row.len() as u32).map(|k| (k, long_range(k)));
        let segments = Segments::of(long, SPLIT_SEGMENT)?;
        let end = segments
            .start
            .iter()
            .zip(&segments.row)
            .map(|(&start, &k)| {
                let end = long_range(k)
                    .end
                    .min(start as usize + SPLIT_SEGMENT as usize);
                to_u32("entry index", end)
            })
            .collect::<Result<_>>()?;
        Ok(SplitSegments {
            segments,
            end,
            matrix_row,
        })
    }
}

impl SplitRows {
    /// The segments of the rows longer than `long_row` entries, for accumulation type `A`.
    fn new<A>(
        device: &Arc<Device>,
        rows: usize,
        row_range: impl Fn(usize) -> Range<usize>,
        long_row: u32,
    ) -> Result<Self> {
        let SplitSegments {
            segments,
            end,
            matrix_row,
        } = SplitSegments::of(rows, row_range, long_row)?;
        let count = to_u32("segment count", segments.start.len())?;
        let upload = |v: &[u32]| device.upload_converted(v, 0, |&i| i);
        Ok(SplitRows {
            segments: count,
            blocks: to_u32(
                "number of thread blocks",
                (u64::from(count) * 32).div_ceil(u64::from(BLOCK)) as usize,
            )?,
            start: upload(&segments.start)?,
            end: upload(&end)?,
            segment_row: upload(&segments.row)?,
            matrix_row: upload(&matrix_row)?,
            first_segment: upload(&segments.first)?,
            partial: device.alloc_zeros::<u8>(
                segments.start.len() * size_of::<A>(),
                "allocating segment partials",
            )?,
            arrived: device.alloc_zeros::<u32>(matrix_row.len(), "allocating segment counters")?,
        })
    }

    fn bytes(&self) -> usize {
        self.start.len() * 12
            + self.matrix_row.len() * 8
            + self.first_segment.len() * 4
            + self.partial.len()
    }
}

/// Rows cut into segments of at most `length` entries, one warp each (`spmv_long_segments`,
/// `spmv_csr_split`): the row and first entry of each segment, and where each row's segments
/// start.
#[derive(Debug, PartialEq)]
pub(crate) struct Segments {
    length: u32,
    row: Vec<u32>,
    start: Vec<u32>,
    first: Vec<u32>,
}

impl Segments {
    /// The segments of `length` entries of `rows`, each a row index (into the row pointers the
    /// segment kernel reads) with its entries.
    pub fn of(rows: impl Iterator<Item = (u32, Range<usize>)>, length: u32) -> Result<Self> {
        let mut s = Segments {
            length,
            row: Vec::new(),
            start: Vec::new(),
            first: vec![0],
        };
        for (i, range) in rows {
            for start in range.step_by(length as usize) {
                s.row.push(i);
                s.start.push(to_u32("entry index", start)?);
            }
            s.first.push(to_u32("segment count", s.row.len())?);
        }
        Ok(s)
    }

    /// On the device, with one partial sum of `T`'s accumulation type per segment.
    pub fn upload<T: Scalar>(&self, device: &Arc<Device>) -> Result<DeviceSegments<T>> {
        let upload = |v: &[u32]| device.upload_converted(v, 0, |&i| i);
        Ok(DeviceSegments {
            count: to_u32("segment count", self.row.len())?,
            length: self.length,
            row: upload(&self.row)?,
            start: upload(&self.start)?,
            first: upload(&self.first)?,
            partial: device.alloc_zeros::<u8>(
                self.row.len() * size_of::<T::Acc>(),
                "allocating segment partials",
            )?,
            _acc: std::marker::PhantomData,
        })
    }
}

/// [`Segments`] on the device, with their partial sums.
pub(crate) struct DeviceSegments<T> {
    pub count: u32,
    length: u32,
    row: CudaSlice<u32>,
    start: CudaSlice<u32>,
    pub first: CudaSlice<u32>,
    pub partial: CudaSlice<u8>,
    _acc: std::marker::PhantomData<fn() -> T>,
}

impl<T: Scalar> DeviceSegments<T> {
    /// Sums each segment of the rows of `row_ptr`, `col_idx` and `values` into its partial.
    pub fn launch(
        &self,
        kernel: &Kernel<SpmvSegments<T>>,
        device: &Device,
        (row_ptr, col_idx, values): (Ptr<u32>, Ptr<u32>, Ptr<T>),
        dense: SpmvDense<T>,
    ) -> Result<()> {
        let params = SpmvSegments {
            segments: self.count,
            segment_length: self.length,
            segment_row: Ptr::of(&self.row, device),
            segment_start: Ptr::of(&self.start, device),
            row_ptr,
            col_idx,
            values,
            partial: MutPtr::of_bytes(&self.partial, device),
            dense,
        };
        // SAFETY: segments lie inside their rows of `row_ptr` (made from them); partial holds
        // one value per segment; one warp per segment.
        unsafe { kernel.launch(grid(u64::from(self.count) * 32)?, &params) }
    }

    pub fn bytes(&self) -> usize {
        (2 * self.row.len() + self.first.len()) * 4 + self.count as usize * size_of::<T::Acc>()
    }
}

/// The merge-path partition into tiles and the partial sums of the rows split between tiles.
struct MergePath<T: Scalar> {
    kernel: Kernel<SpmvMerge<T>>,
    fixup: Kernel<SpmvMergeFixup<T>>,
    tiles: u32,
    start_row: CudaSlice<u32>,
    start_entry: CudaSlice<u32>,
    partial_row: CudaSlice<u32>,
    /// Two accumulation values per tile.
    partial_sum: CudaSlice<u8>,
}

impl<T: Scalar> MergePath<T> {
    /// Partitions the merge path once, on the device, and sizes the partial sums.
    fn new(device: &Arc<Device>, entries: &Entries<T>, a: &DeviceCsr<T>) -> Result<Self> {
        if a.rows as usize >= MERGE_MAX_ROWS {
            return Err(Error::IndexOverflow {
                what: "merge-path SpMV's row count".into(),
                value: u128::from(a.rows),
                index_type: "a merge-path partial slot",
                max: MERGE_MAX_ROWS as u64 - 1,
            });
        }
        let items = u64::from(a.rows) + u64::from(a.nnz);
        let tiles = to_u32(
            "merge-path tiles",
            items.div_ceil(u64::from(MERGE_TILE)).max(1) as usize,
        )?;
        let slots = 2 * tiles as usize;
        let merge = MergePath {
            kernel: device.kernel(&entries.merge)?,
            fixup: device.kernel(&entries.fixup)?,
            tiles,
            start_row: device.alloc_zeros(tiles as usize + 1, "allocating the merge path")?,
            start_entry: device.alloc_zeros(tiles as usize + 1, "allocating the merge path")?,
            partial_row: device.alloc_zeros(slots, "allocating merge-path partials")?,
            partial_sum: device.alloc_zeros(
                slots * size_of::<T::Acc>(),
                "allocating merge-path partials",
            )?,
        };
        let params = MergePartition {
            rows: a.rows,
            nnz: a.nnz,
            row_ptr: Ptr::of(&a.row_ptr, device),
            items: MERGE_TILE,
            threads: tiles,
            start_row: MutPtr::of(&merge.start_row, device),
            start_entry: MutPtr::of(&merge.start_entry, device),
        };
        // SAFETY: row_ptr holds rows + 1 offsets; the outputs hold tiles + 1 entries, one per
        // thread of the launch past which threads write nothing.
        unsafe {
            device
                .kernel(&entries.partition)?
                .launch(grid(u64::from(tiles) + 1)?, &params)?
        };
        Ok(merge)
    }

    fn bytes(&self) -> usize {
        (self.tiles as usize + 1) * 8 + self.tiles as usize * 2 * (4 + size_of::<T::Acc>())
    }
}

/// CSR rows on the scalar, vector or split kernel (`lanes` per row): what `scalar`, `vector`
/// and `vector-split` run, and what other families run a CSR part of theirs with.
pub(crate) struct CsrRows<T: Scalar> {
    lanes: u32,
    kernel: RowsKernel<T>,
}

enum RowsKernel<T: Scalar> {
    /// `scalar` or `vector`: every row on `lanes` lanes.
    Rows(Kernel<SpmvCsr<T>>),
    /// `vector-split`: the long rows' segments on whole warps, in the same launch.
    Split(Kernel<SpmvSplit<T>>, Box<SplitRows>),
}

impl<T: Scalar> CsrRows<T> {
    /// `scalar`: one thread a row.
    pub(crate) fn scalar(device: &Arc<Device>) -> Result<Self> {
        Self::rows(device, &Entries::<T>::new()?.scalar, 1)
    }

    fn rows(device: &Arc<Device>, entry: &Entry<SpmvCsr<T>>, lanes: u32) -> Result<Self> {
        Ok(CsrRows {
            lanes,
            kernel: RowsKernel::Rows(device.kernel(entry)?),
        })
    }

    /// `vector-split` over the CSR of `rows` rows whose entries `row_range` gives.
    pub(crate) fn vector_split(
        device: &Arc<Device>,
        rows: usize,
        row_range: impl Fn(usize) -> Range<usize>,
    ) -> Result<Self> {
        let lanes = split_width(rows, &row_range);
        let long = Box::new(SplitRows::new::<T::Acc>(
            device,
            rows,
            row_range,
            split_limit(lanes),
        )?);
        Ok(CsrRows {
            lanes,
            kernel: RowsKernel::Split(device.kernel(Entries::<T>::new()?.split(lanes)?)?, long),
        })
    }

    /// Bytes held on the device.
    pub(crate) fn bytes(&self) -> usize {
        match &self.kernel {
            RowsKernel::Rows(_) => 0,
            RowsKernel::Split(_, long) => long.bytes(),
        }
    }

    /// `y = alpha*A*x + beta*y` by `dense`, A the CSR of `rows` rows that `csr` points to.
    ///
    /// # Safety
    /// The CSR must be canonical with columns below x's length and `rows` rows of y, and be the
    /// one these kernels were planned for (its long rows and their segments).
    pub(crate) unsafe fn launch(
        &self,
        device: &Device,
        rows: u32,
        csr: (Ptr<u32>, Ptr<u32>, Ptr<T>),
        dense: SpmvDense<T>,
    ) -> Result<()> {
        let (row_ptr, col_idx, values) = csr;
        let params = |long_row| SpmvCsr {
            rows,
            row_ptr,
            col_idx,
            values,
            dense,
            long_row,
        };
        let row_threads = u64::from(rows) * u64::from(self.lanes);
        match &self.kernel {
            // SAFETY: the CSR is canonical with columns < cols; x spans cols elements at stride
            // incx and y rows at stride incy (the caller's contract); `lanes` lanes per row.
            RowsKernel::Rows(kernel) => unsafe {
                kernel.launch(grid(row_threads)?, &params(u32::MAX))
            },
            RowsKernel::Split(kernel, long) => {
                let mut config = grid(row_threads)?;
                config.grid_dim.0 =
                    config.grid_dim.0.checked_add(long.blocks).ok_or_else(|| {
                        Error::overflow::<u32>("vector-split thread blocks", long.blocks as usize)
                    })?;
                let params = SpmvSplit {
                    csr: params(split_limit(self.lanes)),
                    segment_blocks: long.blocks,
                    segments: long.segments,
                    segment_start: Ptr::of(&long.start, device),
                    segment_end: Ptr::of(&long.end, device),
                    segment_row: Ptr::of(&long.segment_row, device),
                    matrix_row: Ptr::of(&long.matrix_row, device),
                    first_segment: Ptr::of(&long.first_segment, device),
                    partial: MutPtr::of_bytes(&long.partial, device),
                    arrived: MutPtr::of(&long.arrived, device),
                };
                // SAFETY: as above; the segments cover exactly the rows of this CSR longer than
                // `long_row` (which the row blocks skip), each inside its row; partial holds one
                // value a segment, arrived one zeroed counter a long row, which the launch
                // leaves zeroed.
                unsafe { kernel.launch(config, &params) }
            }
        }
    }
}

enum Kind<T: Scalar> {
    Csr(CsrRows<T>),
    Merge(Box<MergePath<T>>),
    Coo {
        kernel: Kernel<SpmvCoo<T>>,
        row_idx: CudaSlice<u32>,
    },
}

/// The SpMV kernels of one plan and the matrix they read.
pub(crate) struct SpmvFamily<T: Scalar> {
    a: DeviceCsr<T>,
    kind: Kind<T>,
}

/// A planned SpMV of CSR (`scalar`, `vector`, `vector-split`, `merge-path`) or COO (`atomic`).
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    stats: &RowStats,
    (format, precision, algorithm): (Format, Precision, Algorithm),
    clock: PlanClock,
) -> Result<CudaPlan<T, SpmvFamily<T>>> {
    let shape = vector_shape(
        stats.mean,
        algorithm == Algorithm::Vector
            && spmv_auto::rows_stream(stats, a.nnz(), || a.column_span()),
    );
    let lanes = match algorithm {
        Algorithm::Vector => shape.lanes,
        Algorithm::VectorSplit => split_width(a.rows(), |i| a.row_range(i)),
        _ => 1,
    };
    let entries = Entries::<T>::new()?;
    let mut specs = Vec::new();
    let csr_entry = match (format, algorithm) {
        (Format::Csr, Algorithm::Scalar) => Some(&entries.scalar),
        (Format::Csr, Algorithm::Vector) => Some(entries.vector(shape)?),
        _ => None,
    };
    let others: Vec<&KernelSpec> = match (format, algorithm) {
        (Format::Csr, Algorithm::VectorSplit) => vec![entries.split(lanes)?.spec()],
        (Format::Csr, Algorithm::MergePath) => vec![
            entries.partition.spec(),
            entries.merge.spec(),
            entries.fixup.spec(),
        ],
        (Format::Coo, Algorithm::Atomic) => vec![entries.coo_rows.spec(), entries.coo.spec()],
        (Format::Csr, Algorithm::Scalar | Algorithm::Vector) => Vec::new(),
        (format, other) => {
            return Err(Error::internal(format!(
                "the table lists no {other} SpMV on {format}"
            )))
        }
    };
    specs.extend(csr_entry.iter().map(|e| e.spec()));
    specs.extend(others);
    let info = PlanInfo::new(
        BackendKind::Cuda,
        OpKind::Spmv,
        format,
        precision,
        algorithm,
        algorithm != Algorithm::Atomic,
    );
    let (base, mut clock) = PlanBase::new(device, a, info, &specs, clock)?;
    clock.lap(device, Phase::Host)?;
    let dev = DeviceCsr::upload(device, a)?;
    clock.lap(device, Phase::Transfer)?;
    let kind = match csr_entry {
        Some(entry) => Kind::Csr(CsrRows::rows(device, entry, lanes)?),
        None if algorithm == Algorithm::VectorSplit => {
            Kind::Csr(CsrRows::vector_split(device, a.rows(), |i| a.row_range(i))?)
        }
        None if algorithm == Algorithm::MergePath => {
            Kind::Merge(Box::new(MergePath::new(device, &entries, &dev)?))
        }
        None => {
            let row_idx = device.alloc_zeros::<u32>(a.nnz(), "allocating COO row indices")?;
            let params = CooRows {
                rows: dev.rows,
                row_ptr: Ptr::of(&dev.row_ptr, device),
                row_idx: MutPtr::of(&row_idx, device),
            };
            // SAFETY: one warp per row writes the row's entries' slots, all below nnz, which
            // row_idx holds.
            unsafe {
                device
                    .kernel(&entries.coo_rows)?
                    .launch(grid(u64::from(dev.rows) * 32)?, &params)?
            };
            Kind::Coo {
                kernel: device.kernel(&entries.coo)?,
                row_idx,
            }
        }
    };
    clock.lap(device, Phase::Device)?;
    let extra = match &kind {
        Kind::Merge(m) => m.bytes(),
        Kind::Coo { .. } => a.nnz() * 4,
        Kind::Csr(c) => c.bytes(),
    };
    let bytes = dev.bytes() + extra;
    Ok(base.into_plan(clock, bytes, SpmvFamily { a: dev, kind }))
}

/// The longest row `vector-split` leaves on `lanes` lanes: [`SPLIT_DEPTH`] iterations.
fn split_limit(lanes: u32) -> u32 {
    SPLIT_DEPTH * lanes
}

/// Lanes per row of `vector-split`: for the mean length of the rows of up to one segment.
fn split_width(rows: usize, row_range: impl Fn(usize) -> Range<usize>) -> u32 {
    let (short_rows, short_entries) = (0..rows)
        .map(|i| row_range(i).len())
        .filter(|&n| n <= SPLIT_SEGMENT as usize)
        .fold((0, 0), |(rows, entries), n| (rows + 1, entries + n));
    vector_width(short_entries as f64 / short_rows.max(1) as f64)
}

impl<T: Scalar> SpmvKernels<T> for SpmvFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmvOperands, T::Acc>) -> Result<()> {
        let (device, a, dense) = (&base.device, &self.a, SpmvDense::new(run));
        let (row_ptr, col_idx, values) = a.pointers(device);
        let csr = |long_row: u32| SpmvCsr {
            rows: a.rows,
            row_ptr,
            col_idx,
            values,
            dense,
            long_row,
        };
        match &self.kind {
            // SAFETY: the plan's own CSR, which its kernels were planned for; x and y are
            // the bound operands of the plan's shape.
            Kind::Csr(c) => unsafe { c.launch(device, a.rows, (row_ptr, col_idx, values), dense) },
            Kind::Merge(m) => {
                let params = SpmvMerge {
                    csr: csr(u32::MAX),
                    start_row: Ptr::of(&m.start_row, device),
                    start_entry: Ptr::of(&m.start_entry, device),
                    partial_row: MutPtr::of(&m.partial_row, device),
                    partial_sum: MutPtr::of_bytes(&m.partial_sum, device),
                };
                let tiles = LaunchConfig {
                    grid_dim: (m.tiles, 1, 1),
                    block_dim: (MERGE_BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: as above; the partition holds tiles + 1 points, one block per tile,
                // each covering at most MERGE_TILE items (the kernel's shared arrays), and the
                // partials 2 * tiles slots.
                unsafe { m.kernel.launch(tiles, &params)? };
                // One tile splits no row: the launch the fixup would cost is saved on small
                // matrices, where it is most of the time.
                if m.tiles == 1 {
                    return Ok(());
                }
                let slots = 2 * m.tiles;
                let params = SpmvMergeFixup {
                    slots,
                    partial_row: Ptr::of(&m.partial_row, device),
                    partial_sum: Ptr::of_bytes(&m.partial_sum, device),
                    dense,
                };
                // SAFETY: the partials were written by the kernel above, in stream order; one
                // warp per slot.
                unsafe { m.fixup.launch(grid(u64::from(slots) * 32)?, &params) }
            }
            Kind::Coo { kernel, row_idx } => {
                base.scale(&run.ops.y, run.beta)?;
                let params = SpmvCoo {
                    nnz: a.nnz,
                    row_idx: Ptr::of(row_idx, device),
                    col_idx,
                    values,
                    dense,
                };
                // SAFETY: row and column indices are in range; y was scaled by beta above.
                unsafe { kernel.launch(grid(u64::from(a.nnz))?, &params) }
            }
        }
    }
}

impl<T: Scalar> Kernels<T> for SpmvFamily<T> {
    fn values(&self) -> Values<'_, T> {
        Values::csr_order(&self.a.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_cuts_only_rows_past_the_limit_into_whole_segments() {
        let lengths = [3usize, 0, 17, 16, 600, 256, 257];
        let ptr: Vec<usize> = std::iter::once(0)
            .chain(lengths.iter().scan(0, |end, n| {
                *end += n;
                Some(*end)
            }))
            .collect();
        let s = SplitSegments::of(lengths.len(), |i| ptr[i]..ptr[i + 1], 16).unwrap();
        let seg = SPLIT_SEGMENT;
        let (r2, r4, r5, r6) = (ptr[2] as u32, ptr[4] as u32, ptr[5] as u32, ptr[6] as u32);
        assert_eq!(s.matrix_row, [2, 4, 5, 6]);
        assert_eq!(s.segments.first, [0, 1, 4, 5, 7]);
        assert_eq!(s.segments.row, [0, 1, 1, 1, 2, 3, 3]);
        assert_eq!(
            s.segments.start,
            [r2, r4, r4 + seg, r4 + 2 * seg, r5, r6, r6 + seg]
        );
        assert_eq!(
            s.end,
            [
                r2 + 17,
                r4 + seg,
                r4 + 2 * seg,
                r4 + 600,
                r5 + 256,
                r6 + seg,
                r6 + 257
            ]
        );
    }

    #[test]
    fn streaming_rows_take_a_lane_for_four_entries() {
        let shape = |mean, streams| {
            let v = vector_shape(mean, streams);
            (v.lanes, v.group)
        };
        assert_eq!(shape(27.6, false), (32, STREAM_GROUP));
        assert_eq!(shape(27.6, true), (8, STREAM_GROUP));
        assert_eq!(shape(6.7, false), (8, 1));
        assert_eq!(shape(6.7, true), (2, STREAM_GROUP));
        assert_eq!(shape(1.0, true), (2, STREAM_GROUP));
        assert_eq!(shape(500.0, true), (32, STREAM_GROUP));
        for mean in [0.5, 3.0, 12.0, 40.0, 100.0, 1e6] {
            for streams in [false, true] {
                assert!(VECTOR_SHAPES.contains(&vector_shape(mean, streams)));
            }
        }
    }

    #[test]
    fn split_width_ignores_rows_longer_than_a_segment() {
        let lengths = [2usize, 2, 2, 2, 5000];
        assert_eq!(split_width(lengths.len(), |i| 0..lengths[i]), 2);
    }
}
