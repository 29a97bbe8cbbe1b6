//! SpMV and SpMM for BSR, one task per block row. Entries are found through the occupancy
//! mask, so fill slots are never multiplied (a NaN or infinity of x or B in a column a row does
//! not hold cannot reach it), and each row's sum takes its entries block by block in column
//! order: the order of the CSR row, fixed whatever the threads. Each output row is written
//! once, by the task of its block row.

use rayon::prelude::*;
use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};
use sparse_formats::{Bsr, BSR_MAX_BLOCK};

use crate::kernels::{axpy_block, update, SpmmOperands, SpmvOperands};

/// `y = alpha*A*x + beta*y`. The caller has checked shapes and that `alpha != 0`.
pub(crate) fn spmv<T: Scalar>(
    a: &Bsr<T>,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    mut y: DenseMut<'_, T::Out>,
) -> Result<()> {
    let SpmvOperands { xs, incx, out } = SpmvOperands::open(&x, &mut y)?;
    let (r, c) = (a.block_shape().rows, a.block_shape().cols);
    let full_row = a.full_row_mask();
    (0..a.block_rows()).into_par_iter().for_each(|br| {
        let rows = br * r..a.rows().min((br + 1) * r);
        let mut sums = [T::Acc::ZERO; BSR_MAX_BLOCK];
        let sums = &mut sums[..rows.len()];
        for b in a.block_row_range(br) {
            let first_col = a.block_col()[b] as usize * c;
            let block = a.block_values(b);
            for (i, sum) in sums.iter_mut().enumerate() {
                let row_values = &block[i * c..(i + 1) * c];
                // SAFETY (both branches): a validated BSR sets mask bits only on slots inside
                // the matrix, so first_col + j < cols = x.rows() for every j read, and x spans
                // its rows.
                if a.row_mask(b, i) == full_row {
                    // A full block row: a dense dot product the compiler can unroll.
                    for (j, v) in row_values.iter().enumerate() {
                        let xv = unsafe { *xs.get_unchecked((first_col + j) * incx) };
                        *sum = sum.madd(v.to_acc(), xv.to_acc());
                    }
                } else {
                    for j in a.row_slots(b, i) {
                        let xv = unsafe { *xs.get_unchecked((first_col + j) * incx) };
                        *sum = sum.madd(row_values[j].to_acc(), xv.to_acc());
                    }
                }
            }
        }
        for (row, &sum) in rows.zip(sums.iter()) {
            // SAFETY: row < rows, and each row belongs to one block row, handled by one task.
            unsafe { out.write(row, 0, update(alpha, sum, beta, || out.read(row, 0))) };
        }
    });
    Ok(())
}

/// Columns of C computed together: a block row's sums (up to 16 rows of them) stay in L1.
const COLUMN_BLOCK: usize = 32;

/// `C = alpha*A*B + beta*C` for B and C in either layout and any leading dimension. For each
/// stretch of [`COLUMN_BLOCK`] columns, every entry of a block row adds one scaled stretch of a
/// B row to its row's sums. The caller has checked shapes and that `alpha != 0`.
pub(crate) fn spmm<T: Scalar>(
    a: &Bsr<T>,
    alpha: T::Acc,
    b: DenseRef<'_, T>,
    beta: T::Acc,
    mut c: DenseMut<'_, T::Out>,
) -> Result<()> {
    let n = b.cols();
    let SpmmOperands { bs, strides, out } = SpmmOperands::open(&b, &mut c)?;
    let (b_row, b_col) = strides;
    let (r, bc) = (a.block_shape().rows, a.block_shape().cols);
    (0..a.block_rows()).into_par_iter().for_each(|br| {
        let rows = br * r..a.rows().min((br + 1) * r);
        let mut acc = [T::Acc::ZERO; BSR_MAX_BLOCK * COLUMN_BLOCK];
        let acc = &mut acc[..rows.len() * COLUMN_BLOCK];
        for j0 in (0..n).step_by(COLUMN_BLOCK) {
            let width = COLUMN_BLOCK.min(n - j0);
            acc.fill(T::Acc::ZERO);
            for blk in a.block_row_range(br) {
                let first_col = a.block_col()[blk] as usize * bc;
                let block = a.block_values(blk);
                for (i, row_acc) in acc.chunks_exact_mut(COLUMN_BLOCK).enumerate() {
                    let row_acc = &mut row_acc[..width];
                    for j in a.row_slots(blk, i) {
                        let v = block[i * bc + j].to_acc();
                        let first = (first_col + j) * b_row + j0 * b_col;
                        // SAFETY: mask bits lie inside the matrix, so first_col + j < b.rows(),
                        // and j0 + width <= n: every element read lies within B's span, which
                        // the DenseRef checked against its memory.
                        unsafe {
                            if b_col == 1 {
                                axpy_block::<T>(row_acc, v, bs.get_unchecked(first..), 1);
                            } else {
                                axpy_block::<T>(row_acc, v, bs.get_unchecked(first..), b_col);
                            }
                        }
                    }
                }
            }
            for (row, row_acc) in rows.clone().zip(acc.chunks_exact(COLUMN_BLOCK)) {
                for (t, &sum) in row_acc[..width].iter().enumerate() {
                    // SAFETY: row belongs to this block row, handled by this task alone.
                    unsafe {
                        out.write(
                            row,
                            j0 + t,
                            update(alpha, sum, beta, || out.read(row, j0 + t)),
                        )
                    };
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::ell::tests::{check_spmv_every_precision, matrices};
    use sparse_core::{bf16, f16, Dense, Layout, MemoryMut};
    use sparse_formats::{Csr, FillLimit, BSR_BLOCK_SIZES};

    fn block_shapes() -> impl Iterator<Item = (usize, usize)> {
        BSR_BLOCK_SIZES
            .into_iter()
            .flat_map(|r| BSR_BLOCK_SIZES.map(|c| (r, c)))
    }

    fn bsr<T: Scalar>(a: &Csr<T>, (r, c): (usize, usize)) -> Result<Bsr<T>> {
        Bsr::from_csr(a.as_ref(), r, c, FillLimit::UNLIMITED)
    }

    #[test]
    fn spmv_matches_the_reference_for_every_block_shape() {
        for shape in block_shapes() {
            for a in matrices() {
                check_spmv_every_precision!(&a, |m| bsr(m, shape), spmv);
            }
        }
    }

    /// A dense operand in `layout` with `pad` extra elements per leading dimension, the gaps
    /// NaN (0 for integers) so that reading them shows.
    fn padded<T: Scalar>(
        (rows, cols): (usize, usize),
        layout: Layout,
        pad: usize,
        value: impl Fn(usize, usize) -> f64,
    ) -> Dense<T> {
        let ld = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        }
        .max(1)
            + pad;
        let outer = match layout {
            Layout::RowMajor => rows,
            Layout::ColMajor => cols,
        };
        let mut data = vec![T::from_f64(f64::NAN); outer * ld];
        for i in 0..rows {
            for j in 0..cols {
                let at = match layout {
                    Layout::RowMajor => i * ld + j,
                    Layout::ColMajor => i + j * ld,
                };
                data[at] = T::from_f64(value(i, j));
            }
        }
        Dense::from_vec(data, rows, cols, ld, layout).unwrap()
    }

    /// SpMM against the reference, rounded to the output type: exact on small integers.
    fn check_spmm<T: Scalar>(
        a: &Csr<f64>,
        shape: (usize, usize),
        n: usize,
        (b_layout, c_layout): (Layout, Layout),
        (alpha, beta): (f64, f64),
    ) {
        let a: Csr<T> = a.cast();
        let m = bsr(&a, shape).unwrap();
        let b = padded::<T>((a.cols(), n), b_layout, 3, |i, j| {
            ((i + 2 * j) % 5) as f64 - 2.0
        });
        let mut c = padded::<T::Out>((a.rows(), n), c_layout, 2, |i, j| {
            if beta == 0.0 {
                f64::NAN
            } else {
                ((i * 3 + j) % 7) as f64
            }
        });
        let expected =
            crate::reference::spmm(a.as_ref(), alpha, b.as_ref(), beta, Some(c.as_ref())).unwrap();
        spmm(
            &m,
            Accumulator::from_f64(alpha),
            b.as_ref(),
            Accumulator::from_f64(beta),
            c.as_mut(),
        )
        .unwrap();
        for i in 0..a.rows() {
            for j in 0..n {
                let want = <T::Out as Scalar>::from_f64(expected.at(i, j)).to_f64();
                assert_eq!(
                    c.at(i, j).to_f64(),
                    want,
                    "{} {m:?} at ({i}, {j}), n {n}, B {b_layout}, C {c_layout}",
                    T::DTYPE
                );
            }
        }
    }

    #[test]
    fn spmm_matches_the_reference_for_both_layouts_and_any_n() {
        let layouts = [Layout::RowMajor, Layout::ColMajor];
        for a in matrices() {
            for shape in [(1, 1), (2, 8), (4, 4), (16, 2), (8, 16)] {
                for n in [1, 7, 32, 45] {
                    for b_layout in layouts {
                        for c_layout in layouts {
                            let l = (b_layout, c_layout);
                            check_spmm::<f64>(&a, shape, n, l, (2.0, 0.0));
                            check_spmm::<f64>(&a, shape, n, l, (-1.0, 2.0));
                        }
                    }
                }
            }
            let l = (Layout::RowMajor, Layout::ColMajor);
            check_spmm::<f32>(&a, (4, 2), 33, l, (1.0, -1.0));
            check_spmm::<f16>(&a, (2, 4), 9, l, (1.0, 0.0));
            check_spmm::<bf16>(&a, (8, 8), 40, l, (2.0, 1.0));
            check_spmm::<i8>(&a, (16, 16), 70, l, (3.0, -2.0));
        }
    }

    #[test]
    fn spmm_with_no_columns_writes_nothing() {
        let a = &matrices()[0];
        check_spmm::<f64>(
            a,
            (4, 4),
            0,
            (Layout::RowMajor, Layout::RowMajor),
            (1.0, 0.0),
        );
    }

    #[test]
    fn fill_is_never_multiplied() {
        // Columns 3 and 6 hold no entry but share blocks with entries: a NaN of x or B there
        // may reach no row.
        let triplets: Vec<_> = (0..10)
            .flat_map(|r| [(r, r % 3, 1.0), (r, 4 + r % 2, 2.0), (r, 7, -1.0)])
            .collect();
        let a = Csr::<f64>::from_triplets(10, 8, &triplets).unwrap();
        let poison = |j: usize| if j == 3 || j == 6 { f64::NAN } else { 1.0 };
        for shape in block_shapes() {
            let m = bsr(&a, shape).unwrap();
            let x: Vec<f64> = (0..8).map(poison).collect();
            let mut y = vec![0.0; 10];
            spmv(&m, 1.0, DenseRef::vector(&x), 0.0, DenseMut::vector(&mut y)).unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "{m:?}");
            let b = Dense::from_fn(8, 5, Layout::RowMajor, |i, _| poison(i));
            let mut c = vec![0.0; 50];
            let c_view = DenseMut::try_new(MemoryMut::Host(&mut c), 10, 5, 5, Layout::RowMajor);
            spmm(&m, 1.0, b.as_ref(), 0.0, c_view.unwrap()).unwrap();
            assert!(c.iter().all(|v| v.is_finite()), "{m:?}");
        }
    }
}
