//! The CPU backend of sparse-blas.
//!
//! - [`reference`]: serial, fixed-order, f64 kernels: the oracle every backend is tested against;
//!   [`bound`] turns its results into expectations with per-entry error bounds.
//! - [`CpuBackend`]: the [`sparse_core::Executor`] running rayon kernels (merge-path SpMV, row
//!   parallel SpMM/SDDMM, fused attention with an online softmax), deterministic for a given
//!   number of threads.

mod attention;
pub mod bound;
mod executor;
mod formats;
mod kernels;
mod partition;
pub mod reference;
mod shared_out;
mod stored;
mod vector_ops;

pub use executor::CpuBackend;
pub use stored::tile_selection;
