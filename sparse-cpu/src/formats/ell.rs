//! SpMV for ELL, parallel over blocks of rows. A block walks the column-major slabs in order,
//! so each slab's slots for the block are contiguous; a row's sum takes its entries in column
//! order and stops at its padding, and the block stops at the first slab that is padding in all
//! its rows. The leading slabs with no padding in the block are summed without looking at each
//! slot's column for the marker, four at a time per row. Each row is written once by the task of its block: results are
//! bit-identical from run to run.

use std::ops::Range;

use rayon::prelude::*;
use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};
use sparse_formats::Ell;

use crate::kernels::{update, SpmvOperands};

/// Rows summed together by one task: their sums stay in registers or L1.
pub(crate) const ROW_BLOCK: usize = 64;
/// Slabs without padding whose sums a row keeps in a register before storing it.
const SLABS: usize = 4;

/// `y = alpha*A*x + beta*y`. The caller has checked shapes and that `alpha != 0`.
pub(crate) fn spmv<T: Scalar>(
    a: &Ell<T>,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    y: DenseMut<'_, T::Out>,
) -> Result<()> {
    spmv_then(a, alpha, x, beta, y, |_, _| {})
}

/// ELL SpMV where `rest(rows, sums)` adds more to a block's row sums (in a fixed order) after
/// the ELL part and before each row's single write: HYB adds its COO part this way.
pub(crate) fn spmv_then<T: Scalar>(
    a: &Ell<T>,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    mut y: DenseMut<'_, T::Out>,
    rest: impl Fn(Range<usize>, &mut [T::Acc]) + Sync,
) -> Result<()> {
    let SpmvOperands { xs, incx, out } = SpmvOperands::open(&x, &mut y)?;
    let rows = a.rows();
    (0..rows.div_ceil(ROW_BLOCK))
        .into_par_iter()
        .for_each(|block| {
            let first = block * ROW_BLOCK;
            let block_rows = first..rows.min(first + ROW_BLOCK);
            let mut sums = [T::Acc::ZERO; ROW_BLOCK];
            let sums = &mut sums[..block_rows.len()];
            let slab = |k: usize| {
                let range = a.slot(block_rows.start, k)..a.slot(block_rows.end, k);
                (&a.col_idx()[range.clone()], &a.values()[range])
            };
            // A fold rather than a search, so that the scan is vectorised.
            let padded = |cols: &[u32]| {
                cols.iter()
                    .fold(false, |p, &col| p | (col == Ell::<T>::PADDING))
            };
            let full = (0..a.width())
                .position(|k| padded(slab(k).0))
                .unwrap_or(a.width());
            // The slabs without padding in the block, SLABS at a time: each row's sum stays in
            // a register over them, rather than going to memory after every slab.
            let mut k = 0;
            while k + SLABS <= full {
                let group: [_; SLABS] = std::array::from_fn(|j| slab(k + j));
                for (r, sum) in sums.iter_mut().enumerate() {
                    for (cols, values) in &group {
                        // SAFETY: r is below the block's rows, each slab's length; a validated
                        // ELL holds real columns < cols = x.rows(), and x spans its rows.
                        let (col, v) =
                            unsafe { (*cols.get_unchecked(r), *values.get_unchecked(r)) };
                        let xv = unsafe { *xs.get_unchecked(col as usize * incx) };
                        *sum = sum.madd(v.to_acc(), xv.to_acc());
                    }
                }
                k += SLABS;
            }
            for k in k..a.width() {
                let (cols, values) = slab(k);
                // SAFETY (both loops): as above.
                if k < full {
                    for ((sum, &col), &v) in sums.iter_mut().zip(cols).zip(values) {
                        let xv = unsafe { *xs.get_unchecked(col as usize * incx) };
                        *sum = sum.madd(v.to_acc(), xv.to_acc());
                    }
                    continue;
                }
                let mut any_entry = false;
                for ((sum, &col), &v) in sums.iter_mut().zip(cols).zip(values) {
                    if col != Ell::<T>::PADDING {
                        any_entry = true;
                        let xv = unsafe { *xs.get_unchecked(col as usize * incx) };
                        *sum = sum.madd(v.to_acc(), xv.to_acc());
                    }
                }
                // Padding only ends rows: a slab that is all padding here stays so after.
                if !any_entry {
                    break;
                }
            }
            rest(block_rows.clone(), sums);
            for (row, &sum) in block_rows.zip(sums.iter()) {
                // SAFETY: row < rows, and each row belongs to one block, handled by one task.
                unsafe { out.write(row, 0, update(alpha, sum, beta, || out.read(row, 0))) };
            }
        });
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sparse_core::{Dense, Layout, Memory};
    use sparse_formats::{generate, Csr, FillLimit};

    /// Integer-valued matrices with the awkward features: sizes that are not multiples of the
    /// row block, of any block size or of a Tiled16 tile, empty rows and tiles, one very long
    /// row, explicit zeros, dense stretches, empty shapes.
    pub(crate) fn matrices() -> Vec<Csr<f64>> {
        let integral = |mut a: Csr<f64>| {
            for (k, v) in a.values_mut().iter_mut().enumerate() {
                *v = ((k * 7) % 9) as f64 - 4.0;
            }
            a
        };
        let mut long_row: Vec<_> = (0..500).map(|c| (66, c, (c % 5) as f64 - 2.0)).collect();
        long_row.extend((0..130).step_by(3).map(|r| (r, (r * 11) % 500, 3.0)));
        let blocks: Vec<_> = (0..45)
            .flat_map(|r| (0..37).map(move |c| (r, c)))
            .filter(|&(r, c)| (r / 4 + c / 9) % 2 == 0 || r == 40)
            .map(|(r, c)| (r, c, ((r + c) % 4) as f64))
            .collect();
        vec![
            integral(generate::uniform::<f64, u32>(203, 61, 6, 11).unwrap()),
            integral(generate::rmat::<f64, u32>(8, 5, 2).unwrap()),
            generate::poisson2d::<f64, u32>(11).unwrap(),
            Csr::from_triplets(130, 500, &long_row).unwrap(),
            Csr::from_triplets(45, 37, &blocks).unwrap(),
            Csr::zeros(0, 0),
            Csr::zeros(9, 0),
            Csr::zeros(0, 9),
            Csr::zeros(70, 35),
        ]
    }

    /// Runs `kernel` on `a` in precision `T` with y starting at `y0`, and checks the result
    /// against the reference on the same CSR, rounded to the output type: exact, since the
    /// inputs are small integers whose sums every accumulator holds exactly.
    pub(crate) fn check_spmv<T: Scalar>(
        a: &Csr<f64>,
        (alpha, beta): (f64, f64),
        y0: impl Fn(usize) -> f64,
        kernel: impl Fn(&Csr<T>, T::Acc, DenseRef<'_, T>, T::Acc, DenseMut<'_, T::Out>) -> Result<()>,
    ) {
        let a: Csr<T> = a.cast();
        // x read with stride 2 (a row-major n x 1 matrix with ld 2), its gaps NaN.
        let data: Vec<T> = (0..2 * a.cols())
            .map(|k| {
                T::from_f64(if k % 2 == 0 {
                    ((k / 2) % 5) as f64 - 2.0
                } else {
                    f64::NAN
                })
            })
            .collect();
        let x = DenseRef::try_new(Memory::Host(&data), a.cols(), 1, 2, Layout::RowMajor).unwrap();
        let mut y = Dense::from_fn(a.rows(), 1, Layout::ColMajor, |i, _| {
            <T::Out as Scalar>::from_f64(y0(i))
        });
        let expected =
            crate::reference::spmv(a.as_ref(), alpha, x, beta, Some(y.as_ref())).unwrap();
        kernel(
            &a,
            Accumulator::from_f64(alpha),
            x,
            Accumulator::from_f64(beta),
            y.as_mut(),
        )
        .unwrap();
        let got: Vec<f64> = y
            .into_host_vec()
            .unwrap()
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let expected: Vec<f64> = expected
            .iter()
            .map(|&v| <T::Out as Scalar>::from_f64(v).to_f64())
            .collect();
        assert_eq!(got, expected, "{} {}x{}", T::DTYPE, a.rows(), a.cols());
    }

    /// Runs [`check_spmv`] in every precision on `$kernel` applied to the format `$convert`
    /// makes from the CSR `$m`, with beta = 0 over a NaN output (never read) and beta != 0.
    macro_rules! check_spmv_every_precision {
        ($a:expr, |$m:ident| $convert:expr, $kernel:path) => {{
            use sparse_core::{bf16, f16};
            use $crate::formats::ell::tests::check_spmv;
            let a = $a;
            macro_rules! run {
                ($t:ty, $ab:expr, $y0:expr) => {
                    check_spmv::<$t>(a, $ab, $y0, |$m, alpha, x, beta, y| {
                        $kernel(&$convert?, alpha, x, beta, y)
                    })
                };
            }
            run!(f64, (2.0, 0.0), |_| f64::NAN);
            run!(f64, (-1.0, 3.0), |i| i as f64);
            run!(f32, (2.0, -1.0), |i| (i % 3) as f64);
            run!(f16, (1.0, 0.0), |_| f64::NAN);
            run!(bf16, (1.0, 1.0), |i| (i % 4) as f64);
            run!(i8, (3.0, -2.0), |i| i as f64);
        }};
    }
    pub(crate) use check_spmv_every_precision;

    #[test]
    fn matches_the_reference_in_every_precision() {
        for a in matrices() {
            check_spmv_every_precision!(
                &a,
                |m| Ell::from_csr(m.as_ref(), FillLimit::UNLIMITED),
                spmv
            );
        }
    }

    #[test]
    fn a_hand_built_ell_with_extra_padding() {
        let p = Ell::<f64>::PADDING;
        let parts = sparse_formats::EllParts {
            col_idx: vec![1, p, 0, 2, p, p, p, p, p],
            values: vec![3.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        };
        let m = Ell::try_new(3, 3, 3, parts).unwrap();
        let x = [1.0, 10.0, 100.0];
        let mut y = [f64::NAN; 3];
        spmv(&m, 1.0, DenseRef::vector(&x), 0.0, DenseMut::vector(&mut y)).unwrap();
        assert_eq!(y, [130.0, 0.0, 2.0]);
    }
}
