//! ME-BCRS and SR-BCRS: exact layouts of small hand-made matrices, CSR round trips for every
//! shape parameter, value orders, validation of corrupted arrays and the fill limit.

use proptest::prelude::*;
use sparse_core::{bf16, f16, Error, Scalar};
use sparse_formats::{
    generate, ColumnVectors, Csr, FillLimit, MeBcrs, MeBcrsParts, MeBcrsShape, Rejected,
    SparseFormat, SrBcrs, SrBcrsParts, SrBcrsShape, SR_BCRS_PADDING,
};

fn me_shapes() -> Vec<MeBcrsShape> {
    let mut shapes = Vec::new();
    for h in [8, 16] {
        for k in [4, 8, 16] {
            shapes.push(MeBcrsShape::new(h, k).unwrap());
        }
    }
    shapes
}

fn sr_shapes() -> Vec<SrBcrsShape> {
    let mut shapes = Vec::new();
    for v in [2, 4, 8] {
        for s in [8, 16, 32] {
            shapes.push(SrBcrsShape::new(v, s).unwrap());
        }
    }
    shapes
}

fn me(a: &Csr<f64>, shape: MeBcrsShape) -> MeBcrs<f64> {
    MeBcrs::from_csr(a.as_ref(), shape, FillLimit::UNLIMITED).unwrap()
}

fn sr(a: &Csr<f64>, shape: SrBcrsShape) -> SrBcrs<f64> {
    SrBcrs::from_csr(a.as_ref(), shape, FillLimit::UNLIMITED).unwrap()
}

/// Matrices with the awkward features: dimensions that are not multiples of 8/16/32, empty rows
/// and empty windows, one very long row, explicit zeros, empty shapes.
fn matrices() -> Vec<(&'static str, Csr<f64>)> {
    let mut long_row = vec![(1, 0, 1.0)];
    long_row.extend((0..3000).map(|j| (13, j, (j % 7) as f64 - 3.0)));
    long_row.push((40, 2999, 5.0));
    let mut explicit_zeros = generate::uniform::<f64, u32>(45, 29, 3, 11).unwrap();
    for (e, v) in explicit_zeros.values_mut().iter_mut().enumerate() {
        if e % 3 == 0 {
            *v = 0.0;
        }
    }
    let mut empty_windows = Vec::new();
    for i in (0..200).filter(|i| (i / 16) % 3 == 1) {
        empty_windows.push((i, (i * 7) % 50, 1.0 + i as f64));
    }
    vec![
        ("uniform 37x53", generate::uniform(37, 53, 4, 1).unwrap()),
        ("uniform 100x7", generate::uniform(100, 7, 3, 2).unwrap()),
        (
            "one row 1x1000",
            generate::uniform(1, 1000, 300, 3).unwrap(),
        ),
        ("rmat 2^9", generate::rmat(9, 6, 4).unwrap()),
        ("poisson2d 11", generate::poisson2d(11).unwrap()),
        (
            "empty windows 200x50",
            Csr::from_triplets(200, 50, &empty_windows).unwrap(),
        ),
        ("long row", Csr::from_triplets(41, 3000, &long_row).unwrap()),
        ("explicit zeros", explicit_zeros),
        ("0x0", Csr::zeros(0, 0)),
        ("9x0", Csr::zeros(9, 0)),
        ("0x9", Csr::zeros(0, 9)),
        ("empty 33x17", Csr::zeros(33, 17)),
    ]
}

/// The checks every conversion must pass: validation, nnz, the round trip and the value order.
fn check_conversion<T: Scalar, F: ColumnVectors<T>>(a: &Csr<T>, f: &F, order: Vec<T>, what: &str) {
    f.validate().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(f.shape(), a.shape(), "{what}");
    assert_eq!(f.nnz(), a.nnz(), "{what}");
    assert_eq!(f.stored_slots(), f.slot_values().len(), "{what}");
    assert_eq!(&f.to_csr(), a, "{what}: round trip");
    assert_eq!(order, a.values(), "{what}: value order");
}

#[test]
fn me_bcrs_hand_made_example() {
    // Two windows of 8 rows (the second partial: rows 8-9), blocks of 4 vectors.
    //   window 0: columns 1 2 3 5 6 8 (6 vectors: a full block and a short one of 2)
    //   window 1: column 0 (rows 8, 9) and column 9 (row 9)
    let a = Csr::<f64>::from_triplets(
        10,
        10,
        &[
            (0, 1, 1.0),
            (0, 5, 2.0),
            (2, 2, 3.0),
            (3, 3, 4.0),
            (3, 8, 5.0),
            (7, 1, 6.0),
            (7, 6, 7.0),
            (8, 0, 8.0),
            (9, 0, 9.0),
            (9, 9, 0.0),
        ],
    )
    .unwrap();
    let m = me(&a, MeBcrsShape::tf32());
    assert_eq!(m.window_ptr(), &[0, 6, 8]);
    assert_eq!(m.vec_col(), &[1, 2, 3, 5, 6, 8, 0, 9]);
    assert_eq!(
        m.vec_mask(),
        &[
            0b1000_0001,
            0b100,
            0b1000,
            0b1,
            0b1000_0000,
            0b1000,
            0b11,
            0b10
        ]
    );
    #[rustfmt::skip]
    let expected = [
        // window 0, block 0: 8 rows x columns 1 2 3 5
        1.0, 0.0, 0.0, 2.0,
        0.0, 0.0, 0.0, 0.0,
        0.0, 3.0, 0.0, 0.0,
        0.0, 0.0, 4.0, 0.0,
        0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0,
        6.0, 0.0, 0.0, 0.0,
        // window 0, block 1 (short): 8 rows x columns 6 8
        0.0, 0.0,
        0.0, 0.0,
        0.0, 0.0,
        0.0, 5.0,
        0.0, 0.0,
        0.0, 0.0,
        0.0, 0.0,
        7.0, 0.0,
        // window 1, one short block: 8 rows x columns 0 9; rows 10-15 do not exist
        8.0, 0.0,
        9.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    ];
    assert_eq!(m.values(), expected);
    assert_eq!((m.windows(), m.vectors()), (2, 8));
    assert_eq!(m.blocks_in_window(0), 2);
    assert_eq!(m.block_range(0, 1), 4..6);
    assert_eq!(m.block_range(1, 0), 6..8);
    assert_eq!(m.nnz(), 10);
    assert_eq!(m.memory_bytes(), 3 * 4 + 8 * 4 + 64 * 8 + 8);
    // The explicit zero at (9, 9) is an entry: its mask bit is set and it comes back.
    assert_eq!(m.mask(7), 0b10);
    assert_eq!(m.to_csr(), a);
    let order = m.value_order();
    assert_eq!(order.entry(0), Some(0));
    assert_eq!(order.entry(3), Some(1));
    assert_eq!(order.entry(1), None);
    assert_eq!(order.entry(32 + 2 * 3 + 1), Some(4));

    // 16-row windows: one window, two mask bytes per vector (little-endian).
    let m16 = me(&a, MeBcrsShape::new(16, 8).unwrap());
    assert_eq!(m16.window_ptr(), &[0, 8]);
    assert_eq!(m16.vec_col(), &[0, 1, 2, 3, 5, 6, 8, 9]);
    assert_eq!(&m16.vec_mask()[..4], &[0, 0b11, 0b1000_0001, 0]);
    assert_eq!(m16.mask(0), 0b11 << 8);
    assert_eq!(m16.to_csr(), a);
}

#[test]
fn sr_bcrs_hand_made_example() {
    // The drawing of the module documentation, with stride 8.
    let (a_, b, c, d, e, f, g, h, i) = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0);
    let a = Csr::<f64>::from_triplets(
        4,
        8,
        &[
            (0, 0, a_),
            (0, 2, b),
            (0, 5, c),
            (0, 7, d),
            (1, 0, e),
            (1, 3, f),
            (1, 5, g),
            (2, 4, h),
            (3, 4, i),
        ],
    )
    .unwrap();
    let m = sr(&a, SrBcrsShape::new(2, 8).unwrap());
    let x = SR_BCRS_PADDING;
    assert_eq!(m.row_ptr(), &[0, 5, 8, 9]);
    assert_eq!(
        m.col_idx(),
        &[0, 2, 3, 5, 7, x, x, x, 4, x, x, x, x, x, x, x]
    );
    assert_eq!(
        m.vec_mask(),
        &[3, 1, 2, 3, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]
    );
    #[rustfmt::skip]
    let expected = [
        a_, b, 0.0, c, d, 0.0, 0.0, 0.0,
        e, 0.0, f, g, 0.0, 0.0, 0.0, 0.0,
        h, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        i, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    ];
    assert_eq!(m.values(), expected);
    assert_eq!(m.memory_bytes(), 4 * 4 + 16 * 4 + 32 * 8 + 16);
    assert_eq!(m.to_csr(), a);

    // More vectors than the stride: groups of 8 tiles, each V-major.
    let entries: Vec<_> = (0..11).map(|j| (j % 2, 3 * j, 1.0 + j as f64)).collect();
    let a = Csr::<f64>::from_triplets(2, 40, &entries).unwrap();
    let m = sr(&a, SrBcrsShape::new(2, 8).unwrap());
    assert_eq!(m.row_ptr(), &[0, 11]);
    assert_eq!(m.stored_vectors(), 16);
    #[rustfmt::skip]
    let expected = [
        1.0, 0.0, 3.0, 0.0, 5.0, 0.0, 7.0, 0.0,      // group 0, row 0
        0.0, 2.0, 0.0, 4.0, 0.0, 6.0, 0.0, 8.0,      // group 0, row 1
        9.0, 0.0, 11.0, 0.0, 0.0, 0.0, 0.0, 0.0,     // group 1, row 0
        0.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,     // group 1, row 1
    ];
    assert_eq!(m.values(), expected);
    assert_eq!(m.to_csr(), a);
}

#[test]
fn round_trips_for_every_shape() {
    for (name, a) in matrices() {
        for shape in me_shapes() {
            let m = me(&a, shape);
            let what = format!("{name}, ME-BCRS {shape:?}");
            let order = m.value_order().to_csr_order(m.values()).unwrap();
            check_conversion(&a, &m, order, &what);
            assert!(m.stored_slots() <= a.nnz() * shape.window(), "{what}");
            assert_eq!(m.values().len(), m.vectors() * shape.window(), "{what}");
        }
        for shape in sr_shapes() {
            let m = sr(&a, shape);
            let what = format!("{name}, SR-BCRS {shape:?}");
            let order = m.value_order().to_csr_order(m.values()).unwrap();
            check_conversion(&a, &m, order, &what);
            for i in 0..m.vector_rows() {
                assert_eq!(m.padded_range(i).len() % shape.stride(), 0, "{what}");
                assert!(m.padded_range(i).len() < m.vector_row_range(i).len() + shape.stride());
            }
        }
    }
}

#[test]
fn other_value_types_round_trip() {
    let pattern = generate::uniform::<f64, u32>(50, 40, 5, 9).unwrap();
    let ints = Csr::<i8, u32>::try_new(
        50,
        40,
        pattern.row_ptr().to_vec(),
        pattern.col_idx().to_vec(),
        (0..pattern.nnz()).map(|e| (e % 5) as i8 - 2).collect(),
    )
    .unwrap();
    let m = MeBcrs::from_csr(ints.as_ref(), MeBcrsShape::f16(), FillLimit::UNLIMITED).unwrap();
    check_conversion(
        &ints,
        &m,
        m.value_order().to_csr_order(m.values()).unwrap(),
        "i8 ME",
    );
    let s = SrBcrs::from_csr(
        ints.as_ref(),
        SrBcrsShape::int8(8).unwrap(),
        FillLimit::UNLIMITED,
    )
    .unwrap();
    check_conversion(
        &ints,
        &s,
        s.value_order().to_csr_order(s.values()).unwrap(),
        "i8 SR",
    );

    let halves = pattern.cast::<f16>();
    let m = MeBcrs::from_csr(halves.as_ref(), MeBcrsShape::f16(), FillLimit::UNLIMITED).unwrap();
    check_conversion(
        &halves,
        &m,
        m.value_order().to_csr_order(m.values()).unwrap(),
        "f16",
    );
    let brains = pattern.cast::<bf16>();
    let s = SrBcrs::from_csr(
        brains.as_ref(),
        SrBcrsShape::int4(4).unwrap(),
        FillLimit::UNLIMITED,
    )
    .unwrap();
    check_conversion(
        &brains,
        &s,
        s.value_order().to_csr_order(s.values()).unwrap(),
        "bf16",
    );
}

#[test]
fn wide_indices_convert_and_oversized_dimensions_are_refused() {
    let a = Csr::<f64, u64>::from_triplets(20, 30, &[(3, 29, 1.0), (19, 0, 2.0)]).unwrap();
    let m = MeBcrs::from_csr(a.as_ref(), MeBcrsShape::f16(), FillLimit::default()).unwrap();
    assert_eq!(m.to_csr().with_index::<u64>().unwrap(), a);
    let wide = Csr::<f64, u64>::zeros(1, 1 << 33);
    let overflow = |e: Error| matches!(e, Error::IndexOverflow { value, .. } if value == 1 << 33);
    assert!(overflow(
        MeBcrs::from_csr(wide.as_ref(), MeBcrsShape::f16(), FillLimit::default()).unwrap_err()
    ));
    assert!(overflow(
        SrBcrs::from_csr(
            wide.as_ref(),
            SrBcrsShape::int8(8).unwrap(),
            FillLimit::default()
        )
        .unwrap_err()
    ));
}

#[test]
fn fill_limit_refuses_sr_bcrs_padding_blow_up() {
    // One entry per vector-row: each pads to a whole stride (32 vectors x 8 rows per entry).
    let entries: Vec<_> = (0..2000).map(|i| (8 * i, i % 100, 1.0)).collect();
    let a = Csr::<f64>::from_triplets(16000, 100, &entries).unwrap();
    let limit = FillLimit {
        max_ratio: 32.0,
        min_slots: 0,
    };
    let err = SrBcrs::from_csr(a.as_ref(), SrBcrsShape::int4(8).unwrap(), limit).unwrap_err();
    assert!(
        matches!(
            err,
            Error::FillLimit { slots, nnz: 2000, limit: 64000, .. } if slots == 2000 * 256
        ),
        "{err}"
    );
    // Within the limit: 8 vectors x 2 rows per entry.
    let m = SrBcrs::from_csr(a.as_ref(), SrBcrsShape::new(2, 8).unwrap(), limit).unwrap();
    assert_eq!(m.stored_slots(), 2000 * 16);
    // ME-BCRS pads inside vectors only: at most `window` slots per entry.
    let tight = FillLimit {
        max_ratio: 4.0,
        min_slots: 0,
    };
    assert!(matches!(
        MeBcrs::from_csr(a.as_ref(), MeBcrsShape::f16(), tight),
        Err(Error::FillLimit { .. })
    ));
    assert!(MeBcrs::from_csr(a.as_ref(), MeBcrsShape::f16(), limit).is_ok());
}

/// The structure error of a construction that must fail, checking the arrays came back.
fn rejection<X, P: PartialEq>(result: Result<X, Rejected<P>>, parts: &P) -> String {
    let rejected = result.err().expect("corruption must be caught");
    assert!(rejected.parts == *parts, "the arrays come back unchanged");
    match rejected.error {
        Error::InvalidStructure { error, .. } => error.to_string(),
        other => panic!("expected a structure error, got {other}"),
    }
}

fn me_rejection(rows: usize, cols: usize, shape: MeBcrsShape, parts: MeBcrsParts<f64>) -> String {
    rejection(MeBcrs::try_new(rows, cols, shape, parts.clone()), &parts)
}

fn sr_rejection(rows: usize, cols: usize, shape: SrBcrsShape, parts: SrBcrsParts<f64>) -> String {
    rejection(SrBcrs::try_new(rows, cols, shape, parts.clone()), &parts)
}

#[test]
fn me_bcrs_validation_names_the_corruption() {
    let a = generate::uniform::<f64, u32>(21, 30, 3, 5).unwrap();
    let shape = MeBcrsShape::tf32();
    let good = me(&a, shape).into_parts();
    let rebuilt = MeBcrs::try_new(21, 30, shape, good.clone()).unwrap();
    assert_eq!(rebuilt, me(&a, shape));

    let mut p = good.clone();
    p.vec_col.swap(1, 2);
    assert!(me_rejection(21, 30, shape, p).contains("not above the previous"));

    let mut p = good.clone();
    p.vec_col[0] = 30;
    assert!(me_rejection(21, 30, shape, p).contains("outside 0..30"));

    let mut p = good.clone();
    p.window_ptr[1] = p.window_ptr[2] + 1;
    assert!(me_rejection(21, 30, shape, p).contains("window_ptr decreases at window 1"));

    let mut p = good.clone();
    p.window_ptr[0] = 1;
    assert!(me_rejection(21, 30, shape, p).contains("row pointer 0 is 1"));

    // Window 2 holds rows 16-20: bit 5 is past the last row.
    let mut p = good.clone();
    let last = p.vec_col.len() - 1;
    p.vec_mask[last] |= 1 << 5;
    assert!(me_rejection(21, 30, shape, p).contains("marks rows past the last"));

    let mut p = good.clone();
    p.vec_mask[0] = 0;
    assert!(me_rejection(21, 30, shape, p).contains("has no entry"));

    // A row without an entry must hold zero.
    let m = me(&a, shape);
    let (slot, _) = (0..m.values().len())
        .map(|s| (s, m.value_order().entry(s)))
        .find(|&(_, e)| e.is_none())
        .unwrap();
    let mut p = good.clone();
    p.values[slot] = 1.0;
    assert!(me_rejection(21, 30, shape, p).contains("holds a nonzero value"));

    let mut p = good.clone();
    p.values.pop();
    assert!(me_rejection(21, 30, shape, p).contains("values has length"));

    let mut p = good;
    p.vec_mask.push(1);
    assert!(me_rejection(21, 30, shape, p).contains("vec_mask has length"));
}

#[test]
fn sr_bcrs_validation_names_the_corruption() {
    let a = generate::uniform::<f64, u32>(21, 30, 3, 5).unwrap();
    let shape = SrBcrsShape::new(4, 8).unwrap();
    let good = sr(&a, shape).into_parts();
    assert!(SrBcrs::try_new(21, 30, shape, good.clone()).is_ok());
    let m = sr(&a, shape);
    let padding = (0..m.stored_vectors())
        .find(|&p| m.col_idx()[p] == SR_BCRS_PADDING)
        .unwrap();

    let mut p = good.clone();
    p.col_idx.swap(0, 1);
    assert!(sr_rejection(21, 30, shape, p).contains("not above the previous"));

    let mut p = good.clone();
    p.col_idx[padding] = 3;
    assert!(sr_rejection(21, 30, shape, p).contains("padding vector"));

    let mut p = good.clone();
    p.vec_mask[padding] = 1;
    assert!(sr_rejection(21, 30, shape, p).contains("padding vector"));

    let mut p = good.clone();
    let padding_slot = {
        let group = padding - padding % 8;
        group * 4 + (padding - group)
    };
    p.values[padding_slot] = 2.0;
    assert!(sr_rejection(21, 30, shape, p).contains("holds a nonzero value"));

    // An extra group of padding: the next vector-row does not start where expected.
    let mut p = good.clone();
    p.row_ptr[2] += 8;
    p.row_ptr[3] += 8;
    assert!(sr_rejection(21, 30, shape, p).contains("padded exactly"));

    let mut p = good.clone();
    p.row_ptr[1] = p.row_ptr[0];
    assert!(sr_rejection(21, 30, shape, p).contains("padded exactly"));

    // Vector-row 5 holds row 20 only: bit 1 is past the last row.
    let mut p = good.clone();
    let last_row = 2 * 5;
    let first = p.row_ptr[last_row] as usize;
    p.vec_mask[first] |= 0b10;
    assert!(sr_rejection(21, 30, shape, p).contains("marks rows past the last"));

    let mut p = good.clone();
    p.row_ptr.pop();
    assert!(sr_rejection(21, 30, shape, p).contains("row_ptr has length"));

    let mut p = good;
    p.col_idx.extend([SR_BCRS_PADDING; 8]);
    p.vec_mask.extend([0; 8]);
    p.values.extend([0.0; 32]);
    assert!(sr_rejection(21, 30, shape, p).contains("vector-rows end at"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_matrices_round_trip(
        rows in 0usize..70,
        cols in 0usize..70,
        density in 0.0f64..0.4,
        seed in any::<u64>(),
        me_index in 0usize..6,
        sr_index in 0usize..9,
    ) {
        let mut rng = generate::SplitMix64::new(seed);
        let mut entries = Vec::new();
        for i in 0..rows {
            for j in 0..cols {
                if rng.next_f64() < density {
                    entries.push((i, j, (rng.below(9) as f64) - 4.0));
                }
            }
        }
        let a = Csr::<f64>::from_triplets(rows, cols, &entries).unwrap();
        let m = me(&a, me_shapes()[me_index]);
        check_conversion(&a, &m, m.value_order().to_csr_order(m.values()).unwrap(), "ME");
        let s = sr(&a, sr_shapes()[sr_index]);
        check_conversion(&a, &s, s.value_order().to_csr_order(s.values()).unwrap(), "SR");
    }
}
