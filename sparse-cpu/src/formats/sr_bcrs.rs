//! rayon kernels for SR-BCRS: the column-vector kernels of [`super::me_bcrs`], one task per
//! vector-row. Padding vectors have empty masks, so SpMV and SpMM skip them and SDDMM writes
//! their slots 0.

pub(crate) use super::me_bcrs::{sddmm, spmm, spmv};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::me_bcrs::tests::{check_kernels, matrices};
    use sparse_core::{bf16, f16, Dense, DenseMut, DenseRef, Layout, Scalar};
    use sparse_formats::{Csr, FillLimit, SparseFormat, SrBcrs, SrBcrsShape};

    fn sr<T: Scalar>(a: &Csr<T>, shape: SrBcrsShape) -> SrBcrs<T> {
        SrBcrs::from_csr(a.as_ref(), shape, FillLimit::UNLIMITED).unwrap()
    }

    #[test]
    fn kernels_match_the_reference_for_every_shape() {
        for (name, a) in matrices() {
            for v in [2, 4, 8] {
                for stride in [8, 16, 32, 64] {
                    let m = sr(&a, SrBcrsShape::new(v, stride).unwrap());
                    let what = format!("{name}, SR-BCRS {v}x{stride}");
                    check_kernels(&a, &m, &m.value_order(), &what);
                }
            }
        }
    }

    #[test]
    fn kernels_match_the_reference_in_other_precisions() {
        fn check<T: Scalar>(a: &Csr<f64>, shape: SrBcrsShape, what: &str) {
            let a = a.cast::<T>();
            let m = sr(&a, shape);
            check_kernels(&a, &m, &m.value_order(), what);
        }
        for (name, a) in matrices() {
            let int8 = SrBcrsShape::int8(8).unwrap();
            check::<i8>(&a, int8, &format!("{name}, i8"));
            check::<i8>(
                &a,
                SrBcrsShape::int4(4).unwrap(),
                &format!("{name}, i8 stride 32"),
            );
            check::<f16>(&a, int8, &format!("{name}, f16"));
            check::<bf16>(&a, int8, &format!("{name}, bf16"));
            check::<f32>(&a, SrBcrsShape::new(2, 8).unwrap(), &format!("{name}, f32"));
        }
    }

    #[test]
    fn padding_slots_are_written_zero_whatever_beta() {
        // One vector (column 2, rows 0 and 1) padded to 8: 14 of the 16 slots hold no entry.
        let a = Csr::<i8>::from_triplets(2, 3, &[(0, 2, 3), (1, 2, -2)]).unwrap();
        let m = sr(&a, SrBcrsShape::new(2, 8).unwrap());
        let x = Dense::from_fn(2, 2, Layout::RowMajor, |i, j| (i + j + 1) as i8);
        let y = Dense::from_fn(3, 2, Layout::ColMajor, |i, j| (i * j) as i8);
        let mut c = vec![7i32; m.stored_slots()];
        let slots = c.len();
        let view = DenseMut::from_slice(&mut c, slots, 1, Layout::ColMajor).unwrap();
        sddmm(&m, 1, x.as_ref(), y.as_ref(), 1, view, true).unwrap();
        // Row 0: x = [1 2], y_2 = [0 2], dot 4, times 3, plus the prior 7; row 1: [2 3].[0 2] = 6.
        let mut expected = vec![0; 16];
        (expected[0], expected[8]) = (4 * 3 + 7, 6 * -2 + 7);
        assert_eq!(c, expected);

        let xv = [1i8, -1, 5];
        let mut yv = [0i32; 2];
        spmv(&m, 2, DenseRef::vector(&xv), 0, DenseMut::vector(&mut yv)).unwrap();
        assert_eq!(yv, [30, -20]);
        let b = Dense::from_fn(3, 1, Layout::ColMajor, |i, _| i as i8);
        let mut cm = Dense::from_fn(2, 1, Layout::RowMajor, |_, _| 1i32);
        spmm(&m, 1, b.as_ref(), -1, cm.as_mut()).unwrap();
        assert_eq!((cm.at(0, 0), cm.at(1, 0)), (5, -5));
    }
}
