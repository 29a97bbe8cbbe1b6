//! Sparse storage formats of sparse-blas: structures, validation, conversions, Matrix Market I/O.
//!
//! Every format is built with a checked `try_new` that hands the inputs back with the error, an
//! `unsafe new_unchecked` for trusted callers, and conversions from and to CSR, the interchange
//! format executors plan from.

mod coo;
mod csr;
mod dense;
pub mod generate;
pub mod mtx;
mod rejected;
mod sprs_interop;

pub use coo::Coo;
pub use csr::Csr;
pub use dense::{csr_from_dense, dense_from_csr};
pub use rejected::Rejected;
pub use sparse_core::RowStats;
