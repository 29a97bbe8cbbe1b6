//! Every matrix of the shared corpus (../shared/matrices, outside the repository) loads, with the
//! shape and entry count MANIFEST.tsv gives. Skipped with a message where the corpus is absent.

use std::io::BufReader;
use std::path::Path;

use flate2::read::MultiGzDecoder;

use rayon::prelude::*;
use sparse_core::Result;
use sparse_formats::mtx::{self, MtxData, MtxField, MtxSymmetry};
use sparse_formats::Csr;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/matrices");

struct Expected {
    file: String,
    rows: usize,
    cols: usize,
    /// Stored entries after symmetric expansion, explicit zeros included (see the corpus README).
    nnz: usize,
}

fn manifest(dir: &Path) -> Option<Vec<Expected>> {
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).ok()?;
    let mut lines = text.lines();
    let header: Vec<_> = lines.next()?.split('\t').collect();
    assert_eq!(
        header[..4],
        ["file", "rows", "cols", "nnz"],
        "MANIFEST.tsv columns changed"
    );
    let parse = |s: &str| s.parse::<usize>().expect("a count in MANIFEST.tsv");
    Some(
        lines
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let f: Vec<_> = l.split('\t').collect();
                Expected {
                    file: f[0].to_string(),
                    rows: parse(f[1]),
                    cols: parse(f[2]),
                    nnz: parse(f[3]),
                }
            })
            .collect(),
    )
}

fn check(dir: &Path, e: &Expected) -> Result<(), String> {
    let fail = |what: String| format!("{}: {what}", e.file);
    let data: MtxData<f64> =
        mtx::read_matrix_market(dir.join(&e.file)).map_err(|err| fail(err.to_string()))?;
    let h = *data.header();
    if (h.rows, h.cols) != (e.rows, e.cols) {
        return Err(fail(format!(
            "shape {}x{}, manifest says {}x{}",
            h.rows, h.cols, e.rows, e.cols
        )));
    }
    let MtxData::Sparse { matrix, .. } = &data else {
        return Err(fail(
            "an array file; the corpus holds coordinate files".into(),
        ));
    };
    let expanded = matrix.nnz();
    if expanded != e.nnz {
        return Err(fail(format!(
            "{expanded} entries after expansion, manifest says {}",
            e.nnz
        )));
    }
    let bounds = match h.symmetry {
        MtxSymmetry::General => expanded == h.entries,
        _ => (h.entries..=2 * h.entries).contains(&expanded),
    };
    if !bounds {
        return Err(fail(format!(
            "{expanded} entries from {} stored",
            h.entries
        )));
    }
    let csr = data
        .to_csr()
        .and_then(|a| a.with_index::<u32>())
        .map_err(|err| fail(err.to_string()))?;
    csr.validate().map_err(|err| fail(err.to_string()))?;
    if csr.nnz() > expanded {
        return Err(fail(format!(
            "CSR has {} entries, more than the {expanded} read",
            csr.nnz()
        )));
    }
    if h.field == MtxField::Real && oracle(&dir.join(&e.file)).map_err(fail)? != csr {
        return Err(fail("values differ from those sprs reads".into()));
    }
    Ok(())
}

/// The same file read by sprs, an independent reader (it reads `real` files only into f64).
fn oracle(path: &Path) -> Result<Csr<f64>, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(MultiGzDecoder::new(BufReader::new(file)));
    let tri = sprs::io::read_matrix_market_from_bufread::<f64, usize, _>(&mut reader)
        .map_err(|e| format!("sprs: {e}"))?;
    let m: sprs::CsMat<f64> = tri.to_csr();
    Csr::from_sprs(m.view()).map_err(|e| e.to_string())
}

#[test]
fn every_corpus_matrix_loads_with_its_manifest_shape() {
    let dir = Path::new(CORPUS);
    let Some(expected) = manifest(dir) else {
        println!(
            "skipping: no corpus at {} (MANIFEST.tsv not found)",
            dir.display()
        );
        return;
    };
    // Every matrix file present must be listed, so that none goes unchecked.
    let listed: Vec<&str> = expected.iter().map(|e| e.file.as_str()).collect();
    let mut present: Vec<String> = std::fs::read_dir(dir)
        .expect("the corpus directory lists")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".mtx") || name.ends_with(".mtx.gz"))
        .collect();
    present.sort();
    for name in &present {
        assert!(
            listed.contains(&name.as_str()),
            "{name} is not in MANIFEST.tsv"
        );
    }
    assert_eq!(
        present.len(),
        expected.len(),
        "MANIFEST.tsv lists files that are absent"
    );

    let failures: Vec<String> = expected
        .par_iter()
        .filter_map(|e| check(dir, e).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} matrices failed:\n{}",
        failures.len(),
        expected.len(),
        failures.join("\n")
    );
    println!("{} corpus matrices read and checked", expected.len());
}
