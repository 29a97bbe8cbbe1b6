//! SpMV for Tiled16, parallel over ranges of tile rows balanced by entries. A task sums each
//! tile row's (up to) 16 rows over its tiles in tile order, each tile's entries in the order of
//! its tile format (each row's entries in column order), then adds each row's deferred entries
//! in column order and writes every row once. The order is fixed, so results are bit-identical
//! from run to run whatever the number of threads. Each tile format has its own loop over its
//! payload, with the tile's column nibbles unpacked in one pass. Padding (ELL slots off their
//! mask, Dense cells off their occupancy bits) is never multiplied.

use rayon::prelude::*;
use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};
use sparse_formats::{TileEll, TilePayload, TileRef, Tiled16, TILED16_TILE as TILE};

use crate::kernels::{update, SpmvOperands};
use crate::partition::{balanced_ranges, part_count};

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
    let (tile_ptr, tile_nnz) = (a.tile_ptr(), a.tile_nnz());
    let rows = a.rows();
    // Weight of tile rows 0..tr: their tiles' entries, their deferred entries, one per row.
    let prefix = |tr: usize| {
        let first_row = rows.min(tr * TILE);
        let deferred = deferred.map_or(0, |d| d.row_ptr()[first_row] as usize);
        tile_nnz[tile_ptr[tr] as usize] as usize + deferred + first_row
    };
    let parts = part_count(prefix(a.tile_rows()));
    let bounds = balanced_ranges(a.tile_rows(), parts, prefix);
    bounds.par_windows(2).for_each(|w| {
        for tr in w[0]..w[1] {
            let mut sums = [T::Acc::ZERO; TILE];
            for tile in a.tile_row(tr) {
                let first_col = tile.first_col();
                let x = |c: usize| {
                    // SAFETY: a validated Tiled16 keeps every in-tile column below the tile's
                    // width, so first_col + c < cols = x.rows(), and x spans its rows.
                    unsafe { xs.get_unchecked((first_col + c) * incx) }.to_acc()
                };
                tile_spmv(&tile, x, &mut sums);
            }
            let first_row = tr * TILE;
            for (row, mut sum) in (first_row..rows.min(first_row + TILE)).zip(sums) {
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
        }
    });
    Ok(())
}

/// Set bits of `mask`, lowest first.
#[inline(always)]
fn bits(mut mask: u16) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            i
        })
    })
}

/// Adds the products of one tile's entries with x (`x(c)` the element at in-tile column c) to
/// the tile row's `sums`. `x` is called only with the columns of real entries, which a
/// validated tile keeps below its width: the bound `x`'s unchecked read relies on.
/// In-tile rows and columns are below 16 by construction (4-bit indices, 16-bit masks), and a
/// validated tile's are below its height and width.
#[inline(always)]
fn tile_spmv<T: Scalar>(
    tile: &TileRef<'_, T>,
    x: impl Fn(usize) -> T::Acc,
    sums: &mut [T::Acc; TILE],
) {
    let (h, w) = (tile.height, tile.width);
    let mut add = |r: usize, xv: T::Acc, v: T| {
        sums[r % TILE] = sums[r % TILE].madd(v.to_acc(), xv);
    };
    match tile.payload {
        TilePayload::Csr {
            row_start,
            cols,
            values,
        } => {
            let cols = unpack(cols.as_bytes());
            for r in 0..h {
                let start = usize::from(row_start[r]);
                let end = row_start.get(r + 1).map_or(tile.nnz, |&s| usize::from(s));
                for (&c, &v) in cols[start..end].iter().zip(&values[start..end]) {
                    add(r, x(usize::from(c)), v);
                }
            }
        }
        TilePayload::Coo(coo) => coo_spmv(coo.positions, coo.values, &x, &mut add),
        TilePayload::Ell(ell) => ell_spmv(&ell, h, &x, &mut add),
        TilePayload::Hyb { ell, coo } => {
            ell_spmv(&ell, h, &x, &mut add);
            coo_spmv(coo.positions, coo.values, &x, &mut add);
        }
        TilePayload::Dense { mask, values } => {
            let cells = h * w;
            let full = mask[..cells / 8].iter().all(|&m| m == u8::MAX)
                && (cells % 8 == 0 || mask[cells / 8] == (1 << (cells % 8)) - 1);
            for (c, column) in values.chunks_exact(h).enumerate() {
                for (r, &v) in column.iter().enumerate() {
                    let cell = c * h + r;
                    if full || mask[cell / 8] >> (cell % 8) & 1 == 1 {
                        add(r, x(c), v);
                    }
                }
            }
        }
        TilePayload::DenseRow { rows, values } => {
            for (r, row) in bits(rows).zip(values.chunks_exact(w)) {
                for (c, &v) in row.iter().enumerate() {
                    add(r, x(c), v);
                }
            }
        }
        TilePayload::DenseCol { cols, values } => {
            for (c, column) in bits(cols).zip(values.chunks_exact(h)) {
                let xv = x(c);
                for (r, &v) in column.iter().enumerate() {
                    add(r, xv, v);
                }
            }
        }
    }
}

/// The ELL part of a tile: slot column by slot column, a column whose mask covers every row
/// without looking at the mask bit by bit.
#[inline(always)]
fn ell_spmv<T: Scalar>(
    ell: &TileEll<'_, T>,
    h: usize,
    x: &impl Fn(usize) -> T::Acc,
    add: &mut impl FnMut(usize, T::Acc, T),
) {
    let all_rows = (1u32 << h) - 1;
    let cols = unpack(ell.cols.as_bytes());
    for (j, (values, cols)) in ell
        .values
        .chunks_exact(h)
        .zip(cols.chunks_exact(h))
        .take(ell.width)
        .enumerate()
    {
        let mask = ell.slot_mask(j);
        if u32::from(mask) == all_rows {
            for (r, (&v, &c)) in values.iter().zip(cols).enumerate() {
                add(r, x(usize::from(c)), v);
            }
        } else {
            for r in bits(mask) {
                add(r, x(usize::from(cols[r])), values[r]);
            }
        }
    }
}

/// Column nibbles unpacked one per byte (nibble k at k), in one pass the compiler vectorises
/// instead of a shift and mask per entry. A tile holds at most 256 nibbles.
#[inline(always)]
fn unpack(packed: &[u8]) -> [u8; TILE * TILE] {
    let mut cols = [0; TILE * TILE];
    for (pair, &byte) in cols.chunks_exact_mut(2).zip(packed) {
        pair[0] = byte & 0xF;
        pair[1] = byte >> 4;
    }
    cols
}

/// Entries stored as `(row << 4) | col` bytes.
#[inline(always)]
fn coo_spmv<T: Scalar>(
    positions: &[u8],
    values: &[T],
    x: &impl Fn(usize) -> T::Acc,
    add: &mut impl FnMut(usize, T::Acc, T),
) {
    for (&p, &v) in positions.iter().zip(values) {
        add(usize::from(p >> 4), x(usize::from(p & 0xF)), v);
    }
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
    fn matches_the_reference_over_several_parts() {
        let a = sparse_formats::generate::poisson3d::<f64, u32>(30).unwrap();
        assert!(crate::partition::part_count(a.nnz() + a.rows()) > 1);
        let x = Dense::from_fn(a.cols(), 1, Layout::ColMajor, |i, _| (i % 5) as f64 - 2.0);
        for selection in selections() {
            let m = tiled(&a, &selection);
            let (y, expected) = run(&m, &a, x.as_ref(), (2.0, -1.0), |i| (i % 7) as f64);
            assert_eq!(y, expected, "{m:?}");
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
