//! Matrix Market reading and writing.
//!
//! The reader streams any [`BufRead`](std::io::BufRead). It spots gzip by its magic bytes, not
//! by the file name, because downloaded files are often renamed. It trusts nothing in the file.
//! Every index, count and value is checked. The sizes in the header never drive an allocation on
//! their own, so a short hostile file cannot make the reader reserve gigabytes. Errors name the
//! file and the 1-based line.
//!
//! What the reader accepts and how it reads it:
//! - `matrix coordinate|array`, field `real|integer|pattern` and symmetry
//!   `general|symmetric|skew-symmetric`. Keywords may be in any case. `complex` and `hermitian`
//!   files are refused, because no [`Scalar`] can hold them. A pattern entry reads as 1.
//! - Symmetric coordinate files: every off-diagonal entry is mirrored, and negated for
//!   skew-symmetric files, whichever triangle it is in. The spec asks for the lower triangle,
//!   but files that store the upper one are common. So a file that stores both (i, j) and (j, i)
//!   gets each of them twice, summed like any other duplicate.
//!   [`ReadOptions::reject_duplicates`] catches that.
//! - Duplicates are summed when converted (as [`Coo::to_csr`] does), unless
//!   [`ReadOptions::reject_duplicates`] is set.
//! - NaN and infinities are refused unless [`ReadOptions::allow_non_finite`] is set. A value the
//!   target type cannot hold is always refused: an f32 that would overflow to infinity, or an
//!   integer that would saturate. Rounding (0.1 into f32) is not an error.
//!
//! The writers produce `coordinate` (CSR) or column-major `array` (dense) files. They use the
//! `general` symmetry and the `integer` field for integer types. Values are written in the
//! shortest text that parses back to the same `f64`, so every [`Scalar`] round-trips bit for bit
//! (NaN payloads excepted). A path ending in `.gz` is compressed.

use std::fmt;

use sparse_core::{Dense, Error, Layout, Result, Scalar, SpIndex};

use crate::coo::Coo;
use crate::csr::Csr;
use crate::dense::{csr_from_dense, dense_from_csr};

mod read;
mod write;

pub use read::{
    read_csr, read_dense, read_header, read_matrix_market, read_matrix_market_from,
    read_matrix_market_with,
};
pub use write::{write_csr, write_csr_to, write_dense, write_dense_to};

/// Most elements a coordinate file may be densified to (2 GiB of f64): beyond that, a dense copy
/// of a sparse file is almost certainly a mistake.
pub const MAX_DENSIFY: usize = 1 << 28;

/// Defines a banner keyword enum with its spelling in files.
macro_rules! keywords {
    ($(#[$meta:meta])* $name:ident, $what:literal, {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];

            /// The keyword as written in the banner.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            fn parse(word: &str) -> Result<Self, String> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|k| k.name().eq_ignore_ascii_case(word))
                    .ok_or_else(|| {
                        let names: Vec<_> = Self::ALL.iter().map(|k| k.name()).collect();
                        format!("unknown {} {word:?}, expected one of {}", $what, names.join(", "))
                    })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

keywords!(
    /// How a file stores its entries.
    MtxFormat, "format", {
        /// One `row column value` line per stored entry, 1-based, in any order.
        Coordinate = "coordinate",
        /// Every value, column by column (only the lower triangle for symmetric matrices).
        Array = "array",
    }
);

keywords!(
    /// The type of the values in a file.
    MtxField, "field", {
        Real = "real",
        Integer = "integer",
        /// No values: every stored entry is 1.
        Pattern = "pattern",
        /// Recognised so that [`read_header`] can describe the file, but not read.
        Complex = "complex",
    }
);

keywords!(
    /// Which part of the matrix a file stores.
    MtxSymmetry, "symmetry", {
        General = "general",
        /// A = Aᵀ; one triangle is stored.
        Symmetric = "symmetric",
        /// A = -Aᵀ; one triangle is stored, without the (zero) diagonal.
        SkewSymmetric = "skew-symmetric",
        /// Recognised so that [`read_header`] can describe the file, but not read.
        Hermitian = "hermitian",
    }
);

/// The banner and size line of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub format: MtxFormat,
    pub field: MtxField,
    pub symmetry: MtxSymmetry,
    pub rows: usize,
    pub cols: usize,
    /// How many entries the file says it stores. For coordinate files this is the count on the
    /// size line, before symmetric expansion. For array files it is rows*cols, or only the
    /// stored triangle for symmetric files.
    pub entries: usize,
}

/// How strict the reader is beyond the format itself. The defaults suit numerical work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Accept NaN and infinite values. They are refused by default: in a matrix file they almost
    /// always come from a broken export, and they poison every result they touch.
    pub allow_non_finite: bool,
    /// Refuse a repeated (row, column) instead of summing it; the error names both lines.
    /// In symmetric files (i, j) and (j, i) count as the same entry.
    pub reject_duplicates: bool,
}

/// The contents of a file: sparse for `coordinate`, dense for `array`.
pub enum MtxData<T, I = usize> {
    /// Symmetric entries are already mirrored; duplicates are kept until conversion sums them.
    Sparse { header: Header, matrix: Coo<T, I> },
    /// Column-major, symmetric files already expanded to the full matrix.
    Dense { header: Header, matrix: Dense<T> },
}

impl<T: Scalar, I: SpIndex> MtxData<T, I> {
    pub fn header(&self) -> &Header {
        match self {
            MtxData::Sparse { header, .. } | MtxData::Dense { header, .. } => header,
        }
    }

    /// Canonical CSR with duplicates summed. An array file gives the CSR of its nonzero values.
    pub fn to_csr(&self) -> Result<Csr<T, I>> {
        match self {
            MtxData::Sparse { matrix, .. } => matrix.to_csr(),
            MtxData::Dense { matrix, .. } => csr_from_dense(matrix.as_ref()),
        }
    }

    /// A column-major dense matrix with duplicates summed. A coordinate file with more than
    /// [`MAX_DENSIFY`] elements is refused.
    pub fn into_dense(self) -> Result<Dense<T>> {
        match self {
            MtxData::Dense { matrix, .. } => Ok(matrix),
            MtxData::Sparse { matrix, .. } => {
                check_densify(matrix.rows(), matrix.cols()).map_err(Error::invalid)?;
                Ok(dense_from_csr(&matrix.to_csr()?, Layout::ColMajor))
            }
        }
    }
}

impl<T: Scalar, I: SpIndex> fmt::Debug for MtxData<T, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let variant = match self {
            MtxData::Sparse { .. } => "Sparse",
            MtxData::Dense { .. } => "Dense",
        };
        f.debug_struct(variant)
            .field("header", self.header())
            .finish_non_exhaustive()
    }
}

/// An error message unless a `rows x cols` dense matrix stays within [`MAX_DENSIFY`] elements.
fn check_densify(rows: usize, cols: usize) -> Result<(), String> {
    match rows.checked_mul(cols) {
        Some(n) if n <= MAX_DENSIFY => Ok(()),
        _ => Err(format!(
            "a {rows}x{cols} coordinate matrix is too large to densify \
             (limit {MAX_DENSIFY} elements); read it as CSR"
        )),
    }
}

/// Whether `T` is an integer type (written as `integer`, checked for saturation when read).
fn is_integer<T: Scalar>() -> bool {
    T::DTYPE.is_integer()
}
