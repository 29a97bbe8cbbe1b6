//! SpMV for row-sorted COO: the rows are cut at plan time into parts of about equal entries;
//! each part walks its entries once and writes each of its rows once.

use rayon::prelude::*;
use sparse_core::{Accumulator, CsrRef, DenseMut, DenseRef, Result, Scalar, SpIndex};
use sparse_formats::Coo;

use crate::kernels::{update, SpmvOperands};
use crate::partition::balanced_rows;

/// Where a part starts: its first row and its first entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CooPart {
    row: usize,
    entry: usize,
}

/// The starts of the parts of [`crate::partition::balanced_rows`] for the COO form of `a`
/// (same rows, same entry order), plus the end (rows, nnz).
pub(crate) fn partition<T, I: SpIndex>(a: CsrRef<'_, T, I>, parts: usize) -> Vec<CooPart> {
    balanced_rows(a, parts)
        .into_iter()
        .map(|row| CooPart {
            row,
            entry: a.row_ptr()[row].to_usize(),
        })
        .collect()
}

/// `y = alpha*A*x + beta*y` for a row-sorted `a` over the parts of [`partition`].
pub(crate) fn spmv<T: Scalar>(
    a: &Coo<T, u32>,
    parts: &[CooPart],
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    mut y: DenseMut<'_, T::Out>,
) -> Result<()> {
    let SpmvOperands { xs, incx, out } = SpmvOperands::open(&x, &mut y)?;
    let (row_idx, col_idx, values) = (a.row_idx(), a.col_idx(), a.values());
    parts.par_windows(2).for_each(|w| {
        let mut e = w[0].entry;
        for row in w[0].row..w[1].row {
            let mut sum = T::Acc::ZERO;
            while e < w[1].entry && row_idx[e].to_usize() == row {
                // SAFETY: a validated COO holds columns < cols = x.rows(), and x spans its rows.
                let xv = unsafe { *xs.get_unchecked(col_idx[e].to_usize() * incx) };
                sum = sum.madd(values[e].to_acc(), xv.to_acc());
                e += 1;
            }
            // SAFETY: row < rows, and the parts cover disjoint row ranges.
            unsafe { out.write(row, 0, update(alpha, sum, beta, || out.read(row, 0))) };
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_core::{Dense, Layout};
    use sparse_formats::{generate, Csr};

    fn check(a: &Csr<f64>, parts: usize) {
        let coo = a.to_coo();
        let starts = partition(a.as_ref(), parts);
        assert_eq!(starts[0], CooPart { row: 0, entry: 0 });
        assert_eq!(
            *starts.last().unwrap(),
            CooPart {
                row: a.rows(),
                entry: a.nnz()
            }
        );
        let x = Dense::from_fn(a.cols(), 1, Layout::ColMajor, |i, _| (i % 7) as f64 - 3.0);
        let mut y = Dense::from_fn(a.rows(), 1, Layout::ColMajor, |i, _| i as f64);
        let expected =
            crate::reference::spmv(a.as_ref(), 2.0, x.as_ref(), -1.0, Some(y.as_ref())).unwrap();
        spmv(&coo, &starts, 2.0, x.as_ref(), -1.0, y.as_mut()).unwrap();
        assert_eq!(y.into_host_vec().unwrap(), expected);
    }

    #[test]
    fn matches_the_reference_for_any_part_count() {
        let a = generate::uniform::<f64, u32>(300, 200, 4, 3).unwrap();
        for parts in [1, 2, 3, 7, 64, 1000] {
            check(&a, parts);
        }
        check(&Csr::zeros(5, 3), 4);
        check(&Csr::zeros(0, 0), 2);
    }
}
