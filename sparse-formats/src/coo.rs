//! Coordinate format: (row, column, value) triplets in any order, duplicates allowed.

use sparse_core::{Error, Format, Result, Scalar, SpIndex, StructureError, ValueOrder};

use crate::csr::Csr;
use crate::rejected::Rejected;
use crate::slots::{check_new_values, gather, order_from_entry_slots};

/// A matrix as triplets. Entries may come in any order and may repeat: duplicates are summed
/// when the matrix is converted (to CSR, to dense).
#[derive(Clone, Debug, PartialEq)]
pub struct Coo<T, I = u32> {
    rows: usize,
    cols: usize,
    row_idx: Vec<I>,
    col_idx: Vec<I>,
    values: Vec<T>,
}

type CooParts<T, I> = (Vec<I>, Vec<I>, Vec<T>);

impl<T: Scalar, I: SpIndex> Coo<T, I> {
    /// Checks that the three arrays have one length and every index is in range.
    // The inputs come back by value with the error (as sprs does); the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        row_idx: Vec<I>,
        col_idx: Vec<I>,
        values: Vec<T>,
    ) -> Result<Self, Rejected<CooParts<T, I>>> {
        let coo = Coo {
            rows,
            cols,
            row_idx,
            col_idx,
            values,
        };
        match coo.validate() {
            Ok(()) => Ok(coo),
            Err(error) => Err(Rejected {
                parts: (coo.row_idx, coo.col_idx, coo.values),
                error,
            }),
        }
    }

    /// # Safety
    /// The arrays must have equal lengths and every index must be in range: conversions index
    /// with them without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        row_idx: Vec<I>,
        col_idx: Vec<I>,
        values: Vec<T>,
    ) -> Self {
        Coo {
            rows,
            cols,
            row_idx,
            col_idx,
            values,
        }
    }

    /// An empty `rows x cols` matrix.
    pub fn empty(rows: usize, cols: usize) -> Self {
        Coo {
            rows,
            cols,
            row_idx: Vec::new(),
            col_idx: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Builds from `(row, col, value)` triplets; an error names the first out-of-range one.
    pub fn from_triplets(rows: usize, cols: usize, triplets: &[(usize, usize, T)]) -> Result<Self> {
        let mut coo = Coo::empty(rows, cols);
        coo.reserve(triplets.len());
        for &(r, c, v) in triplets {
            coo.push(r, c, v)?;
        }
        Ok(coo)
    }

    pub fn reserve(&mut self, additional: usize) {
        self.row_idx.reserve(additional);
        self.col_idx.reserve(additional);
        self.values.reserve(additional);
    }

    /// Appends an entry; an error when it is out of range or does not fit the index type.
    pub fn push(&mut self, row: usize, col: usize, value: T) -> Result<()> {
        let entry = self.values.len();
        if row >= self.rows {
            return Err(structure(StructureError::RowOutOfRange {
                entry,
                row: row.to_string(),
                rows: self.rows,
            }));
        }
        if col >= self.cols {
            return Err(structure(StructureError::ColumnOutOfRange {
                row,
                entry,
                col: col.to_string(),
                cols: self.cols,
            }));
        }
        let r = I::try_from_usize(row).ok_or_else(|| Error::overflow::<I>("row index", row))?;
        let c = I::try_from_usize(col).ok_or_else(|| Error::overflow::<I>("column index", col))?;
        self.row_idx.push(r);
        self.col_idx.push(c);
        self.values.push(value);
        Ok(())
    }

    pub fn validate(&self) -> Result<()> {
        let n = self.values.len();
        for (array, len) in [
            ("row_idx", self.row_idx.len()),
            ("col_idx", self.col_idx.len()),
        ] {
            if len != n {
                return Err(structure(StructureError::Length {
                    array,
                    expected: n,
                    found: len,
                }));
            }
        }
        for (entry, (&r, &c)) in self.row_idx.iter().zip(&self.col_idx).enumerate() {
            let row = match r.try_to_usize() {
                Some(row) if row < self.rows => row,
                _ => {
                    return Err(structure(StructureError::RowOutOfRange {
                        entry,
                        row: format!("{r:?}"),
                        rows: self.rows,
                    }))
                }
            };
            if !matches!(c.try_to_usize(), Some(col) if col < self.cols) {
                return Err(structure(StructureError::ColumnOutOfRange {
                    row,
                    entry,
                    col: format!("{c:?}"),
                    cols: self.cols,
                }));
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
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    /// Stored entries, duplicates counted.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    pub fn row_idx(&self) -> &[I] {
        &self.row_idx
    }
    pub fn col_idx(&self) -> &[I] {
        &self.col_idx
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    pub fn into_parts(self) -> CooParts<T, I> {
        (self.row_idx, self.col_idx, self.values)
    }

    /// Bytes of the three arrays.
    pub fn memory_bytes(&self) -> usize {
        self.values.len() * (2 * std::mem::size_of::<I>() + std::mem::size_of::<T>())
    }

    /// For each stored entry, the entry of [`Coo::to_csr`] it becomes; an error when two
    /// entries share a position, since their sum is one CSR entry that no slot holds alone.
    pub fn value_order(&self) -> Result<ValueOrder> {
        let position = |k: usize| (self.row_idx[k].to_usize(), self.col_idx[k].to_usize());
        let mut by_position: Vec<usize> = (0..self.values.len()).collect();
        by_position.sort_unstable_by_key(|&k| position(k));
        if let Some(pair) = by_position
            .windows(2)
            .find(|pair| position(pair[0]) == position(pair[1]))
        {
            let (row, col) = position(pair[0]);
            return Err(structure(StructureError::Duplicate { row, col }));
        }
        Ok(order_from_entry_slots(&by_position, self.values.len()))
    }

    /// New values for the same pattern: `csr_values` in the entry order of [`Coo::to_csr`],
    /// placed through `order`, which must be this matrix's [`Coo::value_order`].
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        let n = self.values.len();
        check_new_values(Format::Coo, (n, n), order, csr_values)?;
        gather(order, 0, csr_values, &mut self.values);
        Ok(())
    }

    /// Canonical CSR: rows in order, columns increasing, duplicates summed (in `T::Acc`).
    pub fn to_csr(&self) -> Result<Csr<T, I>> {
        sparse_core::check_dimensions::<I>(self.rows, self.cols)?;
        let nnz = self.values.len();
        let mut counts = vec![0usize; self.rows + 1];
        for &r in &self.row_idx {
            counts[r.to_usize() + 1] += 1;
        }
        for i in 0..self.rows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut entries: Vec<(usize, T)> = vec![(0, T::default()); nnz];
        for ((&r, &c), &v) in self.row_idx.iter().zip(&self.col_idx).zip(&self.values) {
            let slot = &mut next[r.to_usize()];
            entries[*slot] = (c.to_usize(), v);
            *slot += 1;
        }
        let mut row_ptr = Vec::with_capacity(self.rows + 1);
        let mut col_idx = Vec::with_capacity(nnz);
        let mut values = Vec::with_capacity(nnz);
        row_ptr.push(I::default());
        for i in 0..self.rows {
            let row = &mut entries[counts[i]..counts[i + 1]];
            row.sort_by_key(|&(c, _)| c);
            let mut k = 0;
            while k < row.len() {
                let (c, mut acc) = (row[k].0, row[k].1.to_acc());
                k += 1;
                while k < row.len() && row[k].0 == c {
                    acc += row[k].1.to_acc();
                    k += 1;
                }
                col_idx.push(
                    I::try_from_usize(c).ok_or_else(|| Error::overflow::<I>("column index", c))?,
                );
                values.push(T::from_acc(acc));
            }
            let len = values.len();
            row_ptr.push(
                I::try_from_usize(len)
                    .ok_or_else(|| Error::overflow::<I>("number of entries", len))?,
            );
        }
        // SAFETY: rows are filled in order with strictly increasing in-range columns (they come
        // from a validated COO, sorted and merged above), and row_ptr counts them.
        Ok(unsafe { Csr::new_unchecked(self.rows, self.cols, row_ptr, col_idx, values) })
    }
}

fn structure(error: StructureError) -> Error {
    Error::InvalidStructure {
        format: Format::Coo,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_summed_and_rows_sorted() {
        let coo =
            Coo::<f64>::from_triplets(3, 3, &[(2, 1, 1.0), (0, 2, 2.0), (0, 0, 3.0), (2, 1, 4.0)])
                .unwrap();
        let csr = coo.to_csr().unwrap();
        assert_eq!(csr.row_ptr(), &[0, 2, 2, 3]);
        assert_eq!(csr.col_idx(), &[0, 2, 1]);
        assert_eq!(csr.values(), &[3.0, 2.0, 5.0]);
    }

    #[test]
    fn out_of_range_entries_are_refused_with_the_inputs() {
        let rejected =
            Coo::<f32>::try_new(2, 2, vec![0, 2], vec![0, 0], vec![1.0, 2.0]).unwrap_err();
        assert!(rejected.to_string().contains("row index 2"), "{rejected}");
        assert_eq!(rejected.parts.2, vec![1.0, 2.0]);
        assert!(Coo::<f32>::from_triplets(2, 2, &[(0, 5, 1.0)]).is_err());
    }

    #[test]
    fn index_overflow_names_the_numbers() {
        let err = Coo::<f32, u32>::from_triplets(1 << 40, 1, &[(1 << 33, 0, 1.0)]).unwrap_err();
        assert!(
            matches!(err, Error::IndexOverflow { value, .. } if value == 1 << 33),
            "{err}"
        );
    }
}
