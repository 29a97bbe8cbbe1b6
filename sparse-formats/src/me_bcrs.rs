//! ME-BCRS, the memory-efficient blocked format of FlashSparse (PPoPP'25), a column-vector layout
//! ([`ColumnVectors`]).
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

use sparse_core::{
    BlockShape, CsrRef, Error, Format, Result, Scalar, SpIndex, StructureError, ValueOrder,
};

use crate::assembly::offsets;
use crate::checks::{check_length, check_source, checked_slots, fits_u32, validate_format};
use crate::column_vectors::{
    check_slots, check_vectors, count_entries, to_csr, value_order, ColumnVectors, VectorSlots,
    VectorTiles,
};
use crate::csr::Csr;
use crate::format::{FillLimit, SparseFormat};
use crate::rejected::{validated, Rejected};
use crate::slots::{check_new_values, gather};

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
    /// Windows of vectors in tiles of `block`: the tensor-core blocks.
    fn tiles(self) -> VectorTiles {
        VectorTiles {
            height: self.window,
            tile: self.block,
        }
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
        check_source(a)?;
        let tiles = shape.tiles();
        let counts = tiles.count_csr_vectors(a);
        let vectors: usize = counts.iter().sum();
        fits_u32("number of vectors", vectors)?;
        let slots = checked_slots(vectors, shape.window)?;
        limit.check(Format::MeBcrs, slots, a.nnz())?;

        let window_ptr = offsets(counts.iter().copied());
        let mask_bytes = shape.mask_bytes();
        let mut vec_col = vec![0u32; vectors];
        let mut vec_mask = vec![0u8; vectors * mask_bytes];
        let mut values = vec![T::default(); slots];
        tiles.fill_from_csr(
            a,
            &counts,
            mask_bytes,
            &mut vec_col,
            &mut vec_mask,
            &mut values,
        );
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
        validated(m, Self::validate, Self::into_parts)
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

    /// Checks that the dimensions and the entry count fit u32; array lengths; `window_ptr` from
    /// 0 to the vector count, never decreasing; columns in range and strictly increasing within
    /// a window; every vector with at least one entry and none in rows past the last; zero in
    /// every slot without an entry.
    pub fn validate(&self) -> Result<()> {
        validate_format(Format::MeBcrs, (self.rows, self.cols), self.nnz, || {
            self.check_structure().and_then(|()| check_slots(self))
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
            return Err(StructureError::Other(format!(
                "window_ptr decreases at window {w}"
            )));
        }
        (0..windows).try_for_each(|w| {
            let col = |v: usize| self.vec_col[v] as usize;
            check_vectors("window", w, self.window_range(w), self.cols, col, |v| {
                self.mask(v)
            })
        })
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

    /// New values for the same pattern: `csr_values` in CSR entry order, placed through `order`,
    /// which must be this matrix's [`MeBcrs::value_order`]. Rows without an entry stay zero.
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        check_new_values(
            Format::MeBcrs,
            (self.values.len(), self.nnz),
            order,
            csr_values,
        )?;
        gather(order, 0, csr_values, &mut self.values);
        Ok(())
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
    fn for_each_vector(&self, g: usize, visit: impl FnMut(VectorSlots)) {
        let col = |v: usize| self.vec_col[v] as usize;
        let vectors = self.window_range(g);
        self.shape
            .tiles()
            .for_each_vector(vectors, col, |v| self.mask(v), visit);
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
