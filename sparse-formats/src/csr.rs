//! Compressed sparse row format, the interchange format of sparse-blas.

use sparse_core::{
    check_dimensions, validate_csr, CsrRef, Error, Format, Result, RowStats, Scalar, SpIndex,
};

use crate::coo::Coo;
use crate::rejected::Rejected;

/// An owned canonical CSR matrix: row pointers, then per row strictly increasing column indices
/// and their values. [`Csr::as_ref`] gives the [`CsrRef`] executors plan from.
#[derive(Clone, Debug, PartialEq)]
pub struct Csr<T, I = u32> {
    rows: usize,
    cols: usize,
    row_ptr: Vec<I>,
    col_idx: Vec<I>,
    values: Vec<T>,
}

type CsrParts<T, I> = (Vec<I>, Vec<I>, Vec<T>);

impl<T: Scalar, I: SpIndex> Csr<T, I> {
    /// Checks every invariant of canonical CSR (see [`CsrRef`]); on failure the arrays come back
    /// with the error, which names the first offending position.
    // The inputs come back by value with the error (as sprs does); the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        row_ptr: Vec<I>,
        col_idx: Vec<I>,
        values: Vec<T>,
    ) -> Result<Self, Rejected<CsrParts<T, I>>> {
        let csr = Csr {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        };
        match csr.validate() {
            Ok(()) => Ok(csr),
            Err(error) => Err(Rejected {
                parts: (csr.row_ptr, csr.col_idx, csr.values),
                error,
            }),
        }
    }

    /// # Safety
    /// The arrays must satisfy the invariants [`Csr::try_new`] checks: kernels index dense
    /// operands with these indices without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        row_ptr: Vec<I>,
        col_idx: Vec<I>,
        values: Vec<T>,
    ) -> Self {
        Csr {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
        }
    }

    /// Accepts rows whose columns are in any order and may repeat: each row is sorted and
    /// duplicates are summed (in `T::Acc`). Pointers and indices are still checked.
    pub fn from_unsorted(
        rows: usize,
        cols: usize,
        row_ptr: Vec<I>,
        col_idx: Vec<I>,
        values: Vec<T>,
    ) -> Result<Self> {
        check_dimensions::<I>(rows, cols)?;
        validate_csr(rows, cols, &row_ptr, &col_idx, values.len(), false).map_err(|error| {
            Error::InvalidStructure {
                format: Format::Csr,
                error,
            }
        })?;
        let mut row_idx = Vec::with_capacity(values.len());
        for i in 0..rows {
            // Fits: rows is representable in I (checked above).
            let r = I::try_from_usize(i).unwrap_or_default();
            row_idx.extend(std::iter::repeat_n(
                r,
                row_ptr[i + 1].to_usize() - row_ptr[i].to_usize(),
            ));
        }
        // SAFETY: validate_csr checked every column index and row pointer, so every triplet is in range.
        unsafe { Coo::new_unchecked(rows, cols, row_idx, col_idx, values) }.to_csr()
    }

    /// Builds from `(row, col, value)` triplets in any order; duplicates are summed.
    pub fn from_triplets(rows: usize, cols: usize, triplets: &[(usize, usize, T)]) -> Result<Self> {
        Coo::from_triplets(rows, cols, triplets)?.to_csr()
    }

    /// An empty `rows x cols` matrix.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Csr {
            rows,
            cols,
            row_ptr: vec![I::default(); rows + 1],
            col_idx: Vec::new(),
            values: Vec::new(),
        }
    }

    /// The n x n identity.
    pub fn identity(n: usize) -> Result<Self> {
        let idx =
            |v: usize| I::try_from_usize(v).ok_or_else(|| Error::overflow::<I>("dimension", v));
        let row_ptr = (0..=n).map(idx).collect::<Result<Vec<I>>>()?;
        let col_idx = row_ptr[..n].to_vec();
        Ok(Csr {
            rows: n,
            cols: n,
            row_ptr,
            col_idx,
            values: vec![T::from_f64(1.0); n],
        })
    }

    pub fn validate(&self) -> Result<()> {
        CsrRef::try_new(
            self.rows,
            self.cols,
            &self.row_ptr,
            &self.col_idx,
            &self.values,
        )
        .map(|_| ())
    }

    /// The borrowed view executors plan from.
    pub fn as_ref(&self) -> CsrRef<'_, T, I> {
        // SAFETY: a `Csr` is canonical by construction (try_new validates; new_unchecked and the
        // conversions carry the same invariant).
        unsafe {
            CsrRef::new_unchecked(
                self.rows,
                self.cols,
                &self.row_ptr,
                &self.col_idx,
                &self.values,
            )
        }
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
    pub fn row_ptr(&self) -> &[I] {
        &self.row_ptr
    }
    pub fn col_idx(&self) -> &[I] {
        &self.col_idx
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Values may change freely; the structure may not.
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
    }
    pub fn into_parts(self) -> CsrParts<T, I> {
        (self.row_ptr, self.col_idx, self.values)
    }

    /// Bytes of the three arrays.
    pub fn memory_bytes(&self) -> usize {
        (self.row_ptr.len() + self.col_idx.len()) * std::mem::size_of::<I>()
            + self.values.len() * std::mem::size_of::<T>()
    }

    /// Triplets in row-major order.
    pub fn to_coo(&self) -> Coo<T, I> {
        let mut row_idx = Vec::with_capacity(self.nnz());
        for i in 0..self.rows {
            let len = self.row_ptr[i + 1].to_usize() - self.row_ptr[i].to_usize();
            // Fits: a Csr's dimensions are representable in I (checked on construction).
            let r = I::try_from_usize(i).unwrap_or_default();
            row_idx.extend(std::iter::repeat_n(r, len));
        }
        // SAFETY: the indices come from a canonical CSR of the same shape.
        unsafe {
            Coo::new_unchecked(
                self.rows,
                self.cols,
                row_idx,
                self.col_idx.clone(),
                self.values.clone(),
            )
        }
    }

    /// The same matrix with values converted through f64 (rounding to the target type).
    pub fn cast<U: Scalar>(&self) -> Csr<U, I> {
        Csr {
            rows: self.rows,
            cols: self.cols,
            row_ptr: self.row_ptr.clone(),
            col_idx: self.col_idx.clone(),
            values: self
                .values
                .iter()
                .map(|v| U::from_f64(v.to_f64()))
                .collect(),
        }
    }

    /// The same structure with other index type; an error when an index does not fit.
    pub fn with_index<J: SpIndex>(&self) -> Result<Csr<T, J>> {
        check_dimensions::<J>(self.rows, self.cols)?;
        let convert = |what: &str, v: &[I]| -> Result<Vec<J>> {
            v.iter()
                .map(|&x| {
                    J::try_from_usize(x.to_usize())
                        .ok_or_else(|| Error::overflow::<J>(what, x.to_usize()))
                })
                .collect()
        };
        Ok(Csr {
            rows: self.rows,
            cols: self.cols,
            row_ptr: convert("row pointer", &self.row_ptr)?,
            col_idx: convert("column index", &self.col_idx)?,
            values: self.values.clone(),
        })
    }

    /// Aᵀ in canonical CSR.
    pub fn transpose(&self) -> Result<Csr<T, I>> {
        let mut counts = vec![0usize; self.cols + 1];
        for &c in &self.col_idx {
            counts[c.to_usize() + 1] += 1;
        }
        for j in 0..self.cols {
            counts[j + 1] += counts[j];
        }
        let mut next = counts.clone();
        let mut col_idx = vec![I::default(); self.nnz()];
        let mut values = vec![T::default(); self.nnz()];
        for i in 0..self.rows {
            let r = I::try_from_usize(i)
                .ok_or_else(|| Error::overflow::<I>("column index of the transpose", i))?;
            for k in self.row_ptr[i].to_usize()..self.row_ptr[i + 1].to_usize() {
                let slot = &mut next[self.col_idx[k].to_usize()];
                col_idx[*slot] = r;
                values[*slot] = self.values[k];
                *slot += 1;
            }
        }
        let row_ptr = counts
            .iter()
            .map(|&p| I::try_from_usize(p).ok_or_else(|| Error::overflow::<I>("row pointer", p)))
            .collect::<Result<Vec<I>>>()?;
        // SAFETY: rows of the transpose are filled in increasing original-row order, so columns
        // strictly increase; counts are exact.
        Ok(unsafe { Csr::new_unchecked(self.cols, self.rows, row_ptr, col_idx, values) })
    }

    /// Row-length statistics.
    pub fn row_stats(&self) -> RowStats {
        self.as_ref().row_stats()
    }

    /// Whether A equals Aᵀ (same pattern and values).
    pub fn is_symmetric(&self) -> Result<bool> {
        Ok(self.rows == self.cols && self.transpose()? == *self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_new_hands_back_the_inputs() {
        let r = Csr::<f64>::try_new(2, 2, vec![0, 1, 2], vec![1, 1], vec![1.0, 2.0]);
        assert!(r.is_ok());
        let bad = Csr::<f64>::try_new(2, 2, vec![0, 2, 2], vec![1, 0], vec![1.0, 2.0]).unwrap_err();
        assert!(
            bad.to_string().contains("column 0 follows column 1"),
            "{bad}"
        );
        assert_eq!(bad.parts.1, vec![1, 0]);
    }

    #[test]
    fn from_unsorted_sorts_and_sums() {
        let a = Csr::<f64>::from_unsorted(
            2,
            3,
            vec![0, 3, 4],
            vec![2, 0, 2, 1],
            vec![1.0, 2.0, 3.0, 4.0],
        )
        .unwrap();
        assert_eq!(a.row_ptr(), &[0, 2, 3]);
        assert_eq!(a.col_idx(), &[0, 2, 1]);
        assert_eq!(a.values(), &[2.0, 4.0, 4.0]);
        assert!(
            Csr::<f64>::from_unsorted(2, 3, vec![0, 3, 2], vec![0, 1], vec![1.0, 1.0]).is_err()
        );
        assert!(Csr::<f64>::from_unsorted(1, 3, vec![0, 1], vec![3], vec![1.0]).is_err());
    }

    #[test]
    fn transpose_and_symmetry() {
        let a = Csr::<f64>::from_triplets(2, 3, &[(0, 1, 1.0), (1, 0, 2.0), (1, 2, 3.0)]).unwrap();
        let t = a.transpose().unwrap();
        assert_eq!(t.shape(), (3, 2));
        assert_eq!(t.to_coo().to_csr().unwrap(), t);
        assert_eq!(t.transpose().unwrap(), a);
        assert!(!a.is_symmetric().unwrap());
        assert!(Csr::<f32>::identity(4).unwrap().is_symmetric().unwrap());
    }

    #[test]
    fn row_stats_of_a_skewed_matrix() {
        let a = Csr::<f32>::from_triplets(
            4,
            4,
            &[
                (0, 0, 1.0),
                (0, 1, 1.0),
                (0, 2, 1.0),
                (0, 3, 1.0),
                (2, 2, 1.0),
            ],
        )
        .unwrap();
        let s = a.row_stats();
        assert_eq!((s.min, s.max, s.empty_rows), (0, 4, 2));
        assert!((s.mean - 1.25).abs() < 1e-12);
        assert!(s.cv > 1.0);
    }

    #[test]
    fn index_type_conversion_is_checked() {
        let a = Csr::<f32, usize>::from_triplets(3, 3, &[(2, 2, 1.0)]).unwrap();
        assert_eq!(a.with_index::<i32>().unwrap().col_idx(), &[2]);
    }
}
