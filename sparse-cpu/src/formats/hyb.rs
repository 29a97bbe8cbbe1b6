//! SpMV for HYB: the ELL part's row blocks as in [`super::ell`]; then, before each row's single
//! write, the block adds its rows' COO entries. The COO part is sorted by row, so a block's
//! entries are one run, found by binary search, and each row's entries are added in column
//! order after its ELL entries: the same order as the CSR row, fixed whatever the threads.

use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};
use sparse_formats::Hyb;

use crate::formats::ell;
use crate::kernels::strides;

/// `y = alpha*A*x + beta*y`. The caller has checked shapes and that `alpha != 0`.
pub(crate) fn spmv<T: Scalar>(
    a: &Hyb<T>,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    y: DenseMut<'_, T::Out>,
) -> Result<()> {
    let xs = x.host("spmv x")?;
    let incx = strides(&x).0;
    let (coo_rows, coo_cols, coo_values) = (a.coo_rows(), a.coo_cols(), a.coo_values());
    ell::spmv_then(a.ell(), alpha, x, beta, y, |rows, sums| {
        for e in a.coo_range(rows.clone()) {
            // SAFETY: a validated HYB holds COO columns < cols = x.rows(), and x spans its rows.
            let xv = unsafe { *xs.get_unchecked(coo_cols[e] as usize * incx) };
            let sum = &mut sums[coo_rows[e] as usize - rows.start];
            *sum = sum.madd(coo_values[e].to_acc(), xv.to_acc());
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::ell::tests::{check_spmv_every_precision, matrices};
    use sparse_formats::{FillLimit, HybWidth};

    fn policies() -> [HybWidth; 5] {
        [
            HybWidth::MinBytes,
            HybWidth::Fixed(0),
            HybWidth::Fixed(2),
            HybWidth::Percentile(50.0),
            HybWidth::Percentile(100.0),
        ]
    }

    #[test]
    fn matches_the_reference_under_every_policy() {
        for policy in policies() {
            for a in matrices() {
                check_spmv_every_precision!(
                    &a,
                    |m| Hyb::from_csr(m.as_ref(), policy, FillLimit::UNLIMITED),
                    spmv
                );
            }
        }
    }
}
