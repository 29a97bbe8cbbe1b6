//! Conversions between CSR and dense matrices.

use sparse_core::{Dense, DenseRef, Error, Layout, Result, Scalar, SpIndex};

use crate::csr::Csr;

/// The entries of `a` that are not zero, in canonical CSR (host memory only).
pub fn csr_from_dense<T: Scalar, I: SpIndex>(a: DenseRef<'_, T>) -> Result<Csr<T, I>> {
    sparse_core::check_dimensions::<I>(a.rows(), a.cols())?;
    let data = a.host("csr_from_dense")?;
    let zero = T::default();
    let mut row_ptr = Vec::with_capacity(a.rows() + 1);
    let mut col_idx = Vec::new();
    let mut values = Vec::new();
    row_ptr.push(I::default());
    for i in 0..a.rows() {
        for j in 0..a.cols() {
            let v = data[a.offset(i, j)];
            if v != zero {
                // Fits: the dimensions are representable in I (checked above).
                col_idx.push(I::try_from_usize(j).unwrap_or_default());
                values.push(v);
            }
        }
        let n = values.len();
        row_ptr.push(
            I::try_from_usize(n).ok_or_else(|| Error::overflow::<I>("number of entries", n))?,
        );
    }
    // SAFETY: rows are scanned in order, columns increase within a row and are < cols.
    Ok(unsafe { Csr::new_unchecked(a.rows(), a.cols(), row_ptr, col_idx, values) })
}

/// `a` as a dense host matrix in `layout` (absent entries are zero).
pub fn dense_from_csr<T: Scalar, I: SpIndex>(a: &Csr<T, I>, layout: Layout) -> Dense<T> {
    let mut d = Dense::zeros(a.rows(), a.cols(), layout);
    let mut view = d.as_mut();
    let (ld, rm) = (view.ld(), layout == Layout::RowMajor);
    if let Ok(data) = view.host("dense_from_csr") {
        let csr = a.as_ref();
        for i in 0..a.rows() {
            let (cols, vals) = csr.row(i);
            for (&c, &v) in cols.iter().zip(vals) {
                let j = c.to_usize();
                data[if rm { i * ld + j } else { i + j * ld }] = v;
            }
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_round_trip_in_both_layouts() {
        let a = Csr::<f64>::from_triplets(3, 4, &[(0, 3, 1.0), (2, 0, -2.0), (2, 2, 5.0)]).unwrap();
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let d = dense_from_csr(&a, layout);
            assert_eq!(d.at(2, 2), 5.0);
            assert_eq!(csr_from_dense::<f64, u32>(d.as_ref()).unwrap(), a);
        }
    }
}
