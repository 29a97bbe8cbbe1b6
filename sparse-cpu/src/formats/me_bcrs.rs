//! rayon kernels for ME-BCRS, written once for every column-vector format
//! ([`ColumnVectors`]: ME-BCRS and SR-BCRS differ only in where a vector's values sit), so
//! [`super::sr_bcrs`] runs them too.
//!
//! One task per group of rows (window, vector-row): it walks the group's vectors in column
//! order and writes each of the group's output rows (SpMV, SpMM) or slots (SDDMM) once, so each
//! row sums its entries in CSR order and results do not depend on the thread count. Only rows
//! marked in a vector's mask are read: the zero fill of a vector is never multiplied, so an
//! infinite or NaN input meets exactly the entries it would meet in CSR.

use rayon::prelude::*;
use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};
use sparse_formats::{ColumnVectors, MAX_VECTOR_HEIGHT};

use crate::kernels::{
    axpy_block, update, SddmmFactors, SpmmOperands, SpmvOperands, SPMM_COLUMN_BLOCK,
};
use crate::shared_out::SharedOut;

/// `y = alpha*A*x + beta*y`.
pub(crate) fn spmv<T: Scalar, F: ColumnVectors<T>>(
    a: &F,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    mut y: DenseMut<'_, T::Out>,
) -> Result<()> {
    let SpmvOperands { xs, incx, out } = SpmvOperands::open(&x, &mut y)?;
    let values = a.slot_values();
    (0..a.groups()).into_par_iter().for_each(|g| {
        let mut sums = [T::Acc::ZERO; MAX_VECTOR_HEIGHT];
        a.for_each_vector(g, |v| {
            if v.mask == 0 {
                return;
            }
            // SAFETY: a validated structure holds columns < cols = x.rows() for vectors with
            // entries, and x spans its rows.
            let xv = unsafe { xs.get_unchecked(v.col * incx) }.to_acc();
            for r in v.entry_rows() {
                sums[r] = sums[r].madd(values[v.slot(r)].to_acc(), xv);
            }
        });
        for (r, i) in a.group_rows(g).enumerate() {
            // SAFETY: i < rows, and group g's rows belong to this task alone.
            unsafe { out.write(i, 0, update(alpha, sums[r], beta, || out.read(i, 0))) };
        }
    });
    Ok(())
}

/// `C = alpha*A*B + beta*C`, B and C in either layout.
pub(crate) fn spmm<T: Scalar, F: ColumnVectors<T>>(
    a: &F,
    alpha: T::Acc,
    b: DenseRef<'_, T>,
    beta: T::Acc,
    mut c: DenseMut<'_, T::Out>,
) -> Result<()> {
    let n = b.cols();
    let SpmmOperands { bs, strides, out } = SpmmOperands::open(&b, &mut c)?;
    let (b_row, b_col) = strides;
    let values = a.slot_values();
    (0..a.groups()).into_par_iter().for_each(|g| {
        let rows = a.group_rows(g);
        let mut acc = [[T::Acc::ZERO; SPMM_COLUMN_BLOCK]; MAX_VECTOR_HEIGHT];
        for j0 in (0..n).step_by(SPMM_COLUMN_BLOCK) {
            let width = SPMM_COLUMN_BLOCK.min(n - j0);
            for row in &mut acc[..rows.len()] {
                row[..width].fill(T::Acc::ZERO);
            }
            a.for_each_vector(g, |v| {
                if v.mask == 0 {
                    return;
                }
                // SAFETY: a validated structure holds col < cols = b.rows() for vectors with
                // entries, and j0 + width <= n: every element read lies within B's span, which
                // the DenseRef checked against its memory.
                let b_from = unsafe { bs.get_unchecked(v.col * b_row + j0 * b_col..) };
                for r in v.entry_rows() {
                    let value = values[v.slot(r)].to_acc();
                    let acc = &mut acc[r][..width];
                    // SAFETY: as above.
                    unsafe {
                        if b_col == 1 {
                            axpy_block(acc, value, b_from, 1);
                        } else {
                            axpy_block(acc, value, b_from, b_col);
                        }
                    }
                }
            });
            for (r, i) in rows.clone().enumerate() {
                for (t, &sum) in acc[r][..width].iter().enumerate() {
                    // SAFETY: i < rows and j0 + t < n; group g's rows belong to this task alone.
                    unsafe {
                        out.write(i, j0 + t, update(alpha, sum, beta, || out.read(i, j0 + t)))
                    };
                }
            }
        }
    });
    Ok(())
}

/// `c = alpha*(X*Y^T) ∘ spy(S) + beta*c` with `c` in S's slot order (stored_slots x 1): every
/// slot of every group is written once, real ones with the sampled product, the others (padding
/// and rows without an entry) with 0.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sddmm<T: Scalar, F: ColumnVectors<T>>(
    s: &F,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    y: DenseRef<'_, T>,
    beta: T::Acc,
    mut c: DenseMut<'_, T::Out>,
    scale_by_values: bool,
) -> Result<()> {
    let factors = SddmmFactors::new(&x, &y, scale_by_values)?;
    let out = SharedOut::new(&mut c, "sddmm C")?;
    let values = s.slot_values();
    let height = s.height();
    (0..s.groups()).into_par_iter().for_each(|g| {
        let first_row = s.group_rows(g).start;
        s.for_each_vector(g, |v| {
            for r in 0..height {
                let slot = v.slot(r);
                let result = if (v.mask >> r) & 1 == 1 {
                    // SAFETY: row r holds an entry, so first_row + r < rows = x.rows() and
                    // v.col < cols = y.rows() (validated structure).
                    let dot = unsafe { factors.sample(first_row + r, v.col, values[slot]) };
                    // SAFETY: slot < stored_slots = c.rows(), and it belongs to group g alone.
                    update(alpha, dot, beta, || unsafe { out.read(slot, 0) })
                } else {
                    T::Out::default()
                };
                // SAFETY: as above.
                unsafe { out.write(slot, 0, result) };
            }
        });
    });
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sparse_core::{bf16, f16, Dense, Layout};
    use sparse_formats::{generate, Csr, FillLimit, MeBcrs, MeBcrsShape, SparseFormat, ValueOrder};

    /// Matrices with the awkward features: dimensions that are not multiples of 8/16/32, empty
    /// rows and windows, one very long row, explicit zeros, empty shapes. Integer values, so f64
    /// results are exact.
    pub(crate) fn matrices() -> Vec<(&'static str, Csr<f64>)> {
        let integral = |a: Csr<f64>| {
            let (rows, cols) = a.shape();
            let (row_ptr, col_idx, values) = a.into_parts();
            let values = values
                .iter()
                .enumerate()
                .map(|(e, v)| ((v * 4.0).round() + (e % 3) as f64).clamp(-4.0, 4.0))
                .collect();
            Csr::try_new(rows, cols, row_ptr, col_idx, values).unwrap()
        };
        let mut long_row = vec![(2, 0, 1.0)];
        long_row.extend((0..700).map(|j| (9, j, (j % 5) as f64 - 2.0)));
        let mut empty_windows = Vec::new();
        for i in (0..120).filter(|i| (i / 16) % 3 == 1) {
            empty_windows.push((i, (i * 7) % 45, (i % 4) as f64 - 1.0));
        }
        vec![
            (
                "uniform 37x53",
                integral(generate::uniform(37, 53, 4, 1).unwrap()),
            ),
            ("rmat 2^8", integral(generate::rmat(8, 5, 2).unwrap())),
            (
                "uniform 1x300",
                integral(generate::uniform(1, 300, 90, 3).unwrap()),
            ),
            (
                "empty windows",
                Csr::from_triplets(120, 45, &empty_windows).unwrap(),
            ),
            ("long row", Csr::from_triplets(21, 700, &long_row).unwrap()),
            ("0x0", Csr::zeros(0, 0)),
            ("7x0", Csr::zeros(7, 0)),
            ("0x5", Csr::zeros(0, 5)),
        ]
    }

    /// Dense operand with small integer elements, so sums are exact in every precision.
    pub(crate) fn operand<T: Scalar>(
        rows: usize,
        cols: usize,
        layout: Layout,
        seed: usize,
    ) -> Dense<T> {
        Dense::from_fn(rows, cols, layout, |i, j| {
            T::from_f64(((i * 7 + j * 3 + seed) % 5) as f64 - 2.0)
        })
    }

    fn output<T: Scalar>(d: Dense<T>) -> Vec<f64> {
        let (rows, cols) = d.shape();
        (0..rows)
            .flat_map(|i| (0..cols).map(move |j| (i, j)))
            .map(|(i, j)| d.at(i, j).to_f64())
            .collect()
    }

    fn nan_output<T: Scalar>(rows: usize, cols: usize, layout: Layout) -> Dense<T> {
        Dense::from_fn(rows, cols, layout, |_, _| T::from_f64(f64::NAN))
    }

    /// The oracle's f64 results rounded once to the output type, as the kernels (exact on these
    /// small integers in every accumulator) store them.
    fn rounded<O: Scalar>(expected: &[f64]) -> Vec<f64> {
        expected.iter().map(|&v| O::from_f64(v).to_f64()).collect()
    }

    /// Runs the three kernels on `f` (converted from `a`, its slots ordered by `order`) and
    /// compares them with the oracle, exactly: the inputs are small integers.
    pub(crate) fn check_kernels<T: Scalar, F: ColumnVectors<T>>(
        a: &Csr<T>,
        f: &F,
        order: &ValueOrder,
        what: &str,
    ) {
        let (m, n) = a.shape();
        let (alpha, beta) = (2.0, -1.0);
        let acc = <T::Acc as Accumulator>::from_f64;

        let x = operand::<T>(n, 1, Layout::ColMajor, 1);
        let y0 = operand::<T::Out>(m, 1, Layout::ColMajor, 2);
        let expected =
            crate::reference::spmv(a.as_ref(), alpha, x.as_ref(), beta, Some(y0.as_ref())).unwrap();
        let mut y = operand::<T::Out>(m, 1, Layout::ColMajor, 2);
        spmv(f, acc(alpha), x.as_ref(), acc(beta), y.as_mut()).unwrap();
        assert_eq!(output(y), rounded::<T::Out>(&expected), "{what}: spmv");
        let mut y = nan_output::<T::Out>(m, 1, Layout::ColMajor);
        spmv(f, acc(alpha), x.as_ref(), acc(0.0), y.as_mut()).unwrap();
        let expected = crate::reference::spmv(a.as_ref(), alpha, x.as_ref(), 0.0, None).unwrap();
        assert_eq!(
            output(y),
            rounded::<T::Out>(&expected),
            "{what}: spmv, beta = 0"
        );

        for cols in [1, 5, 33, 70] {
            for (b_layout, c_layout) in [
                (Layout::RowMajor, Layout::RowMajor),
                (Layout::ColMajor, Layout::RowMajor),
                (Layout::RowMajor, Layout::ColMajor),
            ] {
                let what = format!("{what}: spmm N = {cols}, B {b_layout}, C {c_layout}");
                let b = operand::<T>(n, cols, b_layout, 3);
                let c0 = operand::<T::Out>(m, cols, c_layout, 4);
                let expected =
                    crate::reference::spmm(a.as_ref(), alpha, b.as_ref(), beta, Some(c0.as_ref()))
                        .unwrap();
                let mut c = operand::<T::Out>(m, cols, c_layout, 4);
                spmm(f, acc(alpha), b.as_ref(), acc(beta), c.as_mut()).unwrap();
                assert_eq!(output(c), rounded::<T::Out>(&output(expected)), "{what}");
                let mut c = nan_output::<T::Out>(m, cols, c_layout);
                spmm(f, acc(alpha), b.as_ref(), acc(0.0), c.as_mut()).unwrap();
                let expected =
                    crate::reference::spmm(a.as_ref(), alpha, b.as_ref(), 0.0, None).unwrap();
                let expected = rounded::<T::Out>(&output(expected));
                assert_eq!(output(c), expected, "{what}, beta = 0");
            }
        }

        let slots = f.stored_slots();
        for k in [1, 9] {
            let xd = operand::<T>(m, k, Layout::RowMajor, 5);
            let yd = operand::<T>(n, k, Layout::ColMajor, 6);
            let prior = operand::<T::Out>(slots, 1, Layout::ColMajor, 7);
            let prior_slots: Vec<T::Out> = (0..slots).map(|s| prior.at(s, 0)).collect();
            let prior_csr = order.to_csr_order(&prior_slots).unwrap();
            let prior_csr =
                Dense::from_vec(prior_csr, a.nnz(), 1, a.nnz().max(1), Layout::ColMajor).unwrap();
            for scale in [false, true] {
                let what = format!("{what}: sddmm K = {k}, scale_by_values = {scale}");
                let sddmm_reference = |beta: f64, prior| {
                    let r = crate::reference::sddmm(
                        a.as_ref(),
                        alpha,
                        xd.as_ref(),
                        yd.as_ref(),
                        beta,
                        prior,
                        scale,
                    );
                    rounded::<T::Out>(&r.unwrap())
                };
                let mut c = operand::<T::Out>(slots, 1, Layout::ColMajor, 7);
                let (x, y) = (xd.as_ref(), yd.as_ref());
                sddmm(f, acc(alpha), x, y, acc(beta), c.as_mut(), scale).unwrap();
                let expected = sddmm_reference(beta, Some(prior_csr.as_ref()));
                check_slots(order, output(c), &expected, &what);

                let mut c = nan_output::<T::Out>(slots, 1, Layout::ColMajor);
                sddmm(f, acc(alpha), x, y, acc(0.0), c.as_mut(), scale).unwrap();
                let expected = sddmm_reference(0.0, None);
                check_slots(order, output(c), &expected, &format!("{what}, beta = 0"));
            }
        }
    }

    /// Real slots equal the oracle's entries; the others are exactly +0.
    fn check_slots(order: &ValueOrder, got: Vec<f64>, expected: &[f64], what: &str) {
        for (s, &v) in got.iter().enumerate() {
            match order.entry(s) {
                Some(e) => assert_eq!(v, expected[e], "{what}: slot {s} (entry {e})"),
                None => assert!(
                    v == 0.0 && v.is_sign_positive(),
                    "{what}: slot {s} without an entry is {v}"
                ),
            }
        }
    }

    fn me<T: Scalar>(a: &Csr<T>, shape: MeBcrsShape) -> MeBcrs<T> {
        MeBcrs::from_csr(a.as_ref(), shape, FillLimit::UNLIMITED).unwrap()
    }

    #[test]
    fn kernels_match_the_reference_for_every_shape() {
        for (name, a) in matrices() {
            for (h, k) in [(8, 4), (8, 8), (8, 16), (16, 4), (16, 8), (16, 16)] {
                let m = me(&a, MeBcrsShape::new(h, k).unwrap());
                check_kernels(
                    &a,
                    &m,
                    &m.value_order(),
                    &format!("{name}, ME-BCRS {h}x{k}"),
                );
            }
        }
    }

    #[test]
    fn kernels_match_the_reference_in_other_precisions() {
        for (name, a) in matrices() {
            fn check<T: Scalar>(a: &Csr<f64>, shape: MeBcrsShape, what: &str) {
                let a = a.cast::<T>();
                let m = me(&a, shape);
                check_kernels(&a, &m, &m.value_order(), what);
            }
            check::<f32>(&a, MeBcrsShape::tf32(), &format!("{name}, f32"));
            check::<f16>(&a, MeBcrsShape::f16(), &format!("{name}, f16"));
            check::<bf16>(&a, MeBcrsShape::f16(), &format!("{name}, bf16"));
            check::<i8>(&a, MeBcrsShape::f16(), &format!("{name}, i8"));
        }
    }

    #[test]
    fn kernels_give_the_results_worked_out_by_hand() {
        let a =
            Csr::<f64>::from_triplets(10, 6, &[(0, 1, 2.0), (9, 5, 3.0), (9, 1, -1.0)]).unwrap();
        let m = me(&a, MeBcrsShape::f16());
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut y = [f64::NAN; 10];
        spmv(&m, 1.0, DenseRef::vector(&x), 0.0, DenseMut::vector(&mut y)).unwrap();
        assert_eq!(y, [4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 16.0]);

        let b = Dense::from_fn(6, 2, Layout::RowMajor, |i, j| (i + j) as f64);
        let mut c = Dense::from_fn(10, 2, Layout::ColMajor, |_, _| 1.0);
        spmm(&m, 1.0, b.as_ref(), 2.0, c.as_mut()).unwrap();
        assert_eq!(
            (c.at(0, 1), c.at(9, 0), c.at(5, 1)),
            (2.0 * 2.0 + 2.0, 16.0, 2.0)
        );

        let xd = Dense::from_fn(10, 1, Layout::RowMajor, |i, _| i as f64);
        let yd = Dense::from_fn(6, 1, Layout::RowMajor, |j, _| j as f64);
        let mut out = vec![f64::NAN; m.stored_slots()];
        let slots = out.len();
        let view = DenseMut::from_slice(&mut out, slots, 1, Layout::ColMajor).unwrap();
        sddmm(&m, 1.0, xd.as_ref(), yd.as_ref(), 0.0, view, true).unwrap();
        let csr_order = m.value_order().to_csr_order(&out).unwrap();
        assert_eq!(csr_order, vec![0.0, -9.0, 9.0 * 5.0 * 3.0]);
        assert_eq!(out.iter().filter(|v| **v == 0.0).count(), slots - 2);
    }

    #[test]
    fn zero_fill_never_meets_an_infinite_input() {
        // Rows 0 and 1 share column 0's vector; row 1's slot in column 3's vector is fill.
        let a = Csr::<f64>::from_triplets(2, 4, &[(0, 0, 1.0), (0, 3, 1.0), (1, 0, 2.0)]).unwrap();
        let m = me(&a, MeBcrsShape::tf32());
        let x = [1.0, 0.0, 0.0, f64::INFINITY];
        let mut y = [0.0; 2];
        spmv(&m, 1.0, DenseRef::vector(&x), 0.0, DenseMut::vector(&mut y)).unwrap();
        assert_eq!(y, [f64::INFINITY, 2.0]);
    }
}
