//! Tiled16: the selection rule on a hand-made matrix, payload layouts, round trips through CSR
//! under the default rule and every forced format, deferred COO, and corruption caught by
//! validate.

use sparse_core::{CsrRef, Error};
use sparse_formats::{
    generate, Csr, DeferredCoo, FillLimit, SparseFormat, TileFormat, TileSelection, Tiled16,
    Tiled16Parts,
};

/// An integer value that is zero at some positions, so explicit zeros are covered.
fn value(row: usize, col: usize) -> f64 {
    ((row * 7 + col * 3) % 11) as f64 - 5.0
}

fn cells(
    tile_row: usize,
    tile_col: usize,
    cells: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<(usize, usize, f64)> {
    cells
        .into_iter()
        .map(|(r, c)| {
            let (row, col) = (16 * tile_row + r, 16 * tile_col + c);
            (row, col, value(row, col))
        })
        .collect()
}

/// 40 x 70 (tile rows of 16, 16, 8; tile columns of 16 x 4 and 6) whose tiles pick every format
/// under the default rule; rows 36..40 are empty.
fn seven_formats() -> Csr<f64> {
    let mut t = Vec::new();
    t.extend(cells(
        0,
        0,
        (0..16).flat_map(|r| (0..12).map(move |c| (r, c))),
    ));
    t.extend(cells(0, 1, [(0, 0), (5, 9), (15, 15)]));
    t.extend(cells(0, 2, (0..16).flat_map(|c| [(3, c), (9, c)])));
    t.extend(cells(0, 3, (0..16).flat_map(|r| [(r, 2), (r, 7)])));
    t.extend(cells(
        1,
        0,
        (0..16).flat_map(|r| [(r, r), (r, (r + 1) % 16)]),
    ));
    t.extend(cells(
        1,
        1,
        (0..16).map(|r| (r, r)).chain((0..3).map(|r| (r, r + 8))),
    ));
    t.extend(cells(
        1,
        2,
        (0..16).map(|c| (0, c)).chain((1..5).map(|r| (r, 0))),
    ));
    t.extend(cells(1, 4, [(2, 1), (14, 5)]));
    t.extend(cells(2, 0, [(1, 3), (1, 4), (3, 0), (3, 15)]));
    t.extend(cells(
        2,
        4,
        [1, 4, 6]
            .into_iter()
            .flat_map(|r| (0..6).map(move |c| (r, c))),
    ));
    Csr::from_triplets(40, 70, &t).unwrap()
}

fn convert(a: &Csr<f64>, selection: &TileSelection) -> Tiled16<f64> {
    Tiled16::from_csr(a.as_ref(), selection, FillLimit::UNLIMITED).unwrap()
}

/// The payload bytes and values of tile `t`.
fn payload(m: &Tiled16<f64>, t: usize) -> (&[u8], &[f64]) {
    let (b, v) = (m.byte_ptr(), m.value_ptr());
    (
        &m.payload_bytes()[b[t] as usize..b[t + 1] as usize],
        &m.values()[v[t] as usize..v[t + 1] as usize],
    )
}

#[test]
fn the_default_rule_picks_every_format() {
    use TileFormat::*;
    let a = seven_formats();
    let m = convert(&a, &TileSelection::default());
    assert_eq!(m.tile_ptr(), &[0, 4, 8, 10]);
    assert_eq!(m.tile_col(), &[0, 1, 2, 3, 0, 1, 2, 4, 0, 4]);
    assert_eq!(
        m.tile_format(),
        &[Dense, Coo, DenseRow, DenseCol, Ell, Hyb, Csr, Coo, Coo, DenseRow]
    );
    assert_eq!(
        m.tile_nnz(),
        &[0, 192, 195, 227, 259, 291, 310, 330, 332, 336, 354]
    );
    assert_eq!(
        m.tile_format_histogram(),
        vec![
            (Csr, 1),
            (Coo, 3),
            (Ell, 1),
            (Hyb, 1),
            (Dense, 1),
            (DenseRow, 2),
            (DenseCol, 1)
        ]
    );
    assert!(m.deferred().is_none());
    assert_eq!(m.to_csr(), a);
    assert_eq!(m.tiles().len(), 10);
    assert!(m
        .tiles()
        .zip(m.tile_format())
        .all(|(t, &f)| t.format() == f));
    let debug = format!("{m:?}");
    assert!(
        debug.starts_with("Tiled16 { shape: 40x70, tiles: 10, nnz_in_tiles: 354"),
        "{debug}"
    );
    assert!(debug.len() < 200, "{debug}");
}

#[test]
fn payloads_follow_the_documented_layouts() {
    let a = seven_formats();
    let m = convert(&a, &TileSelection::default());
    let v = |r: usize, c: usize| value(r, c);

    // Dense (0, 0): 192 occupied cells of 256, column-major, occupancy bit c*16 + r.
    let (bytes, values) = payload(&m, 0);
    assert_eq!(bytes.len(), 32);
    assert!(bytes[..24].iter().all(|&b| b == 0xFF) && bytes[24..].iter().all(|&b| b == 0));
    assert_eq!(values.len(), 256);
    assert_eq!((values[16 * 3 + 5], values[16 * 13 + 5]), (v(5, 3), 0.0));

    // Coo (0, 1): one (row << 4 | col) byte per entry.
    let (bytes, values) = payload(&m, 1);
    assert_eq!(bytes, &[0x00, 0x59, 0xFF]);
    assert_eq!(values, &[v(0, 16), v(5, 25), v(15, 31)]);

    // DenseRow (0, 2): mask of rows 3 and 9, then the two rows.
    let (bytes, values) = payload(&m, 2);
    assert_eq!(bytes, &[0x08, 0x02]);
    let rows: Vec<f64> = [3, 9]
        .iter()
        .flat_map(|&r| (32..48).map(move |c| v(r, c)))
        .collect();
    assert_eq!(values, rows.as_slice());

    // DenseCol (0, 3): mask of columns 2 and 7, then the two columns.
    let (bytes, values) = payload(&m, 3);
    assert_eq!(bytes, &[0x84, 0x00]);
    assert_eq!(
        (values[0], values[16], values.len()),
        (v(0, 50), v(0, 55), 32)
    );

    // Ell (1, 0): width 2, both slot columns full, columns (r, r+1) slot-column by slot-column.
    let (bytes, values) = payload(&m, 4);
    assert_eq!(&bytes[..5], &[2, 0xFF, 0xFF, 0xFF, 0xFF]);
    assert_eq!(bytes[5], 0x10);
    assert_eq!(bytes[5 + 8], 0x21);
    // Row 15 holds columns 0 and 15.
    assert_eq!(
        (values[1], values[15], values[16 + 15]),
        (v(17, 1), v(31, 0), v(31, 15))
    );

    // Hyb (1, 1): width 1 over all rows, then rows 0..3 overflow into the COO part.
    let (bytes, values) = payload(&m, 5);
    assert_eq!(
        bytes,
        &[1, 0xFF, 0xFF, 0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0x08, 0x19, 0x2A]
    );
    assert_eq!(&values[16..], &[v(16, 24), v(17, 25), v(18, 26)]);

    // Csr (1, 2): 16 row starts, then 20 column nibbles.
    let (bytes, values) = payload(&m, 6);
    let mut starts = vec![0u8, 16, 17, 18, 19];
    starts.resize(16, 20);
    assert_eq!(&bytes[..16], starts.as_slice());
    assert_eq!(
        &bytes[16..],
        &[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE, 0, 0]
    );
    assert_eq!(values.len(), 20);

    // DenseRow (2, 4): an 8 x 6 corner tile with full rows 1, 4 and 6.
    let (bytes, values) = payload(&m, 9);
    assert_eq!(bytes, &[0x52, 0x00]);
    assert_eq!(values.len(), 18);
    let corner = m.tiles().last().unwrap();
    assert_eq!((corner.height, corner.width), (8, 6));
}

fn structured() -> Vec<(&'static str, Csr<f64>)> {
    let uniform = generate::uniform::<f64, u32>(75, 53, 5, 1).unwrap();
    let mut zeros = generate::uniform::<f64, u32>(41, 90, 9, 2).unwrap();
    for (k, v) in zeros.values_mut().iter_mut().enumerate() {
        *v = if k % 3 == 0 { 0.0 } else { (k % 5) as f64 };
    }
    let mut long_row: Vec<_> = (0..333).map(|c| (17, c, 1.0 + (c % 4) as f64)).collect();
    long_row.extend((0..50).map(|r| (r, (r * 13) % 333, -2.0)));
    let empty_rows: Vec<_> = (0..60)
        .filter(|r| r % 5 == 1 || (20..40).contains(r))
        .flat_map(|r| [(r, r % 31, 1.0), (r, 30, 2.0)])
        .collect();
    let blocks: Vec<_> = (0..30)
        .flat_map(|r| (0..30).map(move |c| (r, c)))
        .filter(|&(r, c)| (r / 5 + c / 7) % 2 == 0)
        .map(|(r, c)| (r, c, value(r, c)))
        .collect();
    vec![
        ("uniform 75x53", uniform),
        ("explicit zeros 41x90", zeros),
        (
            "one long row",
            Csr::from_triplets(50, 333, &long_row).unwrap(),
        ),
        (
            "empty rows",
            Csr::from_triplets(60, 31, &empty_rows).unwrap(),
        ),
        ("blocks 30x30", Csr::from_triplets(30, 30, &blocks).unwrap()),
        ("poisson 7x7", generate::poisson2d::<f64, u32>(7).unwrap()),
        ("rmat 2^8", generate::rmat::<f64, u32>(8, 6, 3).unwrap()),
        ("seven formats", seven_formats()),
        (
            "dense 19x21",
            Csr::from_triplets(
                19,
                21,
                &(0..19 * 21)
                    .map(|k| (k / 21, k % 21, value(k, 1)))
                    .collect::<Vec<_>>(),
            )
            .unwrap(),
        ),
        ("0x0", Csr::zeros(0, 0)),
        ("7x0", Csr::zeros(7, 0)),
        ("0x7", Csr::zeros(0, 7)),
        ("empty 33x18", Csr::zeros(33, 18)),
    ]
}

fn selections() -> Vec<(String, TileSelection)> {
    let mut all = vec![
        ("default".to_string(), TileSelection::default()),
        (
            "default, deferred".to_string(),
            TileSelection {
                deferred_coo: Some(DeferredCoo {
                    max_tile_nnz: 12,
                    min_matrix_nnz: 0,
                }),
                ..TileSelection::default()
            },
        ),
    ];
    all.extend(
        TileFormat::ALL
            .iter()
            .map(|&f| (format!("forced {f}"), TileSelection::forced(f))),
    );
    all
}

#[test]
fn csr_round_trips_under_every_selection() {
    for (name, a) in structured() {
        for (rule, selection) in selections() {
            let m = convert(&a, &selection);
            m.validate()
                .unwrap_or_else(|e| panic!("{name}, {rule}: {e}"));
            assert_eq!(m.to_csr(), a, "{name}, {rule}");
            assert_eq!(SparseFormat::nnz(&m), a.nnz(), "{name}, {rule}");
            assert!(m.stored_slots() >= a.nnz(), "{name}, {rule}");
            let in_tiles: usize = m.tiles().map(|t| t.nnz).sum();
            assert_eq!(in_tiles, m.stored_nnz(), "{name}, {rule}");
            if let Some(forced) = selection.forced {
                assert!(
                    m.tile_format()
                        .iter()
                        .all(|&f| f == forced || f == TileFormat::Csr),
                    "{name}, {rule}"
                );
            }
            let rebuilt = Tiled16::try_new(a.rows(), a.cols(), m.clone().into_parts()).unwrap();
            assert_eq!(rebuilt, m, "{name}, {rule}");
        }
    }
}

#[test]
fn forced_formats_hold_every_tile_they_can() {
    let a = seven_formats();
    for format in [
        TileFormat::Coo,
        TileFormat::Ell,
        TileFormat::Hyb,
        TileFormat::Dense,
    ] {
        let m = convert(&a, &TileSelection::forced(format));
        assert!(m.tile_format().iter().all(|&f| f == format), "{format}");
    }
    // Only the two dense-row tiles have nothing but full rows.
    let m = convert(&a, &TileSelection::forced(TileFormat::DenseRow));
    let rows = m.tile_format_histogram()[5];
    assert_eq!(rows, (TileFormat::DenseRow, 2));
}

#[test]
fn deferred_coo_moves_sparse_tiles_into_a_csr() {
    let a = seven_formats();
    let selection = TileSelection {
        deferred_coo: Some(DeferredCoo {
            max_tile_nnz: 12,
            min_matrix_nnz: 0,
        }),
        ..TileSelection::default()
    };
    let m = convert(&a, &selection);
    let deferred = m.deferred().expect("three COO tiles are deferred");
    assert_eq!(deferred.nnz(), 3 + 2 + 4);
    assert_eq!(m.num_tiles(), 7);
    assert_eq!(m.tile_format_histogram()[1], (TileFormat::Coo, 0));
    assert_eq!(
        deferred.as_ref().row(5),
        (&[25u32][..], &[value(5, 25)][..])
    );
    assert_eq!(m.to_csr(), a);
    // Below the paper's 1.8M entries the default defers nothing.
    assert!(convert(&a, &TileSelection::default()).deferred().is_none());
}

#[test]
fn other_value_types_round_trip() {
    let a = generate::uniform::<f64, u32>(45, 38, 7, 9).unwrap();
    let small = Csr::<i8>::from_triplets(
        45,
        38,
        &(0..45)
            .flat_map(|r| {
                a.as_ref()
                    .row(r)
                    .0
                    .iter()
                    .map(move |&c| (r, c as usize, (r % 7) as i8 - 3))
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    for (_, selection) in selections() {
        let m = Tiled16::from_csr(small.as_ref(), &selection, FillLimit::UNLIMITED).unwrap();
        m.validate().unwrap();
        assert_eq!(m.to_csr(), small);
    }
    let wide = a.with_index::<u64>().unwrap().cast::<sparse_core::f16>();
    let m = Tiled16::from_csr(
        wide.as_ref(),
        &TileSelection::default(),
        FillLimit::UNLIMITED,
    )
    .unwrap();
    assert_eq!(m.to_csr(), a.cast::<sparse_core::f16>());
}

#[test]
fn padding_beyond_the_fill_limit_is_refused() {
    let a = generate::uniform::<f64, u32>(200, 200, 1, 4).unwrap();
    let limit = FillLimit {
        max_ratio: 4.0,
        min_slots: 0,
    };
    let dense = TileSelection::forced(TileFormat::Dense);
    let err = Tiled16::from_csr(a.as_ref(), &dense, limit).unwrap_err();
    assert!(matches!(err, Error::FillLimit { .. }), "{err}");
    assert!(Tiled16::from_csr(a.as_ref(), &TileSelection::default(), limit).is_ok());
}

#[test]
fn dimensions_and_thresholds_are_checked() {
    let too_wide = CsrRef::<f64, u64>::try_new(1, 1 << 33, &[0, 0], &[], &[]).unwrap();
    let err =
        Tiled16::from_csr(too_wide, &TileSelection::default(), FillLimit::UNLIMITED).unwrap_err();
    assert!(matches!(err, Error::IndexOverflow { .. }), "{err}");
    let bad = TileSelection {
        dense_min_fill: 1.5,
        ..TileSelection::default()
    };
    let a = seven_formats();
    assert!(Tiled16::from_csr(a.as_ref(), &bad, FillLimit::UNLIMITED).is_err());
}

/// try_new on the parts of the seven-format matrix after `corrupt`; the error message.
fn rejected(selection: &TileSelection, corrupt: impl FnOnce(&mut Tiled16Parts<f64>)) -> String {
    rejected_from(&seven_formats(), selection, corrupt)
}

fn rejected_from(
    a: &Csr<f64>,
    selection: &TileSelection,
    corrupt: impl FnOnce(&mut Tiled16Parts<f64>),
) -> String {
    let mut parts = convert(a, selection).into_parts();
    corrupt(&mut parts);
    let expected = parts.clone();
    let r = Tiled16::try_new(a.rows(), a.cols(), parts).unwrap_err();
    assert_eq!(r.parts, expected, "the parts come back");
    assert!(matches!(r.error, Error::InvalidStructure { .. }));
    r.to_string()
}

#[test]
fn validate_catches_in_tile_indices_beyond_an_edge_tile() {
    // Tile 7 is the COO tile (1, 4), 16 x 6: column nibble 6 is past its edge.
    let msg = rejected(&TileSelection::default(), |p| {
        let at = p.byte_ptr[7] as usize;
        p.payload_bytes[at] = 0x26;
    });
    assert!(
        msg.contains("tile 7 (tile row 1, tile column 4, 16x6 coo)"),
        "{msg}"
    );
    assert!(msg.contains("outside the 16x6 tile"), "{msg}");
    // The same tile forced to CSR: the first column nibble follows its 16 row starts.
    let msg = rejected(&TileSelection::forced(TileFormat::Csr), |p| {
        let at = p.byte_ptr[7] as usize + 16;
        p.payload_bytes[at] = 0x0F;
    });
    assert!(
        msg.contains("16x6 csr") && msg.contains("outside the 16x6 tile"),
        "{msg}"
    );
    // A 13 x 3 dense corner tile (39 cells in 5 bytes) with occupancy bit 39 set.
    let corner = Csr::from_triplets(13, 19, &[(0, 0, 1.0), (12, 18, 2.0)]).unwrap();
    let msg = rejected_from(&corner, &TileSelection::forced(TileFormat::Dense), |p| {
        let at = p.byte_ptr[2] as usize - 1;
        p.payload_bytes[at] |= 0x80;
    });
    assert!(
        msg.contains("13x3 dense") && msg.contains("bit 39 is set, outside"),
        "{msg}"
    );
    // An ELL slot mask naming a row below an 8-row tile.
    let msg = rejected(&TileSelection::forced(TileFormat::Ell), |p| {
        let at = p.byte_ptr[8] as usize + 2;
        p.payload_bytes[at] |= 0x01;
    });
    assert!(
        msg.contains("8x16 ell") && msg.contains("outside the tile's 8"),
        "{msg}"
    );
}

#[test]
fn validate_catches_unsorted_tile_columns() {
    let msg = rejected(&TileSelection::default(), |p| p.tile_col.swap(4, 5));
    assert!(
        msg.contains("tile 5 (tile row 1): tile column 0 follows tile column 1"),
        "{msg}"
    );
    let msg = rejected(&TileSelection::default(), |p| p.tile_col[3] = 5);
    assert!(msg.contains("tile column 5 is outside 0..5"), "{msg}");
}

#[test]
fn validate_catches_bad_tile_nnz() {
    let msg = rejected(&TileSelection::default(), |p| p.tile_nnz[1] += 1);
    assert!(
        msg.contains("tile 0") && msg.contains("expected 193"),
        "{msg}"
    );
    let msg = rejected(&TileSelection::default(), |p| p.tile_nnz[2] = 500);
    assert!(msg.contains("tile_nnz decreases at 3"), "{msg}");
    let msg = rejected(&TileSelection::default(), |p| {
        p.tile_nnz.pop();
    });
    assert!(msg.contains("tile_nnz has length 10, expected 11"), "{msg}");
}

#[test]
fn validate_catches_other_corruption() {
    let msg = rejected(&TileSelection::default(), |p| {
        p.tile_format[1] = TileFormat::Csr
    });
    assert!(
        msg.contains("tile 1") && msg.contains("payload holds"),
        "{msg}"
    );
    let msg = rejected(&TileSelection::default(), |p| {
        *p.tile_ptr.last_mut().unwrap() = 9
    });
    assert!(msg.contains("tile_ptr[3] is 9, expected 10"), "{msg}");
    let msg = rejected(&TileSelection::default(), |p| {
        let hyb = p.byte_ptr[5] as usize;
        p.payload_bytes[hyb + 11] = 0x00;
    });
    assert!(
        msg.contains("hyb): entry 0 of row 0: column 0 follows column 0"),
        "{msg}"
    );
    let msg = rejected(&TileSelection::default(), |p| {
        p.deferred = Some(Csr::from_triplets(40, 70, &[(2, 3, 1.0)]).unwrap());
    });
    assert!(
        msg.contains("deferred entry (2, 3) lies in stored tile (0, 0)"),
        "{msg}"
    );
}
