//! ME-BCRS, the memory-efficient blocked format of FlashSparse (PPoPP'25), and the column-vector
//! layout it shares with SR-BCRS ([`ColumnVectors`]).
//!
//! Rows are cut into windows of `h` rows (8; 16 is the 16x1 granularity of TC-GNN and DTC-SpMM).
//! A window's nonzero vectors — the `h x 1` column slices holding at least one entry — are listed
//! in increasing column order and grouped in tensor-core blocks of `k` vectors (8 for the f16
//! m16n8k8 MMA, 4 for tf32 m16n8k4). A block's values are stored row-major (`h x k_b`) so that it
//! is the MMA's B operand after the swap-and-transpose (`C^T = B^T A^T`). The last block of a
//! window is stored short, `k_b = vectors % k`, and never padded: the kernel derives `k_b` from
//! the window's vector count.
//!
//! ```text
//! one window, h = 8, k = 4, six vectors at columns c0 < c1 < ... < c5:
//!
//!   vec_col: c0 c1 c2 c3 | c4 c5          block 0 (k_b = 4)  |  block 1 (k_b = 2, short)
//!   values:  r0: c0 c1 c2 c3                   r0: c4 c5
//!            r1: c0 c1 c2 c3                   r1: c4 c5
//!            ...                               ...
//!            r7: c0 c1 c2 c3                   r7: c4 c5
//!            (32 values, row-major)            (16 values, row-major, stride 2)
//! ```
//!
//! Slot (row `r` of the window, vector `j` of a block starting at vector `s`) is therefore
//! `s*h + r*k_b + j`: every block starts at `first vector * h`, because the blocks before it in
//! its window are full. Rows of a vector without an entry hold zero, and `vec_mask` marks the
//! rows that do (bit `r` for row `r` of the window), so explicit zeros of the source survive the
//! round trip and kernels never mistake the zero fill for an entry. The mask takes `h / 8` bytes
//! per vector, little-endian: one byte for 8-row windows, a `u16` for 16-row windows.
//!
//! Unlike the published GPU builder, the conversion keeps the real values (not 1.0), needs no
//! padding of the row count (the last window may be partial: its missing rows never hold
//! entries) and runs in parallel over windows.

use std::fmt;
use std::ops::Range;

use rayon::prelude::*;
use sparse_core::{
    check_dimensions, BlockShape, CsrRef, Error, Format, Result, Scalar, SpIndex, StructureError,
    ValueOrder,
};

use crate::csr::Csr;
use crate::format::{FillLimit, SparseFormat};
use crate::rejected::Rejected;

/// The most rows a column vector may span (a mask is a `u16`).
pub const MAX_VECTOR_HEIGHT: usize = 16;

/// One stored column vector as a kernel reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorSlots {
    /// Its column; meaningless for a padding vector (empty mask).
    pub col: usize,
    /// Bit `r` set when row `r` of the group holds an entry in this column.
    pub mask: u16,
    /// The slot of row 0.
    pub first: usize,
    /// Slots between consecutive rows.
    pub row_step: usize,
}

impl VectorSlots {
    /// The slot of row `r` of the group.
    #[inline(always)]
    pub fn slot(&self, r: usize) -> usize {
        self.first + r * self.row_step
    }

    /// The rows of the group holding an entry in this vector, increasing.
    #[inline(always)]
    pub fn entry_rows(&self) -> impl Iterator<Item = usize> {
        let mut rest = self.mask;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let r = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                r
            })
        })
    }
}

/// What ME-BCRS and SR-BCRS share: rows cut into groups of [`ColumnVectors::height`] rows
/// (windows, vector-rows), each group listing its column vectors in increasing column order.
/// The formats differ only in where a vector's values sit and in padding vectors, which
/// [`ColumnVectors::for_each_vector`] reports. Conversions back to CSR, the value order and the
/// CPU kernels are written once against this trait.
pub trait ColumnVectors<T: Scalar>: SparseFormat<T> + Sync {
    /// What a group is called in errors.
    const GROUP_NAME: &'static str;

    /// Rows per vector, at most [`MAX_VECTOR_HEIGHT`].
    fn height(&self) -> usize;

    /// Number of groups: rows / height, rounded up.
    fn groups(&self) -> usize {
        self.rows().div_ceil(self.height())
    }

    /// The rows of group `g`; the last group may be short.
    fn group_rows(&self, g: usize) -> Range<usize> {
        let h = self.height();
        g * h..((g + 1) * h).min(self.rows())
    }

    /// The slots of group `g`, padding included. Groups own consecutive ranges, in order.
    fn group_slots(&self, g: usize) -> Range<usize>;

    /// The stored values, indexed by slot.
    fn slot_values(&self) -> &[T];

    /// Visits every stored vector of group `g` in storage order: the real vectors by increasing
    /// column, then any padding vectors (empty mask). Together they cover the group's slots once.
    fn for_each_vector(&self, g: usize, visit: impl FnMut(VectorSlots));
}

/// Window height and vectors per tensor-core block of an ME-BCRS matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MeBcrsShape {
    window: usize,
    block: usize,
}

impl MeBcrsShape {
    /// `window` rows per window (8, or 16 for the TC-GNN/DTC granularity) and `block` vectors
    /// per block (4, 8 or 16); anything else is refused.
    pub fn new(window: usize, block: usize) -> Result<Self> {
        if !matches!(window, 8 | 16) {
            return Err(Error::invalid(format!(
                "ME-BCRS windows are 8 or 16 rows high, not {window}"
            )));
        }
        if !matches!(block, 4 | 8 | 16) {
            return Err(Error::invalid(format!(
                "ME-BCRS blocks hold 4, 8 or 16 vectors, not {block}"
            )));
        }
        Ok(MeBcrsShape { window, block })
    }

    /// 8-row windows, blocks of 8 vectors: the k of the f16 m16n8k8 MMA.
    pub const fn f16() -> Self {
        MeBcrsShape {
            window: 8,
            block: 8,
        }
    }

    /// 8-row windows, blocks of 4 vectors: the k of the tf32 m16n8k4 MMA.
    pub const fn tf32() -> Self {
        MeBcrsShape {
            window: 8,
            block: 4,
        }
    }

    pub fn window(self) -> usize {
        self.window
    }
    pub fn block(self) -> usize {
        self.block
    }
    /// Bytes of one vector's mask.
    fn mask_bytes(self) -> usize {
        self.window / 8
    }
}

impl From<MeBcrsShape> for BlockShape {
    fn from(s: MeBcrsShape) -> BlockShape {
        BlockShape::new(s.window, s.block)
    }
}

/// The arrays of an ME-BCRS matrix, as [`MeBcrs::try_new`] takes them and gives them back.
#[derive(Clone, Default, PartialEq)]
pub struct MeBcrsParts<T> {
    /// `windows + 1` offsets into `vec_col`, in vectors.
    pub window_ptr: Vec<u32>,
    /// The column of each vector.
    pub vec_col: Vec<u32>,
    /// `vectors * window` values, block by block, row-major inside a block.
    pub values: Vec<T>,
    /// `window / 8` little-endian bytes per vector: bit `r` for row `r` of the window.
    pub vec_mask: Vec<u8>,
}

/// A matrix in ME-BCRS; see the module documentation for the layout.
#[derive(Clone, PartialEq)]
pub struct MeBcrs<T> {
    rows: usize,
    cols: usize,
    shape: MeBcrsShape,
    nnz: usize,
    window_ptr: Vec<u32>,
    vec_col: Vec<u32>,
    values: Vec<T>,
    vec_mask: Vec<u8>,
}

impl<T: Scalar> MeBcrs<T> {
    /// Converts a canonical CSR matrix, in parallel over windows. The slots (`vectors * h`) are
    /// counted first and checked against `limit`.
    pub fn from_csr<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        shape: MeBcrsShape,
        limit: FillLimit,
    ) -> Result<Self> {
        check_dimensions::<u32>(a.rows(), a.cols())?;
        fits_u32("number of entries", a.nnz())?;
        let (h, k, mask_bytes) = (shape.window, shape.block, shape.mask_bytes());
        let windows = a.rows().div_ceil(h);
        let window_rows = |w: usize| w * h..((w + 1) * h).min(a.rows());
        let counts: Vec<usize> = (0..windows)
            .into_par_iter()
            .map(|w| {
                let mut n = 0;
                for_each_csr_vector(a, window_rows(w), |_, _, _| n += 1);
                n
            })
            .collect();
        let vectors: usize = counts.iter().sum();
        fits_u32("number of vectors", vectors)?;
        let slots = checked_slots(vectors, h)?;
        limit.check(Format::MeBcrs, slots, a.nnz())?;

        let mut window_ptr = Vec::with_capacity(windows + 1);
        window_ptr.push(0u32);
        let mut total = 0;
        for &n in &counts {
            total += n;
            // Fits: total <= vectors, checked above.
            window_ptr.push(total as u32);
        }
        let mut vec_col = vec![0u32; vectors];
        let mut values = vec![T::default(); slots];
        let mut vec_mask = vec![0u8; vectors * mask_bytes];
        let col_parts = split_lengths(&mut vec_col, counts.iter().copied());
        let value_parts = split_lengths(&mut values, counts.iter().map(|&n| n * h));
        let mask_parts = split_lengths(&mut vec_mask, counts.iter().map(|&n| n * mask_bytes));
        let source = a.values();
        col_parts
            .into_par_iter()
            .zip(value_parts)
            .zip(mask_parts)
            .enumerate()
            .for_each(|(w, ((cols, vals), masks))| {
                let n = cols.len();
                let mut j = 0;
                for_each_csr_vector(a, window_rows(w), |col, mask, entries| {
                    // Fits: col < cols, which fits u32 (checked above).
                    cols[j] = col as u32;
                    masks[j * mask_bytes..(j + 1) * mask_bytes]
                        .copy_from_slice(&mask.to_le_bytes()[..mask_bytes]);
                    let block_start = j - j % k;
                    let width = k.min(n - block_start);
                    let v = VectorSlots {
                        col,
                        mask,
                        first: block_start * h + (j - block_start),
                        row_step: width,
                    };
                    for r in v.entry_rows() {
                        vals[v.slot(r)] = source[entries[r]];
                    }
                    j += 1;
                });
            });
        Ok(MeBcrs {
            rows: a.rows(),
            cols: a.cols(),
            shape,
            nnz: a.nnz(),
            window_ptr,
            vec_col,
            values,
            vec_mask,
        })
    }

    /// Checks every invariant (see [`MeBcrs::validate`]); on failure the arrays come back with
    /// the error.
    // The inputs come back by value with the error (as sprs does); the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        shape: MeBcrsShape,
        parts: MeBcrsParts<T>,
    ) -> Result<Self, Rejected<MeBcrsParts<T>>> {
        // SAFETY: validated before it is handed out; on failure the arrays go back to the caller.
        let m = unsafe { Self::new_unchecked(rows, cols, shape, parts) };
        match m.validate() {
            Ok(()) => Ok(m),
            Err(error) => Err(Rejected {
                parts: m.into_parts(),
                error,
            }),
        }
    }

    /// # Safety
    /// The arrays must satisfy the invariants [`MeBcrs::validate`] checks: kernels index dense
    /// operands with the stored columns without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        shape: MeBcrsShape,
        parts: MeBcrsParts<T>,
    ) -> Self {
        MeBcrs {
            rows,
            cols,
            shape,
            nnz: count_entries(&parts.vec_mask),
            window_ptr: parts.window_ptr,
            vec_col: parts.vec_col,
            values: parts.values,
            vec_mask: parts.vec_mask,
        }
    }

    /// Checks that the dimensions and the entry count fit u32; array lengths; `window_ptr` from 0 to the vector count, never decreasing; columns
    /// in range and strictly increasing within a window; every vector with at least one entry
    /// and none in rows past the last; zero in every slot without an entry.
    pub fn validate(&self) -> Result<()> {
        check_dimensions::<u32>(self.rows, self.cols)?;
        fits_u32("number of entries", self.nnz)?;
        self.check_structure()
            .and_then(|()| check_slots(self))
            .map_err(|error| Error::InvalidStructure {
                format: Format::MeBcrs,
                error,
            })
    }

    fn check_structure(&self) -> Result<(), StructureError> {
        let h = self.shape.window;
        let vectors = self.vec_col.len();
        let windows = self.rows.div_ceil(h);
        check_length("window_ptr", windows + 1, self.window_ptr.len())?;
        check_length("values", vectors * h, self.values.len())?;
        check_length(
            "vec_mask",
            vectors * self.shape.mask_bytes(),
            self.vec_mask.len(),
        )?;
        if self.window_ptr[0] != 0 {
            return Err(StructureError::RowPtrBound {
                position: 0,
                expected: 0,
                found: self.window_ptr[0].to_string(),
            });
        }
        if self.window_ptr[windows] as usize != vectors {
            return Err(StructureError::RowPtrBound {
                position: windows,
                expected: vectors,
                found: self.window_ptr[windows].to_string(),
            });
        }
        if let Some(w) = (0..windows).find(|&w| self.window_ptr[w + 1] < self.window_ptr[w]) {
            return Err(other(format!("window_ptr decreases at window {w}")));
        }
        for w in 0..windows {
            let mut previous = None;
            for v in self.window_range(w) {
                let col = self.vec_col[v] as usize;
                check_column(col, previous, self.cols, "window", w, v)?;
                if self.mask(v) == 0 {
                    return Err(other(format!(
                        "window {w}: vector {v} (column {col}) has no entry"
                    )));
                }
                previous = Some(col);
            }
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn block_shape(&self) -> MeBcrsShape {
        self.shape
    }
    pub fn window_ptr(&self) -> &[u32] {
        &self.window_ptr
    }
    pub fn vec_col(&self) -> &[u32] {
        &self.vec_col
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    pub fn vec_mask(&self) -> &[u8] {
        &self.vec_mask
    }
    pub fn into_parts(self) -> MeBcrsParts<T> {
        MeBcrsParts {
            window_ptr: self.window_ptr,
            vec_col: self.vec_col,
            values: self.values,
            vec_mask: self.vec_mask,
        }
    }

    pub fn windows(&self) -> usize {
        self.window_ptr.len() - 1
    }
    /// Nonzero vectors over all windows.
    pub fn vectors(&self) -> usize {
        self.vec_col.len()
    }
    /// The vectors of window `w`.
    pub fn window_range(&self, w: usize) -> Range<usize> {
        self.window_ptr[w] as usize..self.window_ptr[w + 1] as usize
    }
    /// Blocks of window `w`, the last one possibly short.
    pub fn blocks_in_window(&self, w: usize) -> usize {
        self.window_range(w).len().div_ceil(self.shape.block)
    }
    /// The vectors of block `b` of window `w` (empty past the last block). Its values are slots
    /// `start*h .. end*h`.
    pub fn block_range(&self, w: usize, b: usize) -> Range<usize> {
        let window = self.window_range(w);
        let start = b
            .saturating_mul(self.shape.block)
            .saturating_add(window.start)
            .min(window.end);
        start..(start + self.shape.block).min(window.end)
    }
    /// The mask of vector `v`: bit `r` for row `r` of its window.
    pub fn mask(&self, v: usize) -> u16 {
        let bytes = self.shape.mask_bytes();
        let mut le = [0u8; 2];
        le[..bytes].copy_from_slice(&self.vec_mask[v * bytes..(v + 1) * bytes]);
        u16::from_le_bytes(le)
    }

    /// For each slot, the CSR entry it holds (in the order of [`MeBcrs::to_csr`]).
    pub fn value_order(&self) -> ValueOrder {
        value_order(self)
    }
}

impl<T: Scalar> ColumnVectors<T> for MeBcrs<T> {
    const GROUP_NAME: &'static str = "window";

    fn height(&self) -> usize {
        self.shape.window
    }
    fn groups(&self) -> usize {
        self.windows()
    }
    fn group_slots(&self, g: usize) -> Range<usize> {
        let r = self.window_range(g);
        r.start * self.shape.window..r.end * self.shape.window
    }
    fn slot_values(&self) -> &[T] {
        &self.values
    }
    #[inline(always)]
    fn for_each_vector(&self, g: usize, mut visit: impl FnMut(VectorSlots)) {
        let (h, k) = (self.shape.window, self.shape.block);
        let window = self.window_range(g);
        for block_start in window.clone().step_by(k) {
            let width = k.min(window.end - block_start);
            for v in block_start..block_start + width {
                visit(VectorSlots {
                    col: self.vec_col[v] as usize,
                    mask: self.mask(v),
                    first: block_start * h + (v - block_start),
                    row_step: width,
                });
            }
        }
    }
}

impl<T: Scalar> SparseFormat<T> for MeBcrs<T> {
    const FORMAT: Format = Format::MeBcrs;

    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
    fn nnz(&self) -> usize {
        self.nnz
    }
    fn stored_slots(&self) -> usize {
        self.values.len()
    }
    fn memory_bytes(&self) -> usize {
        (self.window_ptr.len() + self.vec_col.len()) * std::mem::size_of::<u32>()
            + self.values.len() * std::mem::size_of::<T>()
            + self.vec_mask.len()
    }
    fn validate(&self) -> Result<()> {
        MeBcrs::validate(self)
    }
    fn to_csr(&self) -> Csr<T, u32> {
        to_csr(self)
    }
}

impl<T: Scalar> fmt::Debug for MeBcrs<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MeBcrs {}x{}, nnz {}, windows of {} rows, blocks of {} vectors, {} vectors, {} bytes",
            self.rows,
            self.cols,
            self.nnz,
            self.shape.window,
            self.shape.block,
            self.vectors(),
            self.memory_bytes()
        )
    }
}

/// Walks the column vectors of `rows` (at most [`MAX_VECTOR_HEIGHT`] of them) of `a` in
/// increasing column order: for each column holding an entry in one of the rows,
/// `visit(col, mask, entries)` gets bit `r` of `mask` set and `entries[r]` = the CSR entry for
/// every row `rows.start + r` that has one.
pub(crate) fn for_each_csr_vector<T, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    rows: Range<usize>,
    mut visit: impl FnMut(usize, u16, &[usize; MAX_VECTOR_HEIGHT]),
) {
    let height = rows.len();
    let mut next = [0usize; MAX_VECTOR_HEIGHT];
    let mut end = [0usize; MAX_VECTOR_HEIGHT];
    for (r, i) in rows.enumerate() {
        let range = a.row_range(i);
        (next[r], end[r]) = (range.start, range.end);
    }
    let col_idx = a.col_idx();
    let mut entries = [0usize; MAX_VECTOR_HEIGHT];
    loop {
        let lowest = (0..height)
            .filter(|&r| next[r] < end[r])
            .map(|r| col_idx[next[r]].to_usize())
            .min();
        let Some(col) = lowest else { return };
        let mut mask = 0u16;
        for r in 0..height {
            if next[r] < end[r] && col_idx[next[r]].to_usize() == col {
                entries[r] = next[r];
                next[r] += 1;
                mask |= 1 << r;
            }
        }
        visit(col, mask, &entries);
    }
}

/// Cuts `data` into consecutive pieces of the given lengths, which sum to at most its length.
pub(crate) fn split_lengths<X>(
    mut data: &mut [X],
    lengths: impl IntoIterator<Item = usize>,
) -> Vec<&mut [X]> {
    lengths
        .into_iter()
        .map(|n| {
            let (head, tail) = std::mem::take(&mut data).split_at_mut(n);
            data = tail;
            head
        })
        .collect()
}

/// Real entries marked in a mask array.
pub(crate) fn count_entries(masks: &[u8]) -> usize {
    masks.iter().map(|m| m.count_ones() as usize).sum()
}

/// `vectors * height` slots, or an error when that overflows.
pub(crate) fn checked_slots(vectors: usize, height: usize) -> Result<usize> {
    vectors.checked_mul(height).ok_or_else(|| {
        Error::invalid(format!(
            "{vectors} vectors of {height} rows hold more slots than usize counts"
        ))
    })
}

pub(crate) fn fits_u32(what: &str, n: usize) -> Result<()> {
    u32::try_from(n)
        .map(|_| ())
        .map_err(|_| Error::overflow::<u32>(what, n))
}

pub(crate) fn other(message: String) -> StructureError {
    StructureError::Other(message)
}

pub(crate) fn check_length(
    array: &'static str,
    expected: usize,
    found: usize,
) -> Result<(), StructureError> {
    if expected == found {
        Ok(())
    } else {
        Err(StructureError::Length {
            array,
            expected,
            found,
        })
    }
}

/// A vector's column must lie in `0..cols` and above the previous vector's of its group.
pub(crate) fn check_column(
    col: usize,
    previous: Option<usize>,
    cols: usize,
    group_name: &str,
    group: usize,
    vector: usize,
) -> Result<(), StructureError> {
    if col >= cols {
        return Err(other(format!(
            "{group_name} {group}: vector {vector} has column {col}, outside 0..{cols}"
        )));
    }
    match previous {
        Some(p) if col <= p => Err(other(format!(
            "{group_name} {group}: vector {vector} has column {col}, not above the previous \
             vector's {p} (columns must increase within a {group_name})"
        ))),
        _ => Ok(()),
    }
}

/// The checks that need the value layout: no mask bit past the group's last row, and zero in
/// every slot of a row without an entry (a tensor-core kernel multiplies them all).
pub(crate) fn check_slots<T: Scalar, F: ColumnVectors<T>>(f: &F) -> Result<(), StructureError> {
    let values = f.slot_values();
    for g in 0..f.groups() {
        let rows = f.group_rows(g).len();
        let mut first_error = None;
        let mut index = 0;
        f.for_each_vector(g, |v| {
            if first_error.is_some() {
                return;
            }
            if u32::from(v.mask) >> rows != 0 {
                first_error = Some(format!(
                    "{group} {g}: its vector {index} has mask {:#b}, which marks rows past the \
                     last of the {group}'s {rows} rows",
                    v.mask,
                    group = F::GROUP_NAME,
                ));
            } else if let Some(r) = (0..f.height())
                .find(|&r| (v.mask >> r) & 1 == 0 && values[v.slot(r)] != T::default())
            {
                first_error = Some(format!(
                    "{} {g}: its vector {index} holds a nonzero value in row {r}, which has no \
                     entry",
                    F::GROUP_NAME
                ));
            }
            index += 1;
        });
        if let Some(message) = first_error {
            return Err(other(message));
        }
    }
    Ok(())
}

/// Row pointers (rows + 1) of the CSR form, counted from the masks in parallel over groups.
fn row_starts<T: Scalar, F: ColumnVectors<T>>(f: &F) -> Vec<usize> {
    let counts: Vec<[usize; MAX_VECTOR_HEIGHT]> = (0..f.groups())
        .into_par_iter()
        .map(|g| {
            let mut counts = [0; MAX_VECTOR_HEIGHT];
            f.for_each_vector(g, |v| v.entry_rows().for_each(|r| counts[r] += 1));
            counts
        })
        .collect();
    let mut starts = Vec::with_capacity(f.rows() + 1);
    starts.push(0);
    let mut total = 0;
    for (g, counts) in counts.iter().enumerate() {
        for &n in &counts[..f.group_rows(g).len()] {
            total += n;
            starts.push(total);
        }
    }
    starts
}

/// The CSR form of a column-vector format, filled in parallel over groups.
pub(crate) fn to_csr<T: Scalar, F: ColumnVectors<T>>(f: &F) -> Csr<T, u32> {
    let starts = row_starts(f);
    let nnz = starts[f.rows()];
    let group_entries = |g: usize| {
        let rows = f.group_rows(g);
        starts[rows.end] - starts[rows.start]
    };
    let mut col_idx = vec![0u32; nnz];
    let mut values = vec![T::default(); nnz];
    let col_parts = split_lengths(&mut col_idx, (0..f.groups()).map(group_entries));
    let value_parts = split_lengths(&mut values, (0..f.groups()).map(group_entries));
    let slots = f.slot_values();
    col_parts
        .into_par_iter()
        .zip(value_parts)
        .enumerate()
        .for_each(|(g, (cols, vals))| {
            let rows = f.group_rows(g);
            let mut next = [0usize; MAX_VECTOR_HEIGHT];
            for (r, i) in rows.clone().enumerate() {
                next[r] = starts[i] - starts[rows.start];
            }
            f.for_each_vector(g, |v| {
                for r in v.entry_rows() {
                    // Fits: a validated structure has cols <= u32::MAX.
                    cols[next[r]] = v.col as u32;
                    vals[next[r]] = slots[v.slot(r)];
                    next[r] += 1;
                }
            });
        });
    // Fits: a validated structure has at most u32::MAX entries.
    let row_ptr = starts.iter().map(|&s| s as u32).collect();
    // SAFETY: each row receives its entries in the order the vectors are listed, which is
    // strictly increasing in column (validated), with columns < cols; row_ptr counts them.
    unsafe { Csr::new_unchecked(f.rows(), f.cols(), row_ptr, col_idx, values) }
}

/// For each slot, the CSR entry it holds, in parallel over groups.
pub(crate) fn value_order<T: Scalar, F: ColumnVectors<T>>(f: &F) -> ValueOrder {
    let starts = row_starts(f);
    let mut slots = vec![ValueOrder::PADDING; f.stored_slots()];
    let parts = split_lengths(&mut slots, (0..f.groups()).map(|g| f.group_slots(g).len()));
    parts.into_par_iter().enumerate().for_each(|(g, part)| {
        let base = f.group_slots(g).start;
        let mut next = [0usize; MAX_VECTOR_HEIGHT];
        for (r, i) in f.group_rows(g).enumerate() {
            next[r] = starts[i];
        }
        f.for_each_vector(g, |v| {
            for r in v.entry_rows() {
                part[v.slot(r) - base] = next[r];
                next[r] += 1;
            }
        });
    });
    ValueOrder::new(slots, starts[f.rows()])
        .expect("a validated structure holds each entry in exactly one slot")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr(rows: usize, cols: usize, entries: &[(usize, usize, f64)]) -> Csr<f64> {
        Csr::from_triplets(rows, cols, entries).unwrap()
    }

    #[test]
    fn shapes_outside_the_mma_ones_are_refused() {
        assert_eq!(MeBcrsShape::new(8, 8).unwrap(), MeBcrsShape::f16());
        assert_eq!(MeBcrsShape::new(8, 4).unwrap(), MeBcrsShape::tf32());
        assert!(MeBcrsShape::new(16, 16).is_ok());
        for (h, k) in [(4, 8), (8, 2), (32, 8), (8, 32), (0, 0)] {
            assert!(
                matches!(MeBcrsShape::new(h, k), Err(Error::InvalidArgument { .. })),
                "{h}x{k}"
            );
        }
        assert_eq!(BlockShape::from(MeBcrsShape::f16()), BlockShape::new(8, 8));
    }

    #[test]
    fn csr_vectors_merge_rows_by_column() {
        let a = csr(3, 6, &[(0, 1, 1.0), (0, 4, 2.0), (2, 1, 3.0), (2, 5, 4.0)]);
        let mut seen = Vec::new();
        for_each_csr_vector(a.as_ref(), 0..3, |col, mask, entries| {
            let rows: Vec<usize> = (0..3).filter(|r| mask >> r & 1 == 1).collect();
            seen.push((
                col,
                mask,
                rows.iter().map(|&r| entries[r]).collect::<Vec<_>>(),
            ));
        });
        assert_eq!(
            seen,
            vec![
                (1, 0b101, vec![0, 2]),
                (4, 0b001, vec![1]),
                (5, 0b100, vec![3])
            ]
        );
    }

    #[test]
    fn a_short_last_block_is_stored_with_its_own_stride() {
        // One window, six vectors with k = 4: a full block and a block of two.
        let entries: Vec<_> = (0..6).map(|j| (j % 8, 2 * j, (j + 1) as f64)).collect();
        let m = MeBcrs::from_csr(
            csr(8, 12, &entries).as_ref(),
            MeBcrsShape::tf32(),
            FillLimit::UNLIMITED,
        )
        .unwrap();
        assert_eq!(m.blocks_in_window(0), 2);
        assert_eq!(m.block_range(0, 0), 0..4);
        assert_eq!(m.block_range(0, 1), 4..6);
        assert_eq!(m.block_range(0, 2), 6..6);
        // Vector 5 (row 5, value 6) is vector 1 of the short block: slot 4*8 + 5*2 + 1.
        assert_eq!(m.values()[4 * 8 + 5 * 2 + 1], 6.0);
        assert_eq!(m.values()[2 * 4 + 2], 3.0);
        assert_eq!(m.to_csr(), csr(8, 12, &entries));
    }

    #[test]
    fn debug_is_short() {
        let a = csr(20, 20, &[(3, 4, 1.0)]);
        let m = MeBcrs::from_csr(a.as_ref(), MeBcrsShape::f16(), FillLimit::default()).unwrap();
        let text = format!("{m:?}");
        assert!(text.starts_with("MeBcrs 20x20, nnz 1,"), "{text}");
        assert!(text.len() < 120);
    }
}
