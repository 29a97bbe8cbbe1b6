//! ELLPACK: every row padded to one width and stored column-major, so that consecutive rows'
//! k-th entries sit side by side (what a GPU thread per row reads coalesced).
//!
//! ```text
//!   row 0   a . b .        width 2, slot (row, k) at k*rows + row, * = ELL padding
//!   row 1   . . . .
//!   row 2   . c . d        col_idx = [0 * 1 | 2 * 3]
//!                          values  = [a 0 c | b 0 d]
//! ```
//!
//! A row's real entries come first, in increasing column order; the rest of its slots are
//! padding: column [`Ell::PADDING`] and value zero. Kernels stop a row at its first padded slot,
//! so padding is never read as an entry and explicit zeros of the source survive the round trip.

use std::fmt;

use rayon::prelude::*;
use sparse_core::{CsrRef, Format, Result, Scalar, SpIndex, StructureError, ValueOrder};

use crate::assembly::csr_from_rows;
use crate::checks::{check_length, check_source, checked_slots, validate_format};
use crate::csr::Csr;
use crate::format::{FillLimit, SparseFormat};
use crate::rejected::{validated, Rejected};
use crate::slots::{check_new_values, gather, order_from_rows};

/// The column index of a padded ELL slot (also [`Ell::PADDING`]).
pub const ELL_PADDING: u32 = u32::MAX;

/// The arrays of an ELL matrix, as [`Ell::try_new`] takes them and gives them back.
#[derive(Clone, Default, PartialEq)]
pub struct EllParts<T> {
    /// `rows * width` column indices, column-major; [`Ell::PADDING`] marks padding.
    pub col_idx: Vec<u32>,
    /// `rows * width` values, column-major; zero in padded slots.
    pub values: Vec<T>,
}

/// A matrix in ELL; see the module documentation for the layout.
#[derive(Clone, PartialEq)]
pub struct Ell<T> {
    rows: usize,
    cols: usize,
    width: usize,
    nnz: usize,
    col_idx: Vec<u32>,
    values: Vec<T>,
}

impl<T: Scalar> Ell<T> {
    /// The column index of a padded slot.
    pub const PADDING: u32 = ELL_PADDING;

    /// Converts a canonical CSR matrix, padding every row to the longest one. The slot count
    /// `rows * longest row` is checked against `limit` before anything is allocated: one long
    /// row is enough to make ELL useless.
    pub fn from_csr<I: SpIndex>(a: CsrRef<'_, T, I>, limit: FillLimit) -> Result<Self> {
        check_source(a)?;
        let width = (0..a.rows()).map(|i| a.row_len(i)).max().unwrap_or(0);
        limit.check(Format::Ell, checked_slots(a.rows(), width)?, a.nnz())?;
        Ok(Self::from_row_prefixes(a, width))
    }

    /// The first `width` entries of every row of `a` (all of a shorter row), in parallel over
    /// the `width` column-major slabs. The caller has run [`check_source`] and bounded
    /// `rows * width`.
    pub(crate) fn from_row_prefixes<I: SpIndex>(a: CsrRef<'_, T, I>, width: usize) -> Self {
        let rows = a.rows();
        let mut col_idx = vec![Self::PADDING; rows * width];
        let mut values = vec![T::default(); rows * width];
        // A zero chunk size is refused by rayon; with no rows there are no slabs to fill anyway.
        let slab = rows.max(1);
        col_idx
            .par_chunks_mut(slab)
            .zip(values.par_chunks_mut(slab))
            .enumerate()
            .for_each(|(k, (slab_cols, slab_values))| {
                for (i, (col, value)) in slab_cols.iter_mut().zip(slab_values).enumerate() {
                    let entries = a.row_range(i);
                    if k < entries.len() {
                        let e = entries.start + k;
                        // Fits: columns are below cols, which fits u32 (check_source).
                        *col = a.col_idx()[e].to_usize() as u32;
                        *value = a.values()[e];
                    }
                }
            });
        let nnz = (0..rows).map(|i| a.row_len(i).min(width)).sum();
        Ell {
            rows,
            cols: a.cols(),
            width,
            nnz,
            col_idx,
            values,
        }
    }

    /// Checks every invariant (see [`Ell::validate`]); on failure the arrays come back with the
    /// error.
    // The inputs come back by value with the error (as sprs does); the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        width: usize,
        parts: EllParts<T>,
    ) -> Result<Self, Rejected<EllParts<T>>> {
        // SAFETY: validated before it is handed out; on failure the arrays go back to the caller.
        let m = unsafe { Self::new_unchecked(rows, cols, width, parts) };
        validated(m, Self::validate, Self::into_parts)
    }

    /// # Safety
    /// The arrays must satisfy the invariants [`Ell::validate`] checks: kernels index dense
    /// operands with the stored columns without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        width: usize,
        parts: EllParts<T>,
    ) -> Self {
        Ell {
            rows,
            cols,
            width,
            nnz: parts
                .col_idx
                .iter()
                .filter(|&&c| c != Self::PADDING)
                .count(),
            col_idx: parts.col_idx,
            values: parts.values,
        }
    }

    /// Checks that the dimensions and the entry count fit u32, that both arrays hold
    /// `rows * width` slots, and that every row is a run of entries with strictly increasing
    /// columns in range followed only by padding (column [`Ell::PADDING`], value zero).
    pub fn validate(&self) -> Result<()> {
        validate_format(Format::Ell, (self.rows, self.cols), self.nnz, || {
            self.check_structure()
        })
    }

    pub(crate) fn check_structure(&self) -> Result<(), StructureError> {
        let slots = self.rows.checked_mul(self.width).ok_or_else(|| {
            StructureError::Other(format!(
                "{} rows of width {} hold more slots than usize counts",
                self.rows, self.width
            ))
        })?;
        check_length("col_idx", slots, self.col_idx.len())?;
        check_length("values", slots, self.values.len())?;
        for row in 0..self.rows {
            let mut previous: Option<usize> = None;
            let mut padded_from = None;
            for k in 0..self.width {
                let slot = self.slot(row, k);
                let col = self.col_idx[slot];
                if col == Self::PADDING {
                    padded_from.get_or_insert(k);
                    if self.values[slot] != T::default() {
                        return Err(StructureError::Other(format!(
                            "row {row}: padded slot {k} holds {:?}, not zero",
                            self.values[slot]
                        )));
                    }
                    continue;
                }
                if let Some(first) = padded_from {
                    return Err(StructureError::Other(format!(
                        "row {row}: slot {k} holds column {col} after padding from slot {first} \
                         (padding only ends a row)"
                    )));
                }
                let col = col as usize;
                if col >= self.cols {
                    return Err(StructureError::ColumnOutOfRange {
                        row,
                        entry: slot,
                        col: col.to_string(),
                        cols: self.cols,
                    });
                }
                match previous {
                    Some(p) if p == col => return Err(StructureError::Duplicate { row, col }),
                    Some(p) if p > col => {
                        return Err(StructureError::Unsorted {
                            row,
                            col,
                            previous: p,
                        })
                    }
                    _ => previous = Some(col),
                }
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
    /// Slots per row, the longest row's length when converted from CSR.
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    pub fn into_parts(self) -> EllParts<T> {
        EllParts {
            col_idx: self.col_idx,
            values: self.values,
        }
    }

    /// Where slot `k` of `row` is stored in `col_idx` and `values`.
    #[inline(always)]
    pub fn slot(&self, row: usize, k: usize) -> usize {
        k * self.rows + row
    }

    /// Real entries of `row` (its slots before the first padding).
    pub fn row_len(&self, row: usize) -> usize {
        (0..self.width)
            .position(|k| self.col_idx[self.slot(row, k)] == Self::PADDING)
            .unwrap_or(self.width)
    }

    /// The entries of `row` as (column, value), in column order.
    pub fn row_entries(&self, row: usize) -> impl Iterator<Item = (u32, T)> + '_ {
        self.row_slots(row)
            .map(|slot| (self.col_idx[slot], self.values[slot]))
    }

    /// The slots of the entries of `row`, in column order.
    pub(crate) fn row_slots(&self, row: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.row_len(row)).map(move |k| self.slot(row, k))
    }

    /// For each slot, the CSR entry it holds (in the order of [`SparseFormat::to_csr`]).
    pub fn value_order(&self) -> ValueOrder {
        order_from_rows(self.rows, self.values.len(), |row| self.row_slots(row))
    }

    /// New values for the same pattern: `csr_values` in CSR entry order, placed through `order`,
    /// which must be this matrix's [`Ell::value_order`]. Padding stays zero.
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        check_new_values(
            Format::Ell,
            (self.values.len(), self.nnz),
            order,
            csr_values,
        )?;
        gather(order, 0, csr_values, &mut self.values);
        Ok(())
    }

    /// The values, for HYB to fill its ELL part's slots.
    pub(crate) fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
    }
}

impl<T: Scalar> SparseFormat<T> for Ell<T> {
    const FORMAT: Format = Format::Ell;

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
        self.col_idx.len() * std::mem::size_of::<u32>()
            + self.values.len() * std::mem::size_of::<T>()
    }
    fn validate(&self) -> Result<()> {
        Ell::validate(self)
    }
    fn to_csr(&self) -> Csr<T, u32> {
        csr_from_rows(
            self.rows,
            self.cols,
            |i| self.row_len(i),
            |i| self.row_entries(i),
        )
    }
}

impl<T: Scalar> fmt::Debug for Ell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Ell {}x{}, nnz {}, width {}, {} bytes",
            self.rows,
            self.cols,
            self.nnz,
            self.width,
            self.memory_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_core::Error;

    fn example() -> Csr<f64> {
        Csr::from_triplets(3, 4, &[(0, 0, 1.0), (0, 2, 2.0), (2, 1, 3.0), (2, 3, 4.0)]).unwrap()
    }

    #[test]
    fn layout_is_column_major_with_marked_padding() {
        let m = Ell::from_csr(example().as_ref(), FillLimit::UNLIMITED).unwrap();
        let p = Ell::<f64>::PADDING;
        assert_eq!(m.width(), 2);
        assert_eq!(m.col_idx(), &[0, p, 1, 2, p, 3]);
        assert_eq!(m.values(), &[1.0, 0.0, 3.0, 2.0, 0.0, 4.0]);
        assert_eq!((m.row_len(0), m.row_len(1), m.row_len(2)), (2, 0, 2));
        assert_eq!((m.nnz(), m.stored_slots()), (4, 6));
        assert_eq!(m.memory_bytes(), 6 * 4 + 6 * 8);
        assert_eq!(m.to_csr(), example());
        assert_eq!(format!("{m:?}"), "Ell 3x4, nnz 4, width 2, 72 bytes");
    }

    #[test]
    fn try_new_accepts_extra_padding_and_hands_back_bad_arrays() {
        let p = Ell::<f64>::PADDING;
        let parts = EllParts {
            col_idx: vec![1, p, p, p],
            values: vec![5.0, 0.0, 0.0, 0.0],
        };
        let m = Ell::try_new(2, 3, 2, parts).unwrap();
        assert_eq!(
            m.to_csr(),
            Csr::from_triplets(2, 3, &[(0, 1, 5.0)]).unwrap()
        );
        let bad = EllParts {
            col_idx: vec![1, p, 3, p],
            values: vec![5.0, 0.0, 1.0, 0.0],
        };
        let rejected = Ell::try_new(2, 3, 2, bad.clone()).unwrap_err();
        assert!(rejected.parts == bad);
        assert!(matches!(
            rejected.error,
            Error::InvalidStructure {
                format: Format::Ell,
                error: StructureError::ColumnOutOfRange {
                    row: 0,
                    entry: 2,
                    ..
                }
            }
        ));
    }

    #[test]
    fn slot_count_overflow_is_an_error() {
        // SAFETY: the structure is invalid on purpose; only the check that refuses it reads it.
        let m = unsafe { Ell::<f32>::new_unchecked(usize::MAX / 2, 1, 3, EllParts::default()) };
        assert!(m.check_structure().is_err());
    }
}
