//! SpMV for Tiled16: one task per tile row. A task sums its (up to) 16 rows over the tile row's
//! tiles in tile order, each tile's entries in the order of its tile format, then adds each
//! row's deferred entries in column order and writes every row once. The order is fixed, so
//! results are bit-identical from run to run whatever the number of threads.

use rayon::prelude::*;
use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};
use sparse_formats::{Tiled16, TILED16_TILE as TILE};

use crate::kernels::{update, SpmvOperands};

/// `y = alpha*A*x + beta*y`. The caller has checked shapes and that `alpha != 0`.
pub(crate) fn spmv<T: Scalar>(
    a: &Tiled16<T>,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    mut y: DenseMut<'_, T::Out>,
) -> Result<()> {
    let SpmvOperands { xs, incx, out } = SpmvOperands::open(&x, &mut y)?;
    let deferred = a.deferred().map(|d| d.as_ref());
    (0..a.tile_rows()).into_par_iter().for_each(|tr| {
        let mut sums = [T::Acc::ZERO; TILE];
        for tile in a.tile_row(tr) {
            let first_col = tile.first_col();
            tile.for_each_entry(|r, c, v| {
                // SAFETY: a validated Tiled16 keeps every in-tile column below the tile's width,
                // so first_col + c < cols = x.rows(), and x spans its rows.
                let xv = unsafe { *xs.get_unchecked((first_col + c) * incx) };
                sums[r] = sums[r].madd(v.to_acc(), xv.to_acc());
            });
        }
        let first_row = tr * TILE;
        for (row, mut sum) in (first_row..a.rows().min(first_row + TILE)).zip(sums) {
            if let Some(d) = deferred {
                let (cols, vals) = d.row(row);
                for (&c, &v) in cols.iter().zip(vals) {
                    // SAFETY: the deferred CSR is validated with the matrix's shape, so
                    // c < cols = x.rows().
                    let xv = unsafe { *xs.get_unchecked(c as usize * incx) };
                    sum = sum.madd(v.to_acc(), xv.to_acc());
                }
            }
            // SAFETY: row < rows, and each row belongs to one tile row, handled by one task.
            unsafe { out.write(row, 0, update(alpha, sum, beta, || out.read(row, 0))) };
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::ell::tests::matrices;
    use sparse_core::{Dense, Layout, Memory};
    use sparse_formats::{Csr, DeferredCoo, FillLimit, TileFormat, TileSelection};

    fn selections() -> Vec<TileSelection> {
        let deferred = TileSelection {
            deferred_coo: Some(DeferredCoo {
                max_tile_nnz: 12,
                min_matrix_nnz: 0,
            }),
            ..TileSelection::default()
        };
        let mut all = vec![TileSelection::default(), deferred];
        all.extend(TileFormat::ALL.map(TileSelection::forced));
        all
    }

    /// Runs the kernel and the reference with `y` starting at `y0`; both results.
    fn run<T: Scalar<Out = O>, O: Scalar>(
        m: &Tiled16<T>,
        a: &Csr<T>,
        x: DenseRef<'_, T>,
        (alpha, beta): (f64, f64),
        y0: impl Fn(usize) -> O,
    ) -> (Vec<O>, Vec<f64>) {
        let mut y = Dense::from_fn(a.rows(), 1, Layout::ColMajor, |i, _| y0(i));
        let expected =
            crate::reference::spmv(a.as_ref(), alpha, x, beta, Some(y.as_ref())).unwrap();
        spmv(
            m,
            Accumulator::from_f64(alpha),
            x,
            Accumulator::from_f64(beta),
            y.as_mut(),
        )
        .unwrap();
        (y.into_host_vec().unwrap(), expected)
    }

    fn tiled<T: Scalar>(a: &Csr<T>, selection: &TileSelection) -> Tiled16<T> {
        Tiled16::from_csr(a.as_ref(), selection, FillLimit::UNLIMITED).unwrap()
    }

    #[test]
    fn matches_the_reference_exactly_on_integers() {
        for a in matrices() {
            let x = Dense::from_fn(a.cols(), 1, Layout::ColMajor, |i, _| (i % 5) as f64 - 2.0);
            for selection in selections() {
                let m = tiled(&a, &selection);
                let (y, expected) = run(&m, &a, x.as_ref(), (2.0, -1.0), |i| i as f64);
                assert_eq!(y, expected, "{m:?}");
            }
        }
    }

    #[test]
    fn deferred_coo_gives_the_same_result() {
        let a = matrices().swap_remove(1);
        let x = Dense::from_fn(a.cols(), 1, Layout::ColMajor, |i, _| (i % 7) as f64);
        let plain = tiled(&a, &TileSelection::default());
        let deferred = tiled(&a, &selections()[1]);
        assert!(plain.deferred().is_none());
        assert!(deferred.deferred().is_some_and(|d| d.nnz() > 0));
        let (y_plain, _) = run(&plain, &a, x.as_ref(), (1.0, 0.0), |_| 0.0);
        let (y_deferred, expected) = run(&deferred, &a, x.as_ref(), (1.0, 0.0), |_| 0.0);
        assert_eq!(y_plain, y_deferred);
        assert_eq!(y_plain, expected);
    }

    #[test]
    fn beta_zero_never_reads_y() {
        let a = matrices().swap_remove(4);
        let x = Dense::from_fn(a.cols(), 1, Layout::ColMajor, |i, _| i as f64);
        for selection in selections() {
            let m = tiled(&a, &selection);
            let (y, expected) = run(&m, &a, x.as_ref(), (3.0, 0.0), |_| f64::NAN);
            assert_eq!(y, expected);
        }
    }

    #[test]
    fn padding_is_never_multiplied() {
        // Columns 0, 3, 16 and 20 hold no entry, so a NaN of x there may reach no row. Padded
        // ELL slots point at in-tile column 0 (matrix columns 0 and 16); dense tiles cover all.
        let mut cells: Vec<(usize, usize)> = (0..20)
            .flat_map(|r| [(r, 1 + r % 2), (r, 5 + r % 3)])
            .collect();
        cells.extend((0..20).filter(|r| r % 4 != 0).map(|r| (r, 21)));
        cells.extend((10..14).map(|c| (0, c)));
        let triplets: Vec<_> = cells.into_iter().map(|(r, c)| (r, c, 1.0)).collect();
        let a = Csr::<f64>::from_triplets(20, 23, &triplets).unwrap();
        let x = Dense::from_fn(23, 1, Layout::ColMajor, |i, _| {
            if [0, 3, 16, 20].contains(&i) {
                f64::NAN
            } else {
                1.0
            }
        });
        for selection in selections() {
            let m = tiled(&a, &selection);
            let (y, expected) = run(&m, &a, x.as_ref(), (1.0, 0.0), |_| 0.0);
            assert!(y.iter().all(|v| v.is_finite()), "{m:?}");
            assert_eq!(y, expected);
        }
    }

    #[test]
    fn strided_x_and_i8_values() {
        let a = matrices().swap_remove(0);
        let small: Csr<i8> = a.cast();
        let data: Vec<i8> = (0..3 * a.cols()).map(|k| (k % 5) as i8 - 2).collect();
        let x = DenseRef::try_new(Memory::Host(&data), a.cols(), 1, 3, Layout::RowMajor).unwrap();
        for selection in selections() {
            let m = tiled(&small, &selection);
            let (y, expected) = run(&m, &small, x, (2.0, 1.0), |i| i as i32);
            let y: Vec<f64> = y.iter().map(|&v| f64::from(v)).collect();
            assert_eq!(y, expected);
        }
    }
}
