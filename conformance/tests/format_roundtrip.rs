//! CSR -> F -> CSR is the identity for every format and block shape, on every structured
//! generator and every corpus matrix. A padded format may refuse a matrix with
//! `Error::FillLimit` (ELL on one very long row, BSR 16x16 on a scattered graph); nothing else
//! may fail.

use std::time::Instant;

use conformance::{corpus, generators};
use sparse_blas::{generate, BlockShape, Converted, Csr, Error, FillLimit, Format};

/// Every conversion the formats offer: (format, block shape).
fn conversions() -> Vec<(Format, Option<BlockShape>)> {
    let mut out: Vec<(Format, Option<BlockShape>)> =
        [Format::Coo, Format::Ell, Format::Hyb, Format::Tiled16]
            .into_iter()
            .map(|f| (f, None))
            .collect();
    let blocks = |format, shapes: &[(usize, usize)]| {
        shapes
            .iter()
            .map(move |&(r, c)| (format, Some(BlockShape::new(r, c))))
            .collect::<Vec<_>>()
    };
    out.extend(blocks(
        Format::Bsr,
        &[
            (1, 1),
            (2, 2),
            (4, 4),
            (8, 8),
            (16, 16),
            (2, 8),
            (16, 4),
            (8, 1),
        ],
    ));
    out.extend(blocks(Format::MeBcrs, &[(8, 4), (8, 8), (16, 8), (8, 16)]));
    out.extend(blocks(
        Format::SrBcrs,
        &[(2, 16), (4, 16), (8, 16), (8, 8), (4, 32)],
    ));
    out
}

/// Round trips of one matrix; returns the refusals (fill limit) it met.
fn round_trip(name: &str, a: &Csr<f64>) -> usize {
    let mut refused = 0;
    for (format, block) in conversions() {
        let what = format!(
            "{name} as {format}{}",
            block.map(|b| format!(" {b}")).unwrap_or_default()
        );
        let converted = match Converted::from_csr(a.as_ref(), format, block, FillLimit::default()) {
            Ok(c) => c,
            Err(Error::FillLimit { .. }) => {
                refused += 1;
                continue;
            }
            Err(e) => panic!("{what}: conversion failed: {e}"),
        };
        assert_eq!(converted.format(), format, "{what}");
        converted
            .validate()
            .unwrap_or_else(|e| panic!("{what}: the conversion does not validate: {e}"));
        let back = converted
            .to_csr()
            .unwrap_or_else(|e| panic!("{what}: back to csr failed: {e}"));
        assert_eq!(&back, a, "{what}: the round trip changed the matrix");
        assert!(converted.stored_slots() >= a.nnz(), "{what}");
        let order = converted
            .value_order()
            .unwrap_or_else(|e| panic!("{what}: no value order: {e}"));
        let values: Vec<f64> = (0..order.len())
            .map(|s| order.entry(s).map_or(0.0, |e| a.values()[e]))
            .collect();
        assert_eq!(order.to_csr_order(&values).unwrap(), a.values(), "{what}");
    }
    refused
}

/// Every third value set to an explicit zero: a zero entry must survive every conversion.
fn with_explicit_zeros(a: &Csr<f64>) -> Csr<f64> {
    let mut z = a.clone();
    z.values_mut().iter_mut().step_by(3).for_each(|v| *v = 0.0);
    z
}

#[test]
fn generated_matrices_round_trip() {
    let started = Instant::now();
    let mut matrices: Vec<(String, Csr<f64>)> = generators::patterns()
        .into_iter()
        .map(|(n, a)| (n.to_string(), a))
        .collect();
    matrices.push(("poisson2d 37".into(), generate::poisson2d(37).unwrap()));
    matrices.push(("poisson3d 11".into(), generate::poisson3d(11).unwrap()));
    matrices.push(("rmat 2^11".into(), generate::rmat(11, 8, 7).unwrap()));
    matrices.push((
        "uniform 1001x333".into(),
        generate::uniform(1001, 333, 5, 9).unwrap(),
    ));
    let zeros: Vec<(String, Csr<f64>)> = matrices
        .iter()
        .map(|(n, a)| (format!("{n} with explicit zeros"), with_explicit_zeros(a)))
        .collect();
    matrices.extend(zeros);
    let refused: usize = matrices.iter().map(|(n, a)| round_trip(n, a)).sum();
    println!(
        "{} matrices x {} conversions, {refused} refused by the fill limit, in {:.1?}",
        matrices.len(),
        conversions().len(),
        started.elapsed()
    );
}

#[test]
fn corpus_matrices_round_trip() {
    let dir = corpus::default_dir();
    if !dir.is_dir() {
        println!("skipped: no corpus at {}", dir.display());
        return;
    }
    let started = Instant::now();
    let files = corpus::files(&dir).expect("the corpus directory is readable");
    let mut refused = 0;
    for path in &files {
        let a = match corpus::load(path, None).expect("corpus matrices load") {
            corpus::Loaded::Matrix(a) => a,
            corpus::Loaded::TooLarge(_) => unreachable!("no size limit was given"),
        };
        refused += round_trip(&path.display().to_string(), &a);
    }
    println!(
        "{} corpus matrices x {} conversions, {refused} refused by the fill limit, in {:.1?}",
        files.len(),
        conversions().len(),
        started.elapsed()
    );
}
