//! Value orders of every format: each stored slot maps to the CSR entry it holds, and new values
//! written through the order give exactly the slots a fresh conversion of the new CSR has.

use proptest::prelude::*;
use sparse_core::{BlockShape, CsrRef, Error, Format, Result, StructureError};
use sparse_formats::{
    generate, Bsr, Converted, Coo, Csr, DeferredCoo, FillLimit, Hyb, HybWidth, MeBcrs, MeBcrsShape,
    SrBcrs, SrBcrsShape, TileFormat, TileSelection, Tiled16, BSR_BLOCK_SIZES,
};

type Convert = Box<dyn Fn(CsrRef<'_, f64, u32>) -> Result<Converted<f64>>>;

/// Every format with the parameters that change where values sit.
fn conversions() -> Vec<(String, Convert)> {
    let mut all: Vec<(String, Convert)> = Vec::new();
    let limit = FillLimit::UNLIMITED;
    for format in [Format::Coo, Format::Ell] {
        all.push((
            format.to_string(),
            Box::new(move |a| Converted::from_csr(a, format, None, limit)),
        ));
    }
    for policy in [
        HybWidth::MinBytes,
        HybWidth::Fixed(0),
        HybWidth::Fixed(1),
        HybWidth::Fixed(3),
    ] {
        all.push((
            format!("hyb {policy:?}"),
            Box::new(move |a| Ok(Converted::Hyb(Hyb::from_csr(a, policy, limit)?))),
        ));
    }
    for (r, c) in [(1, 1), (2, 4), (4, 4), (16, 2), (8, 16)] {
        all.push((
            format!("bsr {r}x{c}"),
            Box::new(move |a| Ok(Converted::Bsr(Bsr::from_csr(a, r, c, limit)?))),
        ));
    }
    for (h, k) in [(8, 4), (8, 8), (16, 16)] {
        all.push((
            format!("me-bcrs {h}x{k}"),
            Box::new(move |a| {
                let shape = MeBcrsShape::new(h, k)?;
                Ok(Converted::MeBcrs(MeBcrs::from_csr(a, shape, limit)?))
            }),
        ));
    }
    for (v, stride) in [(2, 8), (4, 16), (8, 32)] {
        all.push((
            format!("sr-bcrs {v}x{stride}"),
            Box::new(move |a| {
                let shape = SrBcrsShape::new(v, stride)?;
                Ok(Converted::SrBcrs(SrBcrs::from_csr(a, shape, limit)?))
            }),
        ));
    }
    let deferred = TileSelection {
        deferred_coo: Some(DeferredCoo {
            max_tile_nnz: 12,
            min_matrix_nnz: 0,
        }),
        ..TileSelection::default()
    };
    let mut selections = vec![
        ("default".to_string(), TileSelection::default()),
        ("deferred".to_string(), deferred),
    ];
    selections.extend(TileFormat::ALL.map(|f| (f.to_string(), TileSelection::forced(f))));
    for (name, selection) in selections {
        all.push((
            format!("tiled16 {name}"),
            Box::new(move |a| Ok(Converted::Tiled16(Tiled16::from_csr(a, &selection, limit)?))),
        ));
    }
    all
}

/// Ragged shapes, empty rows, a long row, full rows and columns (the dense tile formats), a
/// matrix past one tile in both directions, and empty shapes.
fn patterns() -> Vec<Csr<f64>> {
    let dense: Vec<_> = (0..9)
        .flat_map(|r| (0..13).map(move |c| (r, c, 1.0)))
        .collect();
    let full_rows: Vec<_> = (0..40)
        .filter(|r| r % 3 == 0)
        .flat_map(|r| (0..35).map(move |c| (r, c, 1.0)))
        .collect();
    let full_cols: Vec<_> = (0..37)
        .flat_map(|r| [(r, 2, 1.0), (r, 17, 1.0), (r, 33, 1.0)])
        .collect();
    let mut long_row: Vec<_> = (0..90).map(|c| (5, c, 1.0)).collect();
    long_row.extend((0..21).step_by(2).map(|r| (r, (r * 7) % 90, 1.0)));
    vec![
        generate::uniform::<f64, u32>(97, 61, 5, 1).unwrap(),
        generate::rmat::<f64, u32>(7, 6, 3).unwrap(),
        generate::poisson2d::<f64, u32>(7).unwrap(),
        Csr::from_triplets(9, 13, &dense).unwrap(),
        Csr::from_triplets(40, 35, &full_rows).unwrap(),
        Csr::from_triplets(37, 35, &full_cols).unwrap(),
        Csr::from_triplets(21, 90, &long_row).unwrap(),
        Csr::zeros(17, 5),
        Csr::zeros(0, 0),
        Csr::zeros(0, 6),
    ]
}

/// `a`'s pattern with the value `value(e)` in entry `e`.
fn with_values(a: &Csr<f64>, value: impl Fn(usize) -> f64) -> Csr<f64> {
    let mut b = a.clone();
    for (e, v) in b.values_mut().iter_mut().enumerate() {
        *v = value(e);
    }
    b
}

/// The stored values of `m` in slot order, the order [`Converted::value_order`] numbers.
fn slot_values(m: &Converted<f64>) -> Vec<f64> {
    match m {
        Converted::Coo(m) => m.values().to_vec(),
        Converted::Ell(m) => m.values().to_vec(),
        Converted::Hyb(m) => [m.ell().values(), m.coo_values()].concat(),
        Converted::Bsr(m) => m.values().to_vec(),
        Converted::MeBcrs(m) => m.values().to_vec(),
        Converted::SrBcrs(m) => m.values().to_vec(),
        Converted::Tiled16(m) => {
            let deferred = m.deferred().map_or(&[][..], |d| d.values());
            [m.values(), deferred].concat()
        }
    }
}

/// Entries numbered 1..=nnz land where the order says; values written through it give the
/// slots of a fresh conversion of the CSR with those values.
fn check(a: &Csr<f64>, name: &str, convert: &Convert) {
    let numbered = with_values(a, |e| e as f64 + 1.0);
    let mut m = convert(numbered.as_ref()).unwrap();
    let order = m.value_order().unwrap();
    assert_eq!(
        (order.len(), order.nnz()),
        (m.stored_slots(), a.nnz()),
        "{name}"
    );
    let slots = slot_values(&m);
    for (s, &v) in slots.iter().enumerate() {
        let expected = order.entry(s).map_or(0.0, |e| e as f64 + 1.0);
        assert_eq!(v, expected, "{name}: slot {s}");
    }
    assert_eq!(order.to_csr_order(&slots).unwrap(), numbered.values());

    let fresh = with_values(a, |e| -0.5 * e as f64 - 3.0);
    m.set_values(&order, fresh.values()).unwrap();
    m.validate().unwrap();
    assert_eq!(m.to_csr().unwrap(), fresh, "{name}");
    let converted = convert(fresh.as_ref()).unwrap();
    assert_eq!(slot_values(&m), slot_values(&converted), "{name}");
}

#[test]
fn every_slot_holds_the_entry_its_order_names() {
    let mut tile_formats = std::collections::BTreeSet::new();
    let mut deferred = false;
    for a in patterns() {
        for (name, convert) in &conversions() {
            check(&a, &format!("{name} on {}x{}", a.rows(), a.cols()), convert);
            if let Converted::Tiled16(m) = convert(a.as_ref()).unwrap() {
                let histogram = m.tile_format_histogram().into_iter();
                tile_formats.extend(histogram.filter(|&(_, n)| n > 0).map(|(f, _)| f));
                deferred |= m.deferred().is_some();
            }
        }
    }
    assert_eq!(
        tile_formats.len(),
        TileFormat::ALL.len(),
        "{tile_formats:?}"
    );
    assert!(deferred);
}

#[test]
fn new_values_must_fit_the_matrix_and_its_order() {
    let a = generate::uniform::<f64, u32>(20, 20, 3, 5).unwrap();
    let b = generate::uniform::<f64, u32>(20, 20, 1, 6).unwrap();
    for (name, convert) in &conversions() {
        let mut m = convert(a.as_ref()).unwrap();
        let order = m.value_order().unwrap();
        let short = vec![1.0; a.nnz() - 1];
        let err = m.set_values(&order, &short).unwrap_err();
        assert!(
            matches!(err, Error::ShapeMismatch { expected, found, .. }
                if expected == (a.nnz(), 1) && found == (a.nnz() - 1, 1)),
            "{name}: {err}"
        );
        let other = convert(b.as_ref()).unwrap().value_order().unwrap();
        let err = m.set_values(&other, b.values()).unwrap_err();
        assert!(
            err.to_string().contains("does not belong to this"),
            "{name}: {err}"
        );
        assert_eq!(
            m.to_csr().unwrap(),
            a,
            "{name}: a refused update changes nothing"
        );
    }
}

#[test]
fn coo_orders_follow_positions_and_refuse_repeats() {
    let unsorted =
        Coo::<f64>::from_triplets(3, 4, &[(2, 1, 1.0), (0, 3, 2.0), (0, 0, 3.0), (1, 2, 4.0)])
            .unwrap();
    let order = unsorted.value_order().unwrap();
    let csr = unsorted.to_csr().unwrap();
    for s in 0..unsorted.nnz() {
        assert_eq!(
            unsorted.values()[s],
            csr.values()[order.entry(s).unwrap()],
            "slot {s}"
        );
    }
    let mut m = unsorted.clone();
    m.set_values(&order, &[10.0, 20.0, 30.0, 40.0]).unwrap();
    assert_eq!(m.to_csr().unwrap().values(), &[10.0, 20.0, 30.0, 40.0]);
    assert_eq!(m.values(), &[40.0, 20.0, 10.0, 30.0]);

    let repeated = Coo::<f64>::from_triplets(2, 2, &[(1, 1, 1.0), (0, 0, 2.0), (1, 1, 3.0)]);
    let err = repeated.unwrap().value_order().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidStructure {
                format: Format::Coo,
                error: StructureError::Duplicate { row: 1, col: 1 }
            }
        ),
        "{err}"
    );
}

#[test]
fn bsr_fill_is_padding_in_the_order() {
    let a = Csr::<f64>::from_triplets(3, 3, &[(0, 0, 1.0), (2, 2, 2.0)]).unwrap();
    let m = Converted::from_csr(
        a.as_ref(),
        Format::Bsr,
        Some(BlockShape::new(2, 2)),
        FillLimit::UNLIMITED,
    )
    .unwrap();
    let order = m.value_order().unwrap();
    let entries: Vec<Option<usize>> = (0..order.len()).map(|s| order.entry(s)).collect();
    assert_eq!(
        entries,
        [Some(0), None, None, None, Some(1), None, None, None]
    );
}

/// Up to 40 x 40 with up to 120 triplets; duplicates are summed into one entry.
fn small_matrix() -> impl Strategy<Value = Csr<f64>> {
    (0usize..40, 0usize..40).prop_flat_map(|(rows, cols)| {
        let entry = (0..rows.max(1), 0..cols.max(1));
        proptest::collection::vec(entry, 0..120).prop_map(move |t| {
            let t: Vec<_> = if rows == 0 || cols == 0 {
                Vec::new()
            } else {
                t.into_iter().map(|(r, c)| (r, c, 1.0)).collect()
            };
            Csr::from_triplets(rows, cols, &t).unwrap()
        })
    })
}

proptest! {
    #[test]
    fn random_patterns_map_every_slot(a in small_matrix(), r in 0usize..5, c in 0usize..5) {
        for (name, convert) in &conversions() {
            check(&a, name, convert);
        }
        let (r, c) = (BSR_BLOCK_SIZES[r], BSR_BLOCK_SIZES[c]);
        let bsr: Convert =
            Box::new(move |a| Ok(Converted::Bsr(Bsr::from_csr(a, r, c, FillLimit::UNLIMITED)?)));
        check(&a, &format!("bsr {r}x{c}"), &bsr);
    }
}
