//! The matrices a run measures: corpus files, files named on the command line, and generated
//! matrices sized so that their SpMV moves a given number of bytes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use conformance::corpus::{self, Loaded};
use sparse_blas::generate;
use sparse_blas::{Csr, Result};

/// A family of generated matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generator {
    /// The 5-point Laplacian: short, regular rows.
    Poisson2d,
    /// The 7-point Laplacian.
    Poisson3d,
    /// The 7-point Laplacian with [`BLOCK_UNKNOWNS`] coupled unknowns per grid point: dense
    /// blocks, as FEM matrices of vector PDEs have.
    BlockPoisson3d,
    /// An R-MAT power-law graph: a few very long rows, most short.
    Rmat,
    /// Uniformly random columns, the same count per row.
    Uniform,
}

impl FromStr for Generator {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "poisson2d" => Ok(Generator::Poisson2d),
            "poisson3d" => Ok(Generator::Poisson3d),
            "block-poisson3d" => Ok(Generator::BlockPoisson3d),
            "rmat" => Ok(Generator::Rmat),
            "uniform" => Ok(Generator::Uniform),
            _ => Err(format!(
                "unknown generator '{s}' (expected poisson2d, poisson3d, block-poisson3d, rmat \
                 or uniform)"
            )),
        }
    }
}

/// Unknowns per grid point of the block Poisson matrices (the BSR default block is 4 x 4).
const BLOCK_UNKNOWNS: usize = 4;
/// Entries per row of the uniform matrices and edges per vertex of the R-MAT graphs.
const PER_ROW: usize = 16;
/// Minimal bytes of an f32 SpMV per row: row pointer, x and y entries (4 bytes each).
const ROW_BYTES: f64 = 12.0;
/// Minimal bytes of an f32 SpMV per stored entry: value and column index.
const ENTRY_BYTES: f64 = 8.0;
/// R-MAT merges repeated edges, so it asks for this many more than it should keep.
const RMAT_REPEATS: f64 = 1.2;

/// A generated matrix with its size parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Generated {
    pub generator: Generator,
    /// Grid side (Poisson), scale (R-MAT: 2^scale vertices) or rows (uniform).
    pub size: usize,
    /// Edges per vertex (R-MAT).
    pub edge_factor: usize,
}

impl Generated {
    /// The matrix of `generator` whose f32 SpMV moves about `bytes` minimal bytes.
    pub fn sized(generator: Generator, bytes: f64) -> Self {
        let rows_for = |per_row: f64| (bytes / (per_row * ENTRY_BYTES + ROW_BYTES)).max(1.0);
        let (size, edge_factor) = match generator {
            Generator::Poisson2d => (rows_for(5.0).sqrt().ceil() as usize, 0),
            Generator::Poisson3d => (rows_for(7.0).cbrt().ceil() as usize, 0),
            Generator::BlockPoisson3d => {
                let rows = rows_for(7.0 * BLOCK_UNKNOWNS as f64) / BLOCK_UNKNOWNS as f64;
                (rows.cbrt().ceil() as usize, 0)
            }
            Generator::Rmat => {
                let scale = rows_for(PER_ROW as f64).log2().round().max(4.0) as usize;
                let vertices = (1u64 << scale) as f64;
                let per_vertex = ((bytes / vertices - ROW_BYTES) / ENTRY_BYTES * RMAT_REPEATS)
                    .ceil()
                    .max(1.0);
                (scale, per_vertex as usize)
            }
            Generator::Uniform => (rows_for(PER_ROW as f64).ceil() as usize, 0),
        };
        Generated {
            generator,
            size: size.max(2),
            edge_factor,
        }
    }

    fn build(&self) -> Result<Csr<f64>> {
        match self.generator {
            Generator::Poisson2d => generate::poisson2d(self.size),
            Generator::Poisson3d => generate::poisson3d(self.size),
            Generator::BlockPoisson3d => generate::block_poisson3d(self.size, BLOCK_UNKNOWNS),
            Generator::Rmat => generate::rmat(self.size as u32, self.edge_factor, 42),
            Generator::Uniform => generate::uniform(self.size, self.size, PER_ROW, 7),
        }
    }
}

impl fmt::Display for Generated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.generator {
            Generator::Poisson2d => write!(f, "poisson2d-{}", self.size),
            Generator::Poisson3d => write!(f, "poisson3d-{}", self.size),
            Generator::BlockPoisson3d => {
                write!(f, "block-poisson3d-{}x{BLOCK_UNKNOWNS}", self.size)
            }
            Generator::Rmat => write!(f, "rmat-s{}-e{}", self.size, self.edge_factor),
            Generator::Uniform => write!(f, "uniform-{}x{PER_ROW}", self.size),
        }
    }
}

/// Where a matrix comes from.
#[derive(Clone, Debug)]
pub enum Origin {
    Corpus(PathBuf),
    File(PathBuf),
    Generated(Generated),
}

impl Origin {
    pub fn kind(&self) -> &'static str {
        match self {
            Origin::Corpus(_) => "corpus",
            Origin::File(_) => "file",
            Origin::Generated(_) => "generated",
        }
    }
}

/// One matrix of the run, loaded only when its turn comes.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub origin: Origin,
}

/// What loading a source gave.
pub enum Matrix {
    Ready(Csr<f64>),
    /// More stored entries than `--max-nnz` (the count).
    TooLarge(usize),
}

impl Source {
    fn file(path: &Path, corpus: bool) -> Self {
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let stem = file.strip_suffix(".gz").unwrap_or(&file);
        let name = stem.strip_suffix(".mtx").unwrap_or(stem).to_string();
        let origin = if corpus {
            Origin::Corpus(path.to_path_buf())
        } else {
            Origin::File(path.to_path_buf())
        };
        Source { name, origin }
    }

    /// The matrix, or why it is not run. Files are read as the conformance suite reads them:
    /// values scaled by a power of two so the largest magnitude lies in (0.5, 1], which keeps
    /// f16 results finite; generated matrices hold modest values already.
    pub fn load(&self, max_nnz: Option<usize>) -> Result<Matrix> {
        match &self.origin {
            Origin::Corpus(path) | Origin::File(path) => Ok(match corpus::load(path, max_nnz)? {
                Loaded::Matrix(a) => Matrix::Ready(a),
                Loaded::TooLarge(n) => Matrix::TooLarge(n),
            }),
            Origin::Generated(g) => {
                let a = g.build()?;
                Ok(match max_nnz {
                    Some(limit) if a.nnz() > limit => Matrix::TooLarge(a.nnz()),
                    _ => Matrix::Ready(a),
                })
            }
        }
    }
}

/// The sources of a run in order: corpus files (sorted by name), named files, then the
/// generated matrices, each `large_bytes` of f32 SpMV traffic (none when 0).
pub fn sources(
    corpus_dir: Option<&Path>,
    files: &[PathBuf],
    generators: &[Generator],
    large_bytes: f64,
) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    if let Some(dir) = corpus_dir {
        sources.extend(corpus::files(dir)?.iter().map(|p| Source::file(p, true)));
    }
    sources.extend(files.iter().map(|p| Source::file(p, false)));
    if large_bytes > 0.0 {
        for &generator in generators {
            let g = Generated::sized(generator, large_bytes);
            sources.push(Source {
                name: g.to_string(),
                origin: Origin::Generated(g),
            });
        }
    }
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_blas::cost::{self, SparseShape};
    use sparse_blas::DType;

    #[test]
    fn generated_matrices_move_about_the_bytes_asked_for() {
        for generator in [
            Generator::Poisson2d,
            Generator::Poisson3d,
            Generator::Rmat,
            Generator::Uniform,
        ] {
            let target = 4e6;
            let a = Generated::sized(generator, target).build().unwrap();
            let shape = SparseShape {
                rows: a.rows(),
                cols: a.cols(),
                nnz: a.nnz(),
                value: DType::F32,
                index_bytes: 4,
            };
            let bytes = cost::spmv(shape, DType::F32, false).bytes;
            assert!(
                bytes > 0.7 * target && bytes < 1.6 * target,
                "{generator:?}: {bytes} bytes for a target of {target}"
            );
        }
    }

    #[test]
    fn file_names_lose_their_extensions() {
        assert_eq!(
            Source::file(Path::new("/m/karate.mtx.gz"), true).name,
            "karate"
        );
        assert_eq!(Source::file(Path::new("a.mtx"), false).name, "a");
    }
}
