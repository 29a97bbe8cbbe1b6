//! The corpus of real matrices: where it is, its files, its cases, and loading one.

use std::path::{Path, PathBuf};

use sparse_blas::io::{read_csr, read_header};
use sparse_blas::{Csr, Error, Layout, OpKind, Result};

use crate::case::{Case, Fill, MatrixSource, Profile, Strides};

/// Environment variable naming the corpus directory (the binary runs on machines without the
/// source tree).
pub const CORPUS_ENV: &str = "SPARSE_CORPUS";

/// Dense width of corpus cases in the binary: small, so that SpMM, SDDMM and attention stay
/// fast on the largest matrices.
pub const CORPUS_WIDTH: usize = 32;

/// `../shared/matrices` next to the workspace this crate was built in.
pub fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/matrices")
}

/// The `*.mtx` and `*.mtx.gz` files of `dir`, sorted by name.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |e| Error::io(Some(dir.to_path_buf()), e);
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.is_some_and(|n| n.ends_with(".mtx") || n.ends_with(".mtx.gz")) && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// A corpus file as the suite uses it.
pub enum Loaded {
    Matrix(Csr<f64>),
    /// More stored entries than the limit (the count, from the header or after loading).
    TooLarge(usize),
}

/// Reads a corpus file, unless it holds more than `max_nnz` entries (judged from its header
/// first, so that large files are skipped without being read).
///
/// The values are scaled by a power of two (exactly) so that the largest magnitude lies in
/// (0.5, 1]: real matrices hold values far outside the f16 range, and the structure, not the
/// scale, is what they test.
pub fn load(path: &Path, max_nnz: Option<usize>) -> Result<Loaded> {
    let limit = max_nnz.unwrap_or(usize::MAX);
    let header = read_header(path)?;
    if header.entries > limit {
        return Ok(Loaded::TooLarge(header.entries));
    }
    let mut a: Csr<f64> = read_csr::<f64, u32>(path)?;
    if a.nnz() > limit {
        return Ok(Loaded::TooLarge(a.nnz()));
    }
    let max = a.values().iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if max > 0.0 && max.is_finite() {
        let scale = 2f64.powi(-(max.log2().ceil() as i32));
        a.values_mut().iter_mut().for_each(|v| *v *= scale);
    }
    Ok(Loaded::Matrix(a))
}

/// Cases for each file: every operation once, uniform inputs with beta != 0 (so y is read),
/// dense operands `width` wide (SpMV: 1) in alternating layouts, padded. The full profile adds
/// a second case per operation with integer inputs, the other layouts, beta = 0 and a NaN
/// prior.
pub fn cases(files: &[PathBuf], profile: Profile, width: usize) -> Vec<Case> {
    let mut cases = Vec::new();
    for (f, path) in files.iter().enumerate() {
        let variants: &[bool] = match profile {
            Profile::Quick => &[false],
            Profile::Full => &[false, true],
        };
        for &second in variants {
            let flip = (f % 2 == 1) != second;
            let (input_layout, output_layout) = if flip {
                (Layout::ColMajor, Layout::RowMajor)
            } else {
                (Layout::RowMajor, Layout::ColMajor)
            };
            for &op in OpKind::ALL {
                let (inputs, alpha, beta, prior) = match (second, op) {
                    (true, _) => (Fill::Ints, 2.0, 0.0, Fill::Nan),
                    (false, OpKind::Attention) => (Fill::Uniform, 1.0, 0.0, Fill::Nan),
                    (false, _) => (Fill::Uniform, -1.0, 0.5, Fill::Uniform),
                };
                cases.push(Case {
                    input_layout,
                    output_layout,
                    strides: if second {
                        Strides::Tight
                    } else {
                        Strides::Padded
                    },
                    width: if op == OpKind::Spmv { 1 } else { width },
                    alpha,
                    beta,
                    inputs,
                    prior,
                    scale_by_values: op == OpKind::Sddmm && !second,
                    seed: (f as u64) << 8 | u64::from(second),
                    ..Case::new(op, MatrixSource::File(path.clone()))
                });
            }
        }
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_lists_matrix_market_files_only() {
        let dir = std::env::temp_dir().join(format!("conformance-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["b.mtx.gz", "a.mtx", "notes.txt", "c.mtx.bak"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        let names: Vec<_> = files(&dir)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(names, ["a.mtx", "b.mtx.gz"]);
        assert!(files(&dir).is_err());
    }

    #[test]
    fn loading_scales_values_by_a_power_of_two_and_honours_the_limit() {
        let dir = std::env::temp_dir().join(format!("conformance-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.mtx");
        std::fs::write(
            &path,
            "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 3000\n2 2 -0.5\n",
        )
        .unwrap();
        let loaded = load(&path, None).unwrap();
        let too_large = load(&path, Some(1)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        match loaded {
            Loaded::Matrix(a) => assert_eq!(a.values(), [3000.0 / 4096.0, -0.5 / 4096.0]),
            Loaded::TooLarge(n) => panic!("refused with {n} entries"),
        }
        assert!(matches!(too_large, Loaded::TooLarge(2)));
    }
}
