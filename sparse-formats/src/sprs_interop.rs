//! Conversions to and from `sprs` matrices.

use sparse_core::{Result, Scalar, SpIndex};
use sprs::{CsMat, CsMatView};

use crate::csr::Csr;

impl<T: Scalar, I: SpIndex> Csr<T, I> {
    /// A `sprs` CSR matrix with the same entries.
    pub fn to_sprs(&self) -> CsMat<T> {
        let a = self.as_ref();
        let indptr = a.row_ptr().iter().map(|p| p.to_usize()).collect();
        let indices = a.col_idx().iter().map(|c| c.to_usize()).collect();
        CsMat::new(
            (self.rows(), self.cols()),
            indptr,
            indices,
            self.values().to_vec(),
        )
    }

    /// Converts a `sprs` matrix, CSR or CSC; duplicates are summed and rows sorted.
    pub fn from_sprs(m: CsMatView<'_, T>) -> Result<Self> {
        let csr_storage;
        let m = if m.is_csr() {
            m
        } else {
            csr_storage = m.to_other_storage();
            csr_storage.view()
        };
        let (rows, cols) = m.shape();
        let convert = |what: &str, v: usize| {
            I::try_from_usize(v).ok_or_else(|| sparse_core::Error::overflow::<I>(what, v))
        };
        let row_ptr = m
            .indptr()
            .to_proper()
            .iter()
            .map(|&p| convert("row pointer", p))
            .collect::<Result<Vec<I>>>()?;
        let col_idx = m
            .indices()
            .iter()
            .map(|&c| convert("column index", c))
            .collect::<Result<Vec<I>>>()?;
        Csr::from_unsorted(rows, cols, row_ptr, col_idx, m.data().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_through_sprs_csr_and_csc() {
        let a = Csr::<f64>::from_triplets(3, 2, &[(0, 1, 1.0), (2, 0, 2.0), (2, 1, 3.0)]).unwrap();
        let s = a.to_sprs();
        assert_eq!(s.nnz(), 3);
        assert_eq!(Csr::<f64>::from_sprs(s.view()).unwrap(), a);
        let csc = s.to_csc();
        assert_eq!(Csr::<f64>::from_sprs(csc.view()).unwrap(), a);
    }
}
