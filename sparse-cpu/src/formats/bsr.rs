//! SpMV and SpMM for BSR. SpMV runs over ranges of block rows holding about equal numbers of
//! stored slots, with kernels of their own for the square block shapes; SpMM runs one task per
//! block row. Entries are found through the
//! occupancy mask, so fill slots are never multiplied (a NaN or infinity of x or B in a column a
//! row does not hold cannot reach it): SpMV checks a block's whole mask once and runs a dense
//! r x c product only on a block every slot of which holds an entry, and otherwise visits each
//! block row's set bits.
//!
//! SpMV's order of summation: each row keeps `min(c, 4)` partial sums ([`LANES`]), independent
//! chains of additions. An entry at in-block column j goes to partial sum `j mod 4` when its
//! block row (the block's slots in that row) is full, and to partial sum 0 otherwise; each
//! partial sum takes its entries block by block in column order, and the row's sum is
//! `(p0 + p1) + (p2 + p3)`. The order depends on the matrix alone, not on the threads. SpMM
//! takes each row's entries in column order, the order of the CSR row. Each output row is
//! written once, by the task of its block row.

use std::ops::Range;

use rayon::prelude::*;
use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};
use sparse_formats::{Bsr, BSR_MAX_BLOCK};

use crate::kernels::{axpy_block, update, SpmmOperands, SpmvOperands};
use crate::partition::{balanced_ranges, part_count};

/// A block shape known at compile time ([`Fixed`]) or only at run time ([`Runtime`]). The SpMV
/// kernel is written once over it; with a fixed shape its block loops have constant trip counts
/// the compiler unrolls and keeps in registers.
trait Shape: Copy + Send + Sync {
    fn rows(self) -> usize;
    fn cols(self) -> usize;
}

#[derive(Clone, Copy)]
struct Fixed<const R: usize, const C: usize>;

impl<const R: usize, const C: usize> Shape for Fixed<R, C> {
    #[inline(always)]
    fn rows(self) -> usize {
        R
    }
    #[inline(always)]
    fn cols(self) -> usize {
        C
    }
}

#[derive(Clone, Copy)]
struct Runtime {
    rows: usize,
    cols: usize,
}

impl Shape for Runtime {
    #[inline(always)]
    fn rows(self) -> usize {
        self.rows
    }
    #[inline(always)]
    fn cols(self) -> usize {
        self.cols
    }
}

/// `y = alpha*A*x + beta*y`. The caller has checked shapes and that `alpha != 0`.
pub(crate) fn spmv<T: Scalar>(
    a: &Bsr<T>,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    mut y: DenseMut<'_, T::Out>,
) -> Result<()> {
    let operands = SpmvOperands::open(&x, &mut y)?;
    let (r, c) = (a.block_shape().rows, a.block_shape().cols);
    let block_ptr = a.block_row_ptr();
    let parts = part_count(a.values().len() + a.rows());
    let bounds = balanced_ranges(a.block_rows(), parts, |br| {
        block_ptr[br] as usize * r * c + br * r
    });
    bounds.par_windows(2).for_each(|w| {
        let (run, rows) = ((a, &operands, alpha, beta), w[0]..w[1]);
        // The square shapes get kernels of their own; the others share the run-time one.
        match (r, c) {
            (1, 1) => spmv_block_rows(run, Fixed::<1, 1>, rows),
            (2, 2) => spmv_block_rows(run, Fixed::<2, 2>, rows),
            (4, 4) => spmv_block_rows(run, Fixed::<4, 4>, rows),
            (8, 8) => spmv_block_rows(run, Fixed::<8, 8>, rows),
            (16, 16) => spmv_block_rows(run, Fixed::<16, 16>, rows),
            _ => spmv_block_rows(run, Runtime { rows: r, cols: c }, rows),
        }
    });
    Ok(())
}

/// What every task of [`spmv`] shares: the matrix, the operands, alpha and beta.
type SpmvRun<'a, 'x, 'y, T> = (
    &'a Bsr<T>,
    &'a SpmvOperands<'x, 'y, T>,
    <T as Scalar>::Acc,
    <T as Scalar>::Acc,
);

/// [`spmv`] on the block rows `block_rows` of a matrix whose blocks are `shape`. Everything
/// derived from the shape is computed here, inside the task, so that a fixed shape's loop
/// bounds are constants to the compiler.
#[inline(always)]
fn spmv_block_rows<T: Scalar, S: Shape>(
    (a, &SpmvOperands { xs, incx, ref out }, alpha, beta): SpmvRun<'_, '_, '_, T>,
    shape: S,
    block_rows: Range<usize>,
) {
    let (r, c) = (shape.rows(), shape.cols());
    let slots = r * c;
    let words = slots.div_ceil(64);
    // r and c are powers of two, so a block of 64 or more slots fills all its words.
    let full_word = if slots >= 64 {
        u64::MAX
    } else {
        (1 << slots) - 1
    };
    let full_row = u64::MAX >> (64 - c);
    let lanes = c.min(LANES);
    let (block_ptr, block_col, values, mask) =
        (a.block_row_ptr(), a.block_col(), a.values(), a.mask());
    for br in block_rows {
        let mut acc = [[T::Acc::ZERO; LANES]; BSR_MAX_BLOCK];
        let acc = &mut acc[..r];
        for b in block_ptr[br] as usize..block_ptr[br + 1] as usize {
            let first_col = block_col[b] as usize * c;
            let block = &values[b * slots..(b + 1) * slots];
            let block_mask = &mask[b * words..(b + 1) * words];
            // SAFETY (every read of xs below): a validated BSR sets mask bits only on slots
            // inside the matrix, so first_col + j < cols = x.rows() for every j read (a full
            // block lies wholly inside), and x spans its rows.
            if block_mask.iter().all(|&m| m == full_word) {
                // Each x element converted once for the block's r rows.
                let mut xb = [T::Acc::ZERO; BSR_MAX_BLOCK];
                for (j, xv) in xb[..c].iter_mut().enumerate() {
                    *xv = unsafe { xs.get_unchecked((first_col + j) * incx) }.to_acc();
                }
                for (row_acc, row_values) in acc.iter_mut().zip(block.chunks_exact(c)) {
                    for (j, (v, &xv)) in row_values.iter().zip(&xb[..c]).enumerate() {
                        let lane = &mut row_acc[j % lanes];
                        *lane = lane.madd(v.to_acc(), xv);
                    }
                }
                continue;
            }
            for (i, (row_acc, row_values)) in acc.iter_mut().zip(block.chunks_exact(c)).enumerate()
            {
                let first = i * c;
                let mut bits = (block_mask[first / 64] >> (first % 64)) & full_row;
                if bits == full_row {
                    for (j, v) in row_values.iter().enumerate() {
                        let xv = unsafe { *xs.get_unchecked((first_col + j) * incx) };
                        let lane = &mut row_acc[j % lanes];
                        *lane = lane.madd(v.to_acc(), xv.to_acc());
                    }
                } else {
                    // Into lane 0 alone: a lane picked by the walk's run-time j would keep the
                    // block row's partial sums out of registers.
                    let lane = &mut row_acc[0];
                    while bits != 0 {
                        let j = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let xv = unsafe { *xs.get_unchecked((first_col + j) * incx) };
                        *lane = lane.madd(row_values[j].to_acc(), xv.to_acc());
                    }
                }
            }
        }
        let rows = br * r..a.rows().min((br + 1) * r);
        for (row, row_acc) in rows.zip(acc.iter()) {
            let sum = fold_lanes(&row_acc[..lanes]);
            // SAFETY: row < rows, and each row belongs to one block row, handled by one
            // task.
            unsafe { out.write(row, 0, update(alpha, sum, beta, || out.read(row, 0))) };
        }
    }
}

/// Partial sums kept per row by SpMV: independent chains of additions, so that a row's
/// additions do not each wait for the one before.
const LANES: usize = 4;

/// The lanes of one row added pairwise: `(l0 + l1) + (l2 + l3)` for four, `l0 + l1` for two.
#[inline(always)]
fn fold_lanes<A: Accumulator>(lanes: &[A]) -> A {
    match *lanes {
        [l0] => l0,
        [l0, l1] => l0 + l1,
        [l0, l1, l2, l3] => (l0 + l1) + (l2 + l3),
        _ => unreachable!("lanes are min(c, LANES), and c is a power of two"),
    }
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

    #[test]
    fn spmv_over_several_parts_matches_the_reference() {
        // Enough stored slots for the block rows to be split into several ranges, with full,
        // partial and ragged blocks, each shape with a kernel of its own and one without.
        let a = sparse_formats::generate::poisson2d::<f64, u32>(150).unwrap();
        for shape in [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16), (2, 8)] {
            let m = bsr(&a, shape).unwrap();
            assert!(crate::partition::part_count(m.values().len() + m.rows()) > 1);
            check_spmv_every_precision!(&a, |m| bsr(m, shape), spmv);
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
