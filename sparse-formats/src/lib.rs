//! Sparse storage formats of sparse-blas: structures, validation, conversions, Matrix Market I/O.
//!
//! Every format is built with a checked `try_new` that hands the inputs back with the error, an
//! `unsafe new_unchecked` for trusted callers, and conversions from and to CSR, the interchange
//! format executors plan from. [`SparseFormat`] is what they all offer.

mod assembly;
mod bsr;
mod checks;
mod column_vectors;
mod converted;
mod coo;
mod csr;
mod dense;
mod ell;
mod format;
pub mod generate;
mod hyb;
mod me_bcrs;
pub mod mtx;
pub mod quantize;
mod rejected;
mod slots;
mod sprs_interop;
mod sr_bcrs;
mod tiled16;
mod transposed;

pub use bsr::*;
pub use column_vectors::{ColumnVectors, VectorSlots, MAX_VECTOR_HEIGHT};
pub use converted::Converted;
pub use coo::Coo;
pub use csr::Csr;
pub use dense::{csr_from_dense, dense_from_csr};
pub use ell::*;
pub use format::{FillLimit, SparseFormat, ValueOrder};
pub use hyb::*;
pub use me_bcrs::*;
pub use rejected::Rejected;
pub use sparse_core::RowStats;
pub use sr_bcrs::*;
pub use tiled16::*;
pub use transposed::Transposed;
