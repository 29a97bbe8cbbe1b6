//! What every stored format offers, and the limit on how much padding a conversion may add.

pub use sparse_core::ValueOrder;
use sparse_core::{Error, Format, Result, Scalar};

use crate::csr::Csr;

/// A sparse matrix stored in one of the formats: its shape, its real entries, its bytes, and the
/// way back to CSR.
pub trait SparseFormat<T: Scalar> {
    const FORMAT: Format;

    fn rows(&self) -> usize;
    fn cols(&self) -> usize;
    fn shape(&self) -> (usize, usize) {
        (self.rows(), self.cols())
    }
    /// Real entries (explicit zeros of the source count; padding does not).
    fn nnz(&self) -> usize;
    /// Slots the format stores values for, padding included.
    fn stored_slots(&self) -> usize;
    /// Bytes of every array the structure owns.
    fn memory_bytes(&self) -> usize;
    /// Checks every invariant of the format; the error names the first offending position.
    fn validate(&self) -> Result<()>;
    /// The same matrix in canonical CSR (padding dropped, explicit zeros kept).
    fn to_csr(&self) -> Csr<T, u32>;
}

/// How many padded slots a conversion may store before it refuses with [`Error::FillLimit`]:
/// at most `max_ratio` slots per entry, but always at least `min_slots`, so small matrices convert.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FillLimit {
    pub max_ratio: f64,
    pub min_slots: usize,
}

impl FillLimit {
    /// No limit beyond what memory allows.
    pub const UNLIMITED: FillLimit = FillLimit {
        max_ratio: f64::INFINITY,
        min_slots: usize::MAX,
    };

    /// The most slots allowed for `nnz` entries.
    pub fn limit(&self, nnz: usize) -> usize {
        let by_ratio = self.max_ratio * nnz as f64;
        if by_ratio >= usize::MAX as f64 {
            usize::MAX
        } else {
            (by_ratio as usize).max(self.min_slots)
        }
    }

    /// `Ok` when `slots` fit the limit for `nnz` entries.
    pub fn check(&self, format: Format, slots: usize, nnz: usize) -> Result<()> {
        let limit = self.limit(nnz);
        if slots <= limit {
            Ok(())
        } else {
            Err(Error::FillLimit {
                format,
                slots,
                nnz,
                limit,
            })
        }
    }
}

impl Default for FillLimit {
    /// 32 slots per entry, at least 2^20 slots.
    fn default() -> Self {
        FillLimit {
            max_ratio: 32.0,
            min_slots: 1 << 20,
        }
    }
}
