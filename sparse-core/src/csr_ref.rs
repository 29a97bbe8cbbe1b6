//! The borrowed CSR view executors plan from.

use crate::error::{Error, Result, StructureError};
use crate::op::Format;
use crate::scalar::SpIndex;

/// A borrowed CSR matrix: `row_ptr` (rows + 1 offsets), `col_idx` and `values` (nnz each).
///
/// A `CsrRef` made by [`CsrRef::try_new`] is canonical: `row_ptr` starts at 0, never decreases
/// and ends at nnz; within each row the column indices strictly increase and lie in `0..cols`.
/// Kernels rely on this (they index without bounds checks only where it holds).
#[derive(Debug)]
pub struct CsrRef<'a, T, I = u32> {
    rows: usize,
    cols: usize,
    row_ptr: &'a [I],
    col_idx: &'a [I],
    values: &'a [T],
}

impl<T, I> Clone for CsrRef<'_, T, I> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, I> Copy for CsrRef<'_, T, I> {}

impl<'a, T, I: SpIndex> CsrRef<'a, T, I> {
    /// Checks every invariant; the error names the first offending position.
    pub fn try_new(
        rows: usize,
        cols: usize,
        row_ptr: &'a [I],
        col_idx: &'a [I],
        values: &'a [T],
    ) -> Result<Self> {
        let view = CsrRef {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        };
        check_dimensions::<I>(rows, cols)?;
        view.validate().map_err(|error| Error::InvalidStructure {
            format: Format::Csr,
            error,
        })?;
        Ok(view)
    }

    /// # Safety
    /// The arrays must satisfy the invariants [`CsrRef::try_new`] checks: kernels index dense
    /// operands with these indices without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        row_ptr: &'a [I],
        col_idx: &'a [I],
        values: &'a [T],
    ) -> Self {
        CsrRef {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        }
    }

    /// Checks the canonical-CSR invariants.
    pub fn validate(&self) -> Result<(), StructureError> {
        validate_csr(
            self.rows,
            self.cols,
            self.row_ptr,
            self.col_idx,
            self.values.len(),
            true,
        )
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
    pub fn nnz(&self) -> usize {
        self.values.len()
    }
    pub fn row_ptr(&self) -> &'a [I] {
        self.row_ptr
    }
    pub fn col_idx(&self) -> &'a [I] {
        self.col_idx
    }
    pub fn values(&self) -> &'a [T] {
        self.values
    }

    /// Entries `start..end` of row `i`.
    #[inline(always)]
    pub fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        self.row_ptr[i].to_usize()..self.row_ptr[i + 1].to_usize()
    }

    /// Column indices and values of row `i`.
    #[inline(always)]
    pub fn row(&self, i: usize) -> (&'a [I], &'a [T]) {
        let r = self.row_range(i);
        (&self.col_idx[r.clone()], &self.values[r])
    }

    /// Number of entries of row `i`.
    #[inline(always)]
    pub fn row_len(&self, i: usize) -> usize {
        self.row_ptr[i + 1].to_usize() - self.row_ptr[i].to_usize()
    }

    /// The mean over non-empty rows of the span of their columns (last minus first, plus one),
    /// as a fraction of the columns: small where a row's x entries lie close together, near 1
    /// where they are scattered over x. Taken over at most [`SPAN_SAMPLE`] rows, evenly spread.
    pub fn column_span(&self) -> f64 {
        let (mut spans, mut rows) = (0.0, 0usize);
        for i in (0..self.rows).step_by(self.rows.div_ceil(SPAN_SAMPLE).max(1)) {
            let range = self.row_range(i);
            if let (Some(first), Some(last)) =
                (self.col_idx.get(range.start), self.col_idx[range].last())
            {
                spans += (last.to_usize() - first.to_usize() + 1) as f64;
                rows += 1;
            }
        }
        if rows == 0 {
            0.0
        } else {
            spans / rows as f64 / self.cols as f64
        }
    }

    /// Row-length statistics, the input of format and algorithm choices.
    pub fn row_stats(&self) -> RowStats {
        if self.rows == 0 {
            return RowStats {
                min: 0,
                max: 0,
                mean: 0.0,
                cv: 0.0,
                empty_rows: 0,
            };
        }
        let (mut min, mut max, mut empty, mut sum_sq) = (usize::MAX, 0, 0, 0.0f64);
        for i in 0..self.rows {
            let len = self.row_len(i);
            min = min.min(len);
            max = max.max(len);
            empty += usize::from(len == 0);
            sum_sq += (len as f64) * (len as f64);
        }
        let mean = self.nnz() as f64 / self.rows as f64;
        let var = (sum_sq / self.rows as f64 - mean * mean).max(0.0);
        let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
        RowStats {
            min,
            max,
            mean,
            cv,
            empty_rows: empty,
        }
    }
}

/// Rows [`CsrRef::column_span`] looks at, at most: enough for a mean, and planning a matrix of
/// millions of rows does not wait on a pass over all of them.
const SPAN_SAMPLE: usize = 1 << 16;

/// Row-length statistics of a CSR matrix.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowStats {
    pub min: usize,
    pub max: usize,
    pub mean: f64,
    /// Standard deviation over mean (0 for an empty matrix).
    pub cv: f64,
    pub empty_rows: usize,
}

/// Errors unless both dimensions are representable in `I` (so every row and column index is).
pub fn check_dimensions<I: SpIndex>(rows: usize, cols: usize) -> Result<()> {
    for (what, n) in [("number of rows", rows), ("number of columns", cols)] {
        if I::try_from_usize(n).is_none() {
            return Err(Error::overflow::<I>(what, n));
        }
    }
    Ok(())
}

/// Checks CSR arrays. With `canonical`, columns must strictly increase within each row; without,
/// they need only be in range (duplicates and any order allowed).
pub fn validate_csr<I: SpIndex>(
    rows: usize,
    cols: usize,
    row_ptr: &[I],
    col_idx: &[I],
    nnz: usize,
    canonical: bool,
) -> Result<(), StructureError> {
    let expected_ptr = rows
        .checked_add(1)
        .ok_or_else(|| StructureError::Other("rows + 1 overflows usize".into()))?;
    if row_ptr.len() != expected_ptr {
        return Err(StructureError::Length {
            array: "row_ptr",
            expected: expected_ptr,
            found: row_ptr.len(),
        });
    }
    if col_idx.len() != nnz {
        return Err(StructureError::Length {
            array: "col_idx",
            expected: nnz,
            found: col_idx.len(),
        });
    }
    if row_ptr[0].try_to_usize() != Some(0) {
        return Err(StructureError::RowPtrBound {
            position: 0,
            expected: 0,
            found: format!("{:?}", row_ptr[0]),
        });
    }
    if row_ptr[rows].try_to_usize() != Some(nnz) {
        return Err(StructureError::RowPtrBound {
            position: rows,
            expected: nnz,
            found: format!("{:?}", row_ptr[rows]),
        });
    }
    for i in 0..rows {
        // Both ends are non-negative and at most nnz once this row's checks pass, by induction
        // from row_ptr[0] == 0 and row_ptr[rows] == nnz.
        if row_ptr[i + 1] < row_ptr[i] {
            return Err(StructureError::RowPtrDecreasing { row: i });
        }
        let (start, end) = (row_ptr[i].to_usize(), row_ptr[i + 1].to_usize());
        let mut previous: Option<usize> = None;
        for (entry, &c) in col_idx.iter().enumerate().take(end).skip(start) {
            let col = match c.try_to_usize() {
                Some(col) if col < cols => col,
                _ => {
                    return Err(StructureError::ColumnOutOfRange {
                        row: i,
                        entry,
                        col: format!("{c:?}"),
                        cols,
                    })
                }
            };
            if canonical {
                if let Some(p) = previous {
                    if col == p {
                        return Err(StructureError::Duplicate { row: i, col });
                    }
                    if col < p {
                        return Err(StructureError::Unsorted {
                            row: i,
                            col,
                            previous: p,
                        });
                    }
                }
            }
            previous = Some(col);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_span_is_a_fraction_of_the_columns() {
        let a = CsrRef::<f64, u32>::try_new(3, 10, &[0, 2, 2, 3], &[0, 9, 4], &[1.0; 3]).unwrap();
        // Spans 10 and 1 over two non-empty rows, of 10 columns.
        assert!((a.column_span() - 0.55).abs() < 1e-12);
    }

    #[test]
    fn accepts_canonical_csr() {
        let a =
            CsrRef::<f64, u32>::try_new(2, 3, &[0, 2, 3], &[0, 2, 1], &[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(a.row(0), (&[0u32, 2][..], &[1.0, 2.0][..]));
        assert_eq!(a.row_len(1), 1);
    }

    #[test]
    fn names_the_offending_position() {
        let err = |rp: &[u32], ci: &[u32]| {
            let v = vec![1.0; ci.len()];
            match CsrRef::<f64, u32>::try_new(2, 3, rp, ci, &v) {
                Err(Error::InvalidStructure { error, .. }) => error,
                other => panic!("expected a structure error, got {other:?}"),
            }
        };
        assert_eq!(
            err(&[0, 2, 3], &[0, 3, 1]),
            StructureError::ColumnOutOfRange {
                row: 0,
                entry: 1,
                col: "3".into(),
                cols: 3
            }
        );
        assert_eq!(
            err(&[0, 2, 3], &[2, 0, 1]),
            StructureError::Unsorted {
                row: 0,
                col: 0,
                previous: 2
            }
        );
        assert_eq!(
            err(&[0, 2, 3], &[1, 1, 1]),
            StructureError::Duplicate { row: 0, col: 1 }
        );
        assert_eq!(
            err(&[0, 3, 2], &[0, 1, 2]),
            StructureError::RowPtrBound {
                position: 2,
                expected: 3,
                found: "2".into()
            }
        );
        assert_eq!(
            err(&[0, 2], &[0, 1]),
            StructureError::Length {
                array: "row_ptr",
                expected: 3,
                found: 2
            }
        );
        assert_eq!(
            err(&[0, 3, 2], &[0, 1]),
            StructureError::RowPtrDecreasing { row: 1 }
        );
    }

    #[test]
    fn negative_indices_are_rejected() {
        assert!(CsrRef::<f32, i32>::try_new(1, 2, &[0, 1], &[-1], &[1.0]).is_err());
        assert!(CsrRef::<f32, i32>::try_new(1, 2, &[-1, 1], &[0], &[1.0]).is_err());
    }
}
