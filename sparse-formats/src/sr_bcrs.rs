//! SR-BCRS, the strided row-major blocked format of Magicube (SC'22).
//!
//! Rows are cut into vector-rows of `V` rows (2, 4 or 8). A vector-row's nonzero vectors — the
//! `V x 1` column slices holding at least one entry — are listed in increasing column order and
//! their count is padded up to a multiple of the stride, the k of the integer MMA (16 for int8
//! m8n8k16, 32 for int4 m8n8k32 and int8 m16n8k32, 64 for int4 m16n8k64; 8 is also accepted,
//! the k of the 16-bit m16n8k8 MMA). Each
//! group of `stride` consecutive vectors is stored as one `V x stride` row-major tile: row `r`
//! of the group is a contiguous run of `stride` values, exactly one row of the MMA's A fragment,
//! so a warp loads it without rearranging.
//!
//! ```text
//! V = 2 and, to keep the drawing small, stride 4 (real strides are 8 to 64):
//!
//!   column    0 1 2 3 4 5 6 7
//!   row 0     a . b . . c . d        vector-row 0: vectors at columns 0 2 3 5 | 7
//!   row 1     e . . f . g . .
//!   row 2     . . . . h . . .        vector-row 1: one vector at column 4
//!   row 3     . . . . i . . .
//!
//!   row_ptr  = [0, 5,   8, 9]                     (start, end of the real vectors) per vector-row
//!   col_idx  = [0 2 3 5 | 7 * * * | 4 * * *]      * = u32::MAX, a padding vector
//!   vec_mask = [3 1 2 3 | 1 0 0 0 | 3 0 0 0]      bit r: row r of the vector-row has an entry
//!   values   = [a b 0 c  e 0 f g | d 0 0 0  0 0 0 0 | h 0 0 0  i 0 0 0]
//!               row 0    row 1     one V x stride tile per group of `stride` vectors
//! ```
//!
//! Slot (row `r`, vector `p` of the group starting at vector `g0`) is `g0*V + r*stride + (p-g0)`.
//! Padding vectors and rows without an entry hold zero, and the per-vector mask (one byte,
//! `V <= 8`) marks the rows that hold entries, so explicit zeros of the source survive the
//! round trip and kernels never read the fill as an entry. Two pointers per vector-row, as in
//! the published code: where its vectors start (a multiple of the stride) and where its real
//! vectors end; its padding runs to the next vector-row's start (or the end of `col_idx`).
//!
//! The published int4 path also shuffles column indices inside each group of 8 (even slots
//! first, then odd) so that its register transpose of B comes out in column order. We store the
//! columns unshuffled: the shuffle is a fixed permutation of positions (slot `8i + j` read from
//! `8i + 2*(j%4) + j/4`), so a GPU kernel applies it in its index arithmetic for free, while
//! the stored order stays sorted, which is what validation, the CPU kernels and the int8 path
//! want. The values are never shuffled in the published code either.

use std::fmt;
use std::ops::Range;

use sparse_core::{
    BlockShape, CsrRef, Error, Format, Result, Scalar, SpIndex, StructureError, ValueOrder,
};

use crate::checks::{check_length, check_source, checked_slots, fits_u32, validate_format};
use crate::column_vectors::{
    check_slots, check_vectors, count_entries, to_csr, value_order, ColumnVectors, VectorSlots,
    VectorTiles,
};
use crate::csr::Csr;
use crate::format::{FillLimit, SparseFormat};
use crate::rejected::{validated, Rejected};
use crate::slots::{check_new_values, gather};

/// The column of a padding vector.
pub const SR_BCRS_PADDING: u32 = u32::MAX;

/// Vector length and stride of an SR-BCRS matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SrBcrsShape {
    vector: usize,
    stride: usize,
}

impl SrBcrsShape {
    /// Vectors of `vector` rows (2, 4 or 8: at most the MMA's m = 8) and vector counts padded
    /// to a multiple of `stride` (8, 16, 32 or 64); anything else is refused.
    pub fn new(vector: usize, stride: usize) -> Result<Self> {
        if !matches!(vector, 2 | 4 | 8) {
            return Err(Error::invalid(format!(
                "SR-BCRS vectors are 2, 4 or 8 rows long, not {vector}"
            )));
        }
        if !matches!(stride, 8 | 16 | 32 | 64) {
            return Err(Error::invalid(format!(
                "the SR-BCRS stride is 8, 16, 32 or 64, not {stride}"
            )));
        }
        Ok(SrBcrsShape { vector, stride })
    }

    /// Stride 16, the k of the int8 m8n8k16 MMA.
    pub fn int8(vector: usize) -> Result<Self> {
        Self::new(vector, 16)
    }

    /// Stride 32, the k of the int4 m8n8k32 MMA.
    pub fn int4(vector: usize) -> Result<Self> {
        Self::new(vector, 32)
    }

    pub fn vector(self) -> usize {
        self.vector
    }
    pub fn stride(self) -> usize {
        self.stride
    }
    /// Vector-rows of vectors in tiles of `stride`: the MMA's A fragments.
    fn tiles(self) -> VectorTiles {
        VectorTiles {
            height: self.vector,
            tile: self.stride,
        }
    }
}

impl From<SrBcrsShape> for BlockShape {
    fn from(s: SrBcrsShape) -> BlockShape {
        BlockShape::new(s.vector, s.stride)
    }
}

/// The arrays of an SR-BCRS matrix, as [`SrBcrs::try_new`] takes them and gives them back.
#[derive(Clone, Default, PartialEq)]
pub struct SrBcrsParts<T> {
    /// `2 * vector_rows` pointers into `col_idx`: start, end of the real vectors.
    pub row_ptr: Vec<u32>,
    /// The column of each stored vector, [`SR_BCRS_PADDING`] for padding.
    pub col_idx: Vec<u32>,
    /// `stored vectors * V` values, one `V x stride` row-major tile per group.
    pub values: Vec<T>,
    /// One byte per stored vector: bit `r` for row `r` of the vector-row; 0 for padding.
    pub vec_mask: Vec<u8>,
}

/// A matrix in SR-BCRS; see the module documentation for the layout.
#[derive(Clone, PartialEq)]
pub struct SrBcrs<T> {
    rows: usize,
    cols: usize,
    shape: SrBcrsShape,
    nnz: usize,
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    values: Vec<T>,
    vec_mask: Vec<u8>,
}

impl<T: Scalar> SrBcrs<T> {
    /// Converts a canonical CSR matrix, in parallel over vector-rows. The padded slot count is
    /// computed first and checked against `limit`: a matrix whose vector-rows hold few vectors
    /// pads each of them to a whole stride.
    pub fn from_csr<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        shape: SrBcrsShape,
        limit: FillLimit,
    ) -> Result<Self> {
        check_source(a)?;
        let tiles = shape.tiles();
        let (v, stride) = (shape.vector, shape.stride);
        let counts = tiles.count_csr_vectors(a);
        let padded: Vec<usize> = counts
            .iter()
            .map(|&n| n.div_ceil(stride) * stride)
            .collect();
        let stored = padded.iter().try_fold(0usize, |total, &n| {
            total
                .checked_add(n)
                .ok_or_else(|| Error::overflow::<usize>("number of stored vectors", total))
        })?;
        let slots = checked_slots(stored, v)?;
        limit.check(Format::SrBcrs, slots, a.nnz())?;
        fits_u32("number of stored vectors", stored)?;

        let mut row_ptr = Vec::with_capacity(2 * counts.len());
        let mut start = 0;
        for (&n, &padded_n) in counts.iter().zip(&padded) {
            // Fits: start + n <= stored, checked above.
            row_ptr.extend([start as u32, (start + n) as u32]);
            start += padded_n;
        }
        let mut col_idx = vec![SR_BCRS_PADDING; stored];
        // One byte per vector: a vector-row spans at most 8 rows.
        let mut vec_mask = vec![0u8; stored];
        let mut values = vec![T::default(); slots];
        tiles.fill_from_csr(a, &padded, 1, &mut col_idx, &mut vec_mask, &mut values);
        Ok(SrBcrs {
            rows: a.rows(),
            cols: a.cols(),
            shape,
            nnz: a.nnz(),
            row_ptr,
            col_idx,
            values,
            vec_mask,
        })
    }

    /// Checks every invariant (see [`SrBcrs::validate`]); on failure the arrays come back with
    /// the error.
    // The inputs come back by value with the error (as sprs does); the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        shape: SrBcrsShape,
        parts: SrBcrsParts<T>,
    ) -> Result<Self, Rejected<SrBcrsParts<T>>> {
        // SAFETY: validated before it is handed out; on failure the arrays go back to the caller.
        let m = unsafe { Self::new_unchecked(rows, cols, shape, parts) };
        validated(m, Self::validate, Self::into_parts)
    }

    /// # Safety
    /// The arrays must satisfy the invariants [`SrBcrs::validate`] checks: kernels index dense
    /// operands with the stored columns without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        shape: SrBcrsShape,
        parts: SrBcrsParts<T>,
    ) -> Self {
        SrBcrs {
            rows,
            cols,
            shape,
            nnz: count_entries(&parts.vec_mask),
            row_ptr: parts.row_ptr,
            col_idx: parts.col_idx,
            values: parts.values,
            vec_mask: parts.vec_mask,
        }
    }

    /// Checks that the dimensions and the entry count fit u32; array lengths; each vector-row
    /// starting where the previous one's padding ends, its real vectors in range, with columns
    /// strictly increasing and at least one entry each, and its padding exactly up to the next
    /// multiple of the stride, marked by column [`SR_BCRS_PADDING`] and an empty mask; no mask
    /// bit past the last row; zero in every slot without an entry.
    pub fn validate(&self) -> Result<()> {
        validate_format(Format::SrBcrs, (self.rows, self.cols), self.nnz, || {
            self.check_structure().and_then(|()| check_slots(self))
        })
    }

    fn check_structure(&self) -> Result<(), StructureError> {
        let (v, stride) = (self.shape.vector, self.shape.stride);
        let stored = self.col_idx.len();
        let vrows = self.rows.div_ceil(v);
        check_length("row_ptr", 2 * vrows, self.row_ptr.len())?;
        check_length("vec_mask", stored, self.vec_mask.len())?;
        check_length("values", stored.saturating_mul(v), self.values.len())?;
        let mut expected_start = 0;
        for i in 0..vrows {
            let (start, real_end) = (
                self.row_ptr[2 * i] as usize,
                self.row_ptr[2 * i + 1] as usize,
            );
            if start != expected_start {
                return Err(StructureError::Other(format!(
                    "vector-row {i} starts at vector {start}, expected {expected_start}: each \
                     vector-row is padded exactly to a multiple of the stride {stride}"
                )));
            }
            if real_end < start {
                return Err(StructureError::Other(format!(
                    "vector-row {i} ends at vector {real_end}, before its start {start}"
                )));
            }
            let padded_end = start + (real_end - start).div_ceil(stride) * stride;
            if padded_end > stored {
                return Err(StructureError::Other(format!(
                    "vector-row {i} runs to vector {padded_end} with its padding, but col_idx \
                     holds {stored}"
                )));
            }
            let col = |p: usize| self.col_idx[p] as usize;
            let mask = |p: usize| u16::from(self.vec_mask[p]);
            check_vectors("vector-row", i, start..real_end, self.cols, col, mask)?;
            for p in real_end..padded_end {
                if self.col_idx[p] != SR_BCRS_PADDING || self.vec_mask[p] != 0 {
                    return Err(StructureError::Other(format!(
                        "vector-row {i}: padding vector {p} has column {} and mask {:#b}; \
                         padding has column u32::MAX and an empty mask",
                        self.col_idx[p], self.vec_mask[p]
                    )));
                }
            }
            expected_start = padded_end;
        }
        if expected_start != stored {
            return Err(StructureError::Other(format!(
                "col_idx holds {stored} vectors, but the vector-rows end at {expected_start}"
            )));
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn block_shape(&self) -> SrBcrsShape {
        self.shape
    }
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    pub fn vec_mask(&self) -> &[u8] {
        &self.vec_mask
    }
    pub fn into_parts(self) -> SrBcrsParts<T> {
        SrBcrsParts {
            row_ptr: self.row_ptr,
            col_idx: self.col_idx,
            values: self.values,
            vec_mask: self.vec_mask,
        }
    }

    pub fn vector_rows(&self) -> usize {
        self.row_ptr.len() / 2
    }
    /// Real (nonzero) vectors over all vector-rows.
    pub fn vectors(&self) -> usize {
        (0..self.vector_rows())
            .map(|i| self.vector_row_range(i).len())
            .sum()
    }
    /// Vectors stored, padding included.
    pub fn stored_vectors(&self) -> usize {
        self.col_idx.len()
    }
    /// The real vectors of vector-row `i`.
    pub fn vector_row_range(&self, i: usize) -> Range<usize> {
        self.row_ptr[2 * i] as usize..self.row_ptr[2 * i + 1] as usize
    }
    /// The vectors of vector-row `i`, padding included.
    pub fn padded_range(&self, i: usize) -> Range<usize> {
        let end = match self.row_ptr.get(2 * i + 2) {
            Some(&next) => next as usize,
            None => self.col_idx.len(),
        };
        self.row_ptr[2 * i] as usize..end
    }

    /// For each slot, the CSR entry it holds (in the order of [`SrBcrs::to_csr`]); padding
    /// slots hold none.
    pub fn value_order(&self) -> ValueOrder {
        value_order(self)
    }

    /// New values for the same pattern: `csr_values` in CSR entry order, placed through `order`,
    /// which must be this matrix's [`SrBcrs::value_order`]. Padding vectors and rows without an
    /// entry stay zero.
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        check_new_values(
            Format::SrBcrs,
            (self.values.len(), self.nnz),
            order,
            csr_values,
        )?;
        gather(order, 0, csr_values, &mut self.values);
        Ok(())
    }
}

impl<T: Scalar> ColumnVectors<T> for SrBcrs<T> {
    const GROUP_NAME: &'static str = "vector-row";

    fn height(&self) -> usize {
        self.shape.vector
    }
    fn groups(&self) -> usize {
        self.vector_rows()
    }
    fn group_slots(&self, g: usize) -> Range<usize> {
        let r = self.padded_range(g);
        r.start * self.shape.vector..r.end * self.shape.vector
    }
    fn slot_values(&self) -> &[T] {
        &self.values
    }
    #[inline(always)]
    fn for_each_vector(&self, g: usize, visit: impl FnMut(VectorSlots)) {
        let col = |p: usize| self.col_idx[p] as usize;
        let mask = |p: usize| u16::from(self.vec_mask[p]);
        // Padded to a multiple of the stride, so every tile is full.
        self.shape
            .tiles()
            .for_each_vector(self.padded_range(g), col, mask, visit);
    }
}

impl<T: Scalar> SparseFormat<T> for SrBcrs<T> {
    const FORMAT: Format = Format::SrBcrs;

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
        (self.row_ptr.len() + self.col_idx.len()) * std::mem::size_of::<u32>()
            + self.values.len() * std::mem::size_of::<T>()
            + self.vec_mask.len()
    }
    fn validate(&self) -> Result<()> {
        SrBcrs::validate(self)
    }
    fn to_csr(&self) -> Csr<T, u32> {
        to_csr(self)
    }
}

impl<T: Scalar> fmt::Debug for SrBcrs<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SrBcrs {}x{}, nnz {}, vectors of {} rows, stride {}, {} vectors ({} stored), {} bytes",
            self.rows,
            self.cols,
            self.nnz,
            self.shape.vector,
            self.shape.stride,
            self.vectors(),
            self.stored_vectors(),
            self.memory_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_outside_the_mma_ones_are_refused() {
        assert_eq!(
            SrBcrsShape::int8(8).unwrap(),
            SrBcrsShape::new(8, 16).unwrap()
        );
        assert_eq!(SrBcrsShape::int4(2).unwrap().stride(), 32);
        assert_eq!(SrBcrsShape::new(2, 64).unwrap().stride(), 64);
        for (v, s) in [(1, 16), (16, 16), (3, 16), (8, 4), (8, 128), (8, 0)] {
            assert!(
                matches!(SrBcrsShape::new(v, s), Err(Error::InvalidArgument { .. })),
                "{v}x{s}"
            );
        }
        assert_eq!(
            BlockShape::from(SrBcrsShape::int8(4).unwrap()),
            BlockShape::new(4, 16)
        );
    }

    #[test]
    fn padding_runs_to_the_next_multiple_of_the_stride() {
        let entries: Vec<_> = (0..10).map(|j| (j % 2, j, 1.0 + j as f64)).collect();
        let a = Csr::<f64>::from_triplets(5, 12, &entries).unwrap();
        let m = SrBcrs::from_csr(
            a.as_ref(),
            SrBcrsShape::new(2, 8).unwrap(),
            FillLimit::UNLIMITED,
        )
        .unwrap();
        // Vector-rows: rows 0-1 (10 vectors -> 16), rows 2-3 and row 4 (empty).
        assert_eq!(m.row_ptr(), &[0, 10, 16, 16, 16, 16]);
        assert_eq!(m.padded_range(0), 0..16);
        assert_eq!(m.padded_range(2), 16..16);
        assert_eq!((m.vectors(), m.stored_vectors()), (10, 16));
        assert_eq!(m.stored_slots(), 32);
        assert_eq!(m.to_csr(), a);
        let text = format!("{m:?}");
        assert!(text.starts_with("SrBcrs 5x12, nnz 10,"), "{text}");
    }
}
