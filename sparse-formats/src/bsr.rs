//! BSR: the matrix cut into r x c blocks; the blocks holding at least one entry are stored
//! dense, row-major inside (slot (i, j) at i*c + j), block row by block row with increasing
//! block columns.
//!
//! ```text
//!   r = c = 2, a 3x5 matrix (ragged bottom and right edges):
//!
//!   a b | . . | c .        block_row_ptr = [0, 2, 3]
//!   . d | . . | e .        block_col     = [0, 2 | 1]
//!   ----+-----+----        values        = [a b 0 d | c 0 e 0 | f 0 0 0]
//!   . . | f . | . .        mask          = [0b1011 | 0b0101 | 0b0001]   (bit i*c + j)
//! ```
//!
//! Block rows = ceil(rows / r), block columns = ceil(cols / c); slots of a block outside the
//! matrix, and slots inside it without an entry, hold zero. The occupancy mask (one bit per
//! slot, `ceil(r*c / 64)` u64 words per block) tells entries from fill, so explicit zeros of
//! the source survive the round trip and kernels can skip the fill. Since r and c are powers of
//! two up to 16, a block row's bits never straddle two words.

use std::fmt;
use std::ops::Range;

use rayon::prelude::*;
use sparse_core::{
    BlockShape, CsrRef, Error, Format, Result, Scalar, SpIndex, StructureError, ValueOrder,
};

use crate::assembly::{csr_from_rows, offsets, split_lengths};
use crate::checks::{check_length, check_source, checked_slots, fits_u32, validate_format};
use crate::csr::Csr;
use crate::format::{FillLimit, SparseFormat};
use crate::rejected::{validated, Rejected};
use crate::slots::{check_new_values, gather, order_from_rows};

/// The block heights and widths BSR accepts.
pub const BSR_BLOCK_SIZES: [usize; 5] = [1, 2, 4, 8, 16];

/// The largest of [`BSR_BLOCK_SIZES`].
pub const BSR_MAX_BLOCK: usize = 16;

/// The arrays of a BSR matrix, as [`Bsr::try_new`] takes them and gives them back.
#[derive(Clone, Default, PartialEq)]
pub struct BsrParts<T> {
    /// `block_rows + 1` offsets into `block_col`.
    pub block_row_ptr: Vec<u32>,
    /// The block column of each stored block, increasing within a block row.
    pub block_col: Vec<u32>,
    /// `r * c` values per block, row-major inside the block.
    pub values: Vec<T>,
    /// `ceil(r*c / 64)` words per block: bit `i*c + j` set when slot (i, j) holds an entry.
    pub mask: Vec<u64>,
}

/// A matrix in BSR; see the module documentation for the layout.
#[derive(Clone, PartialEq)]
pub struct Bsr<T> {
    rows: usize,
    cols: usize,
    block: BlockShape,
    nnz: usize,
    block_row_ptr: Vec<u32>,
    block_col: Vec<u32>,
    values: Vec<T>,
    mask: Vec<u64>,
}

/// An error unless `r` and `c` are both among [`BSR_BLOCK_SIZES`].
fn check_block_shape(r: usize, c: usize) -> Result<BlockShape> {
    if BSR_BLOCK_SIZES.contains(&r) && BSR_BLOCK_SIZES.contains(&c) {
        Ok(BlockShape::new(r, c))
    } else {
        Err(Error::invalid(format!(
            "BSR blocks are r x c with r and c each one of {BSR_BLOCK_SIZES:?}, not {r}x{c}"
        )))
    }
}

fn mask_words(block: BlockShape) -> usize {
    (block.rows * block.cols).div_ceil(64)
}

/// The bits of one block row inside its mask word.
fn row_bits(width: usize) -> u64 {
    u64::MAX >> (64 - width)
}

/// Calls `visit(block column, entry ranges)` for each block column holding entries in `rows`
/// (at most 16 rows), in increasing order; `entry ranges[k]` are row `rows.start + k`'s entries
/// in that block column. One cursor per row, so a block row costs O(blocks * r + entries).
fn for_each_csr_block<T, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    rows: Range<usize>,
    c: usize,
    mut visit: impl FnMut(usize, &[Range<usize>]),
) {
    let height = rows.len();
    let mut ranges: [Range<usize>; BSR_MAX_BLOCK] = std::array::from_fn(|k| {
        if k < height {
            a.row_range(rows.start + k)
        } else {
            0..0
        }
    });
    let mut chunks: [Range<usize>; BSR_MAX_BLOCK] = std::array::from_fn(|_| 0..0);
    let (ranges, chunks) = (&mut ranges[..height], &mut chunks[..height]);
    let block_col = |e: usize| a.col_idx()[e].to_usize() / c;
    loop {
        let next = ranges
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| block_col(r.start))
            .min();
        let Some(bc) = next else { break };
        for (range, chunk) in ranges.iter_mut().zip(chunks.iter_mut()) {
            let start = range.start;
            while range.start < range.end && block_col(range.start) == bc {
                range.start += 1;
            }
            *chunk = start..range.start;
        }
        visit(bc, chunks);
    }
}

impl<T: Scalar> Bsr<T> {
    /// Converts a canonical CSR matrix to `r x c` blocks (each of r, c one of
    /// [`BSR_BLOCK_SIZES`]), in parallel over block rows. Blocks are counted first and
    /// `blocks * r * c` slots checked against `limit`: scattered entries each cost a whole block.
    pub fn from_csr<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        r: usize,
        c: usize,
        limit: FillLimit,
    ) -> Result<Self> {
        let block = check_block_shape(r, c)?;
        check_source(a)?;
        let (rows, cols) = a.shape();
        let block_rows = rows.div_ceil(r);
        let rows_of = |br: usize| br * r..rows.min((br + 1) * r);
        let counts: Vec<usize> = (0..block_rows)
            .into_par_iter()
            .map(|br| {
                let mut n = 0;
                for_each_csr_block(a, rows_of(br), c, |_, _| n += 1);
                n
            })
            .collect();
        // At most one block per entry, so the sum fits.
        let nblocks: usize = counts.iter().sum();
        fits_u32("number of blocks", nblocks)?;
        let slots = checked_slots(nblocks, r * c)?;
        limit.check(Format::Bsr, slots, a.nnz())?;

        let block_row_ptr = offsets(counts.iter().copied());
        let words = mask_words(block);
        let mut block_col = vec![0u32; nblocks];
        let mut values = vec![T::default(); slots];
        let mut mask = vec![0u64; nblocks * words];
        let col_parts = split_lengths(&mut block_col, counts.iter().copied());
        let value_parts = split_lengths(&mut values, counts.iter().map(|&n| n * r * c));
        let mask_parts = split_lengths(&mut mask, counts.iter().map(|&n| n * words));
        col_parts
            .into_par_iter()
            .zip(value_parts)
            .zip(mask_parts)
            .enumerate()
            .for_each(|(br, ((block_cols, vals), masks))| {
                let mut b = 0;
                for_each_csr_block(a, rows_of(br), c, |bc, chunks| {
                    // Fits: bc < block columns <= cols, which fits u32 (check_source).
                    block_cols[b] = bc as u32;
                    for (i, entries) in chunks.iter().enumerate() {
                        for e in entries.clone() {
                            let slot = i * c + a.col_idx()[e].to_usize() - bc * c;
                            vals[b * r * c + slot] = a.values()[e];
                            masks[b * words + slot / 64] |= 1 << (slot % 64);
                        }
                    }
                    b += 1;
                });
            });
        Ok(Bsr {
            rows,
            cols,
            block,
            nnz: a.nnz(),
            block_row_ptr,
            block_col,
            values,
            mask,
        })
    }

    /// Checks every invariant (see [`Bsr::validate`]); on failure the arrays come back with the
    /// error. Block sizes outside [`BSR_BLOCK_SIZES`] are refused the same way.
    // The inputs come back by value with the error (as sprs does); the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        r: usize,
        c: usize,
        parts: BsrParts<T>,
    ) -> Result<Self, Rejected<BsrParts<T>>> {
        if let Err(error) = check_block_shape(r, c) {
            return Err(Rejected { parts, error });
        }
        // SAFETY: validated before it is handed out; on failure the arrays go back to the caller.
        let m = unsafe { Self::new_unchecked(rows, cols, r, c, parts) };
        validated(m, Self::validate, Self::into_parts)
    }

    /// # Safety
    /// `r` and `c` must be among [`BSR_BLOCK_SIZES`] and the arrays must satisfy the invariants
    /// [`Bsr::validate`] checks: kernels index dense operands through the block columns and
    /// masks without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        r: usize,
        c: usize,
        parts: BsrParts<T>,
    ) -> Self {
        Bsr {
            rows,
            cols,
            block: BlockShape::new(r, c),
            nnz: parts.mask.iter().map(|w| w.count_ones() as usize).sum(),
            block_row_ptr: parts.block_row_ptr,
            block_col: parts.block_col,
            values: parts.values,
            mask: parts.mask,
        }
    }

    /// Checks the block shape; that the dimensions and the entry count fit u32; array lengths;
    /// block row pointers from 0 to the block count, never decreasing; block columns in range
    /// and strictly increasing within a block row; every block holding an entry, with no mask
    /// bit past `r*c` or on a slot outside the matrix; zero in every slot without an entry.
    pub fn validate(&self) -> Result<()> {
        check_block_shape(self.block.rows, self.block.cols)?;
        validate_format(Format::Bsr, (self.rows, self.cols), self.nnz, || {
            self.check_structure()
        })
    }

    fn check_structure(&self) -> Result<(), StructureError> {
        let (r, c) = (self.block.rows, self.block.cols);
        let (block_rows, block_cols) = (self.block_rows(), self.block_cols());
        let nblocks = self.block_col.len();
        let words = mask_words(self.block);
        check_length("block_row_ptr", block_rows + 1, self.block_row_ptr.len())?;
        check_length("values", nblocks.saturating_mul(r * c), self.values.len())?;
        check_length("mask", nblocks.saturating_mul(words), self.mask.len())?;
        for (position, expected) in [(0, 0), (block_rows, nblocks)] {
            let found = self.block_row_ptr[position] as usize;
            if found != expected {
                return Err(StructureError::RowPtrBound {
                    position,
                    expected,
                    found: found.to_string(),
                });
            }
        }
        if let Some(br) =
            (0..block_rows).find(|&br| self.block_row_ptr[br + 1] < self.block_row_ptr[br])
        {
            return Err(StructureError::RowPtrDecreasing { row: br });
        }
        let other = |message: String| StructureError::Other(message);
        for br in 0..block_rows {
            let mut previous = None;
            for b in self.block_row_range(br) {
                let bc = self.block_col[b] as usize;
                if bc >= block_cols {
                    return Err(other(format!(
                        "block {b} (block row {br}): block column {bc} is outside 0..{block_cols}"
                    )));
                }
                if let Some(p) = previous.filter(|&p| p >= bc) {
                    return Err(other(format!(
                        "block row {br}: block column {bc} follows block column {p} (block \
                         columns must increase within a block row)"
                    )));
                }
                previous = Some(bc);
                self.check_block(b, br, bc)?;
            }
        }
        Ok(())
    }

    /// The mask and the fill of block `b` at (`br`, `bc`).
    fn check_block(&self, b: usize, br: usize, bc: usize) -> Result<(), StructureError> {
        let (r, c) = (self.block.rows, self.block.cols);
        let block_mask = self.block_mask(b);
        if block_mask.iter().all(|&w| w == 0) {
            return Err(StructureError::Other(format!(
                "block {b} (block row {br}, block column {bc}) holds no entry"
            )));
        }
        for slot in 0..block_mask.len() * 64 {
            let set = (block_mask[slot / 64] >> (slot % 64)) & 1 == 1;
            let (row, col) = (br * r + slot / c, bc * c + slot % c);
            if set && (slot >= r * c || row >= self.rows || col >= self.cols) {
                return Err(StructureError::Other(format!(
                    "block {b} (block row {br}, block column {bc}): mask bit {slot} marks \
                     ({row}, {col}), outside the {r}x{c} block or the {}x{} matrix",
                    self.rows, self.cols
                )));
            }
            if !set && slot < r * c && self.values[b * r * c + slot] != T::default() {
                return Err(StructureError::Other(format!(
                    "block {b} (block row {br}, block column {bc}): slot {slot} holds {:?} but \
                     no entry (fill is zero)",
                    self.values[b * r * c + slot]
                )));
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
    /// r x c.
    pub fn block_shape(&self) -> BlockShape {
        self.block
    }
    /// ceil(rows / r).
    pub fn block_rows(&self) -> usize {
        self.rows.div_ceil(self.block.rows)
    }
    /// ceil(cols / c).
    pub fn block_cols(&self) -> usize {
        self.cols.div_ceil(self.block.cols)
    }
    /// Stored blocks.
    pub fn nblocks(&self) -> usize {
        self.block_col.len()
    }
    /// Stored slots per entry (1 when every block is full, and for an empty matrix).
    pub fn fill_ratio(&self) -> f64 {
        if self.nnz == 0 {
            1.0
        } else {
            self.values.len() as f64 / self.nnz as f64
        }
    }
    pub fn block_row_ptr(&self) -> &[u32] {
        &self.block_row_ptr
    }
    pub fn block_col(&self) -> &[u32] {
        &self.block_col
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    pub fn mask(&self) -> &[u64] {
        &self.mask
    }
    pub fn into_parts(self) -> BsrParts<T> {
        BsrParts {
            block_row_ptr: self.block_row_ptr,
            block_col: self.block_col,
            values: self.values,
            mask: self.mask,
        }
    }

    /// The blocks of block row `br`.
    #[inline(always)]
    pub fn block_row_range(&self, br: usize) -> Range<usize> {
        self.block_row_ptr[br] as usize..self.block_row_ptr[br + 1] as usize
    }
    /// The `r * c` values of block `b`, row-major.
    #[inline(always)]
    pub fn block_values(&self, b: usize) -> &[T] {
        let size = self.block.rows * self.block.cols;
        &self.values[b * size..(b + 1) * size]
    }
    /// The mask words of block `b`.
    #[inline(always)]
    pub fn block_mask(&self, b: usize) -> &[u64] {
        let words = mask_words(self.block);
        &self.mask[b * words..(b + 1) * words]
    }
    /// Row `i` of block `b`'s mask: bit `j` set when slot (i, j) holds an entry.
    #[inline(always)]
    pub fn row_mask(&self, b: usize, i: usize) -> u64 {
        let (c, first) = (self.block.cols, i * self.block.cols);
        (self.block_mask(b)[first / 64] >> (first % 64)) & row_bits(c)
    }
    /// The mask of a block row whose every slot holds an entry.
    pub fn full_row_mask(&self) -> u64 {
        row_bits(self.block.cols)
    }
    /// The in-block columns of the entries of row `i` of block `b`, increasing.
    #[inline(always)]
    pub fn row_slots(&self, b: usize, i: usize) -> impl Iterator<Item = usize> {
        let mut bits = self.row_mask(b, i);
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                j
            })
        })
    }

    /// The entries of matrix row `row` as (column, slot), in column order.
    fn row_entry_slots(&self, row: usize) -> impl Iterator<Item = (u32, usize)> + '_ {
        let (r, c) = (self.block.rows, self.block.cols);
        let (br, i) = (row / r, row % r);
        self.block_row_range(br).flat_map(move |b| {
            let first_col = self.block_col[b] as usize * c;
            let first_slot = b * r * c + i * c;
            // Fits: first_col + j < cols, which fits u32 (validated).
            self.row_slots(b, i)
                .map(move |j| ((first_col + j) as u32, first_slot + j))
        })
    }

    /// For each slot, the CSR entry it holds (in the order of [`SparseFormat::to_csr`]).
    pub fn value_order(&self) -> ValueOrder {
        order_from_rows(self.rows, self.values.len(), |row| {
            self.row_entry_slots(row).map(|(_, slot)| slot)
        })
    }

    /// New values for the same pattern: `csr_values` in CSR entry order, placed through `order`,
    /// which must be this matrix's [`Bsr::value_order`]. Fill stays zero.
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        check_new_values(
            Format::Bsr,
            (self.values.len(), self.nnz),
            order,
            csr_values,
        )?;
        gather(order, 0, csr_values, &mut self.values);
        Ok(())
    }
}

impl<T: Scalar> SparseFormat<T> for Bsr<T> {
    const FORMAT: Format = Format::Bsr;

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
        (self.block_row_ptr.len() + self.block_col.len()) * std::mem::size_of::<u32>()
            + self.values.len() * std::mem::size_of::<T>()
            + self.mask.len() * std::mem::size_of::<u64>()
    }
    fn validate(&self) -> Result<()> {
        Bsr::validate(self)
    }
    fn to_csr(&self) -> Csr<T, u32> {
        let r = self.block.rows;
        csr_from_rows(
            self.rows,
            self.cols,
            |row| {
                self.block_row_range(row / r)
                    .map(|b| self.row_mask(b, row % r).count_ones() as usize)
                    .sum()
            },
            |row| {
                self.row_entry_slots(row)
                    .map(|(col, slot)| (col, self.values[slot]))
            },
        )
    }
}

impl<T: Scalar> fmt::Debug for Bsr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Bsr {}x{}, nnz {}, {} blocks: {} stored, fill ratio {:.2}, {} bytes",
            self.rows,
            self.cols,
            self.nnz,
            self.block,
            self.nblocks(),
            self.fill_ratio(),
            self.memory_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The matrix of the module documentation, with a..f = 1..6.
    fn example() -> Csr<f64> {
        Csr::from_triplets(
            3,
            5,
            &[
                (0, 0, 1.0),
                (0, 1, 2.0),
                (0, 4, 3.0),
                (1, 1, 4.0),
                (1, 4, 5.0),
                (2, 2, 6.0),
            ],
        )
        .unwrap()
    }

    #[test]
    fn the_documented_example() {
        let m = Bsr::from_csr(example().as_ref(), 2, 2, FillLimit::UNLIMITED).unwrap();
        assert_eq!(m.block_row_ptr(), &[0, 2, 3]);
        assert_eq!(m.block_col(), &[0, 2, 1]);
        assert_eq!(
            m.values(),
            &[1.0, 2.0, 0.0, 4.0, 3.0, 0.0, 5.0, 0.0, 6.0, 0.0, 0.0, 0.0]
        );
        assert_eq!(m.mask(), &[0b1011, 0b0101, 0b0001]);
        assert_eq!((m.block_rows(), m.block_cols(), m.nblocks()), (2, 3, 3));
        assert_eq!((m.nnz(), m.stored_slots()), (6, 12));
        assert_eq!(m.fill_ratio(), 2.0);
        assert_eq!(m.row_slots(0, 0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(m.row_mask(0, 1), 0b10);
        assert_eq!(m.to_csr(), example());
        assert_eq!(
            format!("{m:?}"),
            format!(
                "Bsr 3x5, nnz 6, 2x2 blocks: 3 stored, fill ratio 2.00, {} bytes",
                m.memory_bytes()
            )
        );
    }

    #[test]
    fn a_16x16_block_spans_four_mask_words() {
        let triplets: Vec<_> = (0..20).map(|k| (k % 17, (k * 7) % 19, k as f64)).collect();
        let a = Csr::<f64>::from_triplets(17, 19, &triplets).unwrap();
        let m = Bsr::from_csr(a.as_ref(), 16, 16, FillLimit::UNLIMITED).unwrap();
        assert_eq!(m.mask().len(), 4 * m.nblocks());
        assert_eq!(m.full_row_mask(), 0xffff);
        assert_eq!(m.to_csr(), a);
    }

    #[test]
    fn other_block_sizes_are_refused() {
        let a = example();
        for (r, c) in [(3, 2), (0, 4), (32, 1), (4, 5)] {
            let err = Bsr::from_csr(a.as_ref(), r, c, FillLimit::UNLIMITED).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument { message } if message.contains("[1, 2, 4, 8, 16]")),
                "{err}"
            );
        }
        let parts = BsrParts::<f64> {
            block_row_ptr: vec![0, 0],
            ..BsrParts::default()
        };
        let rejected = Bsr::try_new(3, 3, 3, 3, parts.clone()).unwrap_err();
        assert!(rejected.parts == parts);
    }
}
