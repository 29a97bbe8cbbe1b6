//! ELL, HYB and BSR: CSR round trips for every parameter on generated and hand-built matrices,
//! the fill limit, and validation of corrupted arrays.

use proptest::prelude::*;
use sparse_core::{bf16, f16, Error, Format, Scalar, StructureError};
use sparse_formats::{
    generate, Bsr, BsrParts, Csr, Ell, EllParts, FillLimit, Hyb, HybParts, HybWidth, SparseFormat,
    BSR_BLOCK_SIZES, ELL_PADDING,
};

fn policies() -> Vec<HybWidth> {
    let mut p = vec![HybWidth::MinBytes];
    p.extend([0, 1, 2, 3, 7, 1000].map(HybWidth::Fixed));
    p.extend([0.1, 50.0, 90.0, 100.0].map(HybWidth::Percentile));
    p
}

fn block_shapes() -> impl Iterator<Item = (usize, usize)> {
    BSR_BLOCK_SIZES
        .into_iter()
        .flat_map(|r| BSR_BLOCK_SIZES.map(|c| (r, c)))
}

/// Matrices with the awkward features: dimensions that are not multiples of any block size,
/// empty rows, one very long row, explicit zeros, dense stretches, empty shapes.
fn matrices() -> Vec<Csr<f64>> {
    let mut long_row: Vec<_> = (0..300).map(|c| (7, c, 1.0 + c as f64)).collect();
    long_row.extend((0..41).step_by(3).map(|r| (r, (r * 13) % 300, -2.0)));
    let explicit_zeros: Vec<_> = (0..23)
        .flat_map(|r| [(r, r % 19, 0.0), (r, (r + 5) % 19, r as f64)])
        .collect();
    let every_third_row: Vec<_> = (0..33)
        .filter(|r| r % 3 == 0)
        .flat_map(|r| (0..r % 7 + 1).map(move |k| (r, (r + 4 * k) % 29, 1.5)))
        .collect();
    let dense: Vec<_> = (0..9)
        .flat_map(|r| (0..13).map(move |c| (r, c, (r * 13 + c) as f64)))
        .collect();
    vec![
        generate::uniform::<f64, u32>(97, 61, 5, 1).unwrap(),
        generate::uniform::<f64, u32>(3, 200, 40, 2).unwrap(),
        generate::rmat::<f64, u32>(7, 6, 3).unwrap(),
        generate::poisson2d::<f64, u32>(7).unwrap(),
        Csr::from_triplets(41, 300, &long_row).unwrap(),
        Csr::from_triplets(23, 19, &explicit_zeros).unwrap(),
        Csr::from_triplets(33, 29, &every_third_row).unwrap(),
        Csr::from_triplets(9, 13, &dense).unwrap(),
        Csr::from_triplets(1, 1, &[(0, 0, 0.0)]).unwrap(),
        Csr::zeros(0, 0),
        Csr::zeros(6, 0),
        Csr::zeros(0, 6),
        Csr::zeros(17, 17),
    ]
}

/// Every invariant holds, nothing is lost or invented, and padding is counted apart.
fn check_round_trip<T: Scalar, F: SparseFormat<T> + std::fmt::Debug>(m: &F, a: &Csr<T>) {
    m.validate().unwrap_or_else(|e| panic!("{m:?}: {e}"));
    assert_eq!(m.to_csr(), *a, "{m:?}");
    assert_eq!(m.shape(), a.shape());
    assert_eq!(m.nnz(), a.nnz(), "{m:?}");
    assert!(m.stored_slots() >= m.nnz(), "{m:?}");
}

#[test]
fn ell_round_trips() {
    for a in matrices() {
        let m = Ell::from_csr(a.as_ref(), FillLimit::UNLIMITED).unwrap();
        check_round_trip(&m, &a);
        assert_eq!(m.width(), a.row_stats().max);
        assert_eq!(m.stored_slots(), a.rows() * m.width());
    }
}

#[test]
fn hyb_round_trips_under_every_policy() {
    for a in matrices() {
        for policy in policies() {
            let m = Hyb::from_csr(a.as_ref(), policy, FillLimit::UNLIMITED).unwrap();
            check_round_trip(&m, &a);
            assert_eq!(m.width(), policy.choose(a.as_ref()).unwrap());
            assert!(m.width() <= a.row_stats().max);
            assert_eq!(m.ell().nnz() + m.coo_nnz(), a.nnz());
        }
    }
}

#[test]
fn min_bytes_is_never_beaten_by_another_width() {
    for a in matrices() {
        let bytes = |p: HybWidth| {
            Hyb::from_csr(a.as_ref(), p, FillLimit::UNLIMITED)
                .unwrap()
                .memory_bytes()
        };
        let best = bytes(HybWidth::MinBytes);
        for w in 0..=a.row_stats().max {
            assert!(best <= bytes(HybWidth::Fixed(w)), "width {w} of {a:?}");
        }
    }
}

#[test]
fn bsr_round_trips_for_every_block_shape() {
    for a in matrices() {
        for (r, c) in block_shapes() {
            let m = Bsr::from_csr(a.as_ref(), r, c, FillLimit::UNLIMITED).unwrap();
            check_round_trip(&m, &a);
            assert_eq!((m.block_shape().rows, m.block_shape().cols), (r, c));
            assert_eq!(m.block_rows(), a.rows().div_ceil(r));
            assert_eq!(m.block_cols(), a.cols().div_ceil(c));
            assert_eq!(m.stored_slots(), m.nblocks() * r * c);
            assert!(m.fill_ratio() >= 1.0);
        }
    }
}

#[test]
fn other_value_and_index_types_round_trip() {
    fn each<T: Scalar>(a: &Csr<f64>) {
        let a: Csr<T> = a.cast();
        check_round_trip(
            &Ell::from_csr(a.as_ref(), FillLimit::UNLIMITED).unwrap(),
            &a,
        );
        let hyb = Hyb::from_csr(a.as_ref(), HybWidth::MinBytes, FillLimit::UNLIMITED).unwrap();
        check_round_trip(&hyb, &a);
        check_round_trip(
            &Bsr::from_csr(a.as_ref(), 4, 8, FillLimit::UNLIMITED).unwrap(),
            &a,
        );
    }
    let a = &matrices()[5];
    each::<f32>(a);
    each::<f16>(a);
    each::<bf16>(a);
    each::<i8>(a);
    // A CSR with 64-bit indices converts to the same structures.
    let wide = a.with_index::<i64>().unwrap();
    let m = Bsr::from_csr(wide.as_ref(), 2, 4, FillLimit::UNLIMITED).unwrap();
    check_round_trip(&m, a);
    let m = Hyb::from_csr(wide.as_ref(), HybWidth::Fixed(1), FillLimit::UNLIMITED).unwrap();
    check_round_trip(&m, a);
}

#[test]
fn one_long_row_exceeds_the_fill_limit_of_ell_but_not_of_hyb() {
    let a = &matrices()[4];
    let limit = FillLimit {
        max_ratio: 4.0,
        min_slots: 0,
    };
    let err = Ell::from_csr(a.as_ref(), limit).unwrap_err();
    assert!(
        matches!(err, Error::FillLimit { format: Format::Ell, slots, nnz, .. }
            if slots == 41 * 300 && nnz == a.nnz()),
        "{err}"
    );
    let hyb = Hyb::from_csr(a.as_ref(), HybWidth::MinBytes, limit).unwrap();
    check_round_trip(&hyb, a);
    let err = Hyb::from_csr(a.as_ref(), HybWidth::Fixed(300), limit).unwrap_err();
    assert!(
        matches!(
            err,
            Error::FillLimit {
                format: Format::Hyb,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn scattered_entries_exceed_the_fill_limit_of_large_blocks() {
    let a = Csr::<f64>::identity(200).unwrap();
    let limit = FillLimit {
        max_ratio: 8.0,
        min_slots: 0,
    };
    let err = Bsr::from_csr(a.as_ref(), 16, 16, limit).unwrap_err();
    assert!(
        matches!(err, Error::FillLimit { format: Format::Bsr, slots, .. } if slots == 13 * 256),
        "{err}"
    );
    check_round_trip(&Bsr::from_csr(a.as_ref(), 2, 2, limit).unwrap(), &a);
}

#[test]
fn debug_output_is_short() {
    let a = generate::uniform::<f64, u32>(2000, 2000, 10, 5).unwrap();
    let ell = Ell::from_csr(a.as_ref(), FillLimit::UNLIMITED).unwrap();
    let hyb = Hyb::from_csr(a.as_ref(), HybWidth::MinBytes, FillLimit::UNLIMITED).unwrap();
    let bsr = Bsr::from_csr(a.as_ref(), 4, 4, FillLimit::UNLIMITED).unwrap();
    for text in [format!("{ell:?}"), format!("{hyb:?}"), format!("{bsr:?}")] {
        assert!(text.len() < 120 && text.contains("2000x2000"), "{text}");
    }
}

fn structure_error<P>(r: Result<impl std::fmt::Debug, sparse_formats::Rejected<P>>) -> String {
    match r.map_err(|rejected| rejected.error) {
        Err(Error::InvalidStructure { error, .. }) => error.to_string(),
        other => panic!("expected a structure error, got {other:?}"),
    }
}

fn ell_parts() -> (usize, usize, EllParts<f64>) {
    // Rows 0..4 of lengths 2, 0, 1, 2 over 5 columns.
    let a = Csr::<f64>::from_triplets(
        4,
        5,
        &[
            (0, 1, 1.0),
            (0, 3, 2.0),
            (2, 4, 3.0),
            (3, 0, 4.0),
            (3, 2, 0.0),
        ],
    )
    .unwrap();
    let m = Ell::from_csr(a.as_ref(), FillLimit::UNLIMITED).unwrap();
    (m.cols(), m.width(), m.into_parts())
}

#[test]
fn ell_validation_names_the_first_bad_slot() {
    let (cols, width, good) = ell_parts();
    let p = ELL_PADDING;
    assert!(Ell::try_new(4, cols, width, good.clone()).is_ok());
    let corrupt = |f: &dyn Fn(&mut EllParts<f64>)| {
        let mut parts = good.clone();
        f(&mut parts);
        let r = Ell::try_new(4, cols, width, parts.clone());
        if let Err(rejected) = &r {
            assert!(rejected.parts == parts, "the arrays come back unchanged");
        }
        structure_error(r)
    };
    // Slot (row, k) is at k*4 + row.
    let msg = corrupt(&|m| m.col_idx[4] = 5);
    assert!(msg.contains("column index 5 is outside 0..5"), "{msg}");
    let msg = corrupt(&|m| {
        m.col_idx[0] = p;
        m.values[0] = 0.0;
    });
    assert!(
        msg.contains("row 0: slot 1 holds column 3 after padding"),
        "{msg}"
    );
    let msg = corrupt(&|m| m.col_idx.swap(3, 7));
    assert!(msg.contains("row 3: column 0 follows column 2"), "{msg}");
    let msg = corrupt(&|m| m.col_idx[7] = 0);
    assert!(msg.contains("column 0 appears more than once"), "{msg}");
    let msg = corrupt(&|m| m.values[1] = 1.0);
    assert!(msg.contains("row 1: padded slot 0 holds 1.0"), "{msg}");
    let msg = corrupt(&|m| {
        m.values.pop();
    });
    assert!(msg.contains("values has length 7, expected 8"), "{msg}");
    assert!(matches!(
        Ell::try_new(4, cols, 3, good.clone()).map_err(|r| r.error),
        Err(Error::InvalidStructure {
            error: StructureError::Length { .. },
            ..
        })
    ));
}

fn hyb_parts() -> HybParts<f64> {
    let a = Csr::<f64>::from_triplets(
        3,
        6,
        &[
            (0, 0, 1.0),
            (0, 2, 2.0),
            (0, 4, 3.0),
            (0, 5, 4.0),
            (1, 1, 5.0),
            (2, 3, 6.0),
            (2, 4, 7.0),
        ],
    )
    .unwrap();
    // Width 1: row 0 spills 3 entries, row 2 one.
    Hyb::from_csr(a.as_ref(), HybWidth::Fixed(1), FillLimit::UNLIMITED)
        .unwrap()
        .into_parts()
}

#[test]
fn hyb_validation_checks_both_parts() {
    let good = hyb_parts();
    assert_eq!(good.coo_rows, [0, 0, 0, 2]);
    assert!(Hyb::try_new(3, 6, 1, good.clone()).is_ok());
    let corrupt = |f: &dyn Fn(&mut HybParts<f64>)| {
        let mut parts = good.clone();
        f(&mut parts);
        structure_error(Hyb::try_new(3, 6, 1, parts))
    };
    let msg = corrupt(&|m| m.coo_cols.swap(0, 1));
    assert!(
        msg.contains("COO entry 1: (row 0, column 2) does not follow (row 0, column 4)"),
        "{msg}"
    );
    let msg = corrupt(&|m| m.coo_rows[3] = 3);
    assert!(msg.contains("COO entry 3: row 3 is outside 0..3"), "{msg}");
    let msg = corrupt(&|m| m.coo_cols[2] = 6);
    assert!(
        msg.contains("COO entry 2: column 6 is outside 0..6"),
        "{msg}"
    );
    let msg = corrupt(&|m| {
        m.coo_rows[3] = 1;
        m.coo_cols[3] = 1;
    });
    assert!(
        msg.contains("row 1: column 1 does not follow the row's last ELL column 1"),
        "{msg}"
    );
    let msg = corrupt(&|m| {
        m.coo_values.pop();
    });
    assert!(msg.contains("coo_values has length 3, expected 4"), "{msg}");
    let msg = corrupt(&|m| m.ell.col_idx[1] = 9);
    assert!(msg.contains("column index 9 is outside 0..6"), "{msg}");
    let msg = corrupt(&|m| {
        m.ell.col_idx[2] = Ell::<f64>::PADDING;
        m.ell.values[2] = 0.0;
    });
    assert!(
        msg.contains("row 2 overflows into COO with only 0 of its 1 ELL slots"),
        "{msg}"
    );
}

fn bsr_parts() -> BsrParts<f64> {
    // 5x7 in 2x4 blocks: block rows 0..3 (the last holds row 4 only), block columns 0..2 (the
    // last holds columns 4..7 only).
    let a = Csr::<f64>::from_triplets(
        5,
        7,
        &[
            (0, 0, 1.0),
            (0, 5, 2.0),
            (1, 6, 3.0),
            (3, 1, 4.0),
            (4, 4, 0.0),
            (4, 6, 5.0),
        ],
    )
    .unwrap();
    Bsr::from_csr(a.as_ref(), 2, 4, FillLimit::UNLIMITED)
        .unwrap()
        .into_parts()
}

#[test]
fn bsr_validation_names_the_bad_block() {
    let good = bsr_parts();
    assert_eq!(good.block_row_ptr, [0, 2, 3, 4]);
    assert_eq!(good.block_col, [0, 1, 0, 1]);
    assert!(Bsr::try_new(5, 7, 2, 4, good.clone()).is_ok());
    let corrupt = |f: &dyn Fn(&mut BsrParts<f64>)| {
        let mut parts = good.clone();
        f(&mut parts);
        structure_error(Bsr::try_new(5, 7, 2, 4, parts))
    };
    let msg = corrupt(&|m| m.block_col.swap(0, 1));
    assert!(
        msg.contains("block row 0: block column 0 follows block column 1"),
        "{msg}"
    );
    let msg = corrupt(&|m| m.block_col[2] = 2);
    assert!(
        msg.contains("block 2 (block row 1): block column 2 is outside 0..2"),
        "{msg}"
    );
    // Block 1 covers columns 4..8 of rows 0..2; its column 3 (matrix column 7) is outside.
    let msg = corrupt(&|m| m.mask[1] |= 1 << 3);
    assert!(msg.contains("mask bit 3 marks (0, 7)"), "{msg}");
    // Block 3 covers rows 4..6; its row 1 (matrix row 5) is outside.
    let msg = corrupt(&|m| m.mask[3] |= 1 << 4);
    assert!(msg.contains("mask bit 4 marks (5, 4)"), "{msg}");
    let msg = corrupt(&|m| m.mask[0] |= 1 << 8);
    assert!(msg.contains("mask bit 8"), "{msg}");
    let msg = corrupt(&|m| {
        m.mask[2] = 0;
        m.values[2 * 8 + 5] = 0.0;
    });
    assert!(
        msg.contains("block 2 (block row 1, block column 0) holds no entry"),
        "{msg}"
    );
    let msg = corrupt(&|m| m.values[3] = 7.0);
    assert!(msg.contains("slot 3 holds 7.0 but no entry"), "{msg}");
    let msg = corrupt(&|m| m.block_row_ptr[1] = 4);
    assert!(msg.contains("row pointer decreases at row 1"), "{msg}");
    let msg = corrupt(&|m| m.block_row_ptr[3] = 3);
    assert!(msg.contains("row pointer 3 is 3, expected 4"), "{msg}");
    let msg = corrupt(&|m| {
        m.mask.pop();
    });
    assert!(msg.contains("mask has length 3, expected 4"), "{msg}");
}

/// Up to 40 x 40 with up to 120 triplets; duplicates are summed into one entry.
fn small_matrix() -> impl Strategy<Value = Csr<f64>> {
    (0usize..40, 0usize..40).prop_flat_map(|(rows, cols)| {
        let entry = (0..rows.max(1), 0..cols.max(1), -3i8..4);
        proptest::collection::vec(entry, 0..120).prop_map(move |t| {
            let t: Vec<_> = if rows == 0 || cols == 0 {
                Vec::new()
            } else {
                t.into_iter()
                    .map(|(r, c, v)| (r, c, f64::from(v)))
                    .collect()
            };
            Csr::from_triplets(rows, cols, &t).unwrap()
        })
    })
}

proptest! {
    #[test]
    fn every_format_round_trips(
        a in small_matrix(),
        r in 0usize..5,
        c in 0usize..5,
        w in 0usize..6,
    ) {
        let ell = Ell::from_csr(a.as_ref(), FillLimit::UNLIMITED).unwrap();
        prop_assert!(ell.validate().is_ok());
        prop_assert_eq!(ell.to_csr(), a.clone());
        let percentile = HybWidth::Percentile(19.8 * w as f64 + 1.0);
        for policy in [HybWidth::MinBytes, HybWidth::Fixed(w), percentile] {
            let hyb = Hyb::from_csr(a.as_ref(), policy, FillLimit::UNLIMITED).unwrap();
            prop_assert!(hyb.validate().is_ok());
            prop_assert_eq!(hyb.to_csr(), a.clone());
        }
        let (r, c) = (BSR_BLOCK_SIZES[r], BSR_BLOCK_SIZES[c]);
        let bsr = Bsr::from_csr(a.as_ref(), r, c, FillLimit::UNLIMITED).unwrap();
        prop_assert!(bsr.validate().is_ok());
        prop_assert_eq!(bsr.to_csr(), a);
    }
}
