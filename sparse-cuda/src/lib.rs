//! The CUDA backend of sparse-blas.
//!
//! Kernels are `.cu` files embedded in the binary and compiled at run time by NVRTC for the
//! device's architecture ([`compile`]); the CUDA libraries are found and loaded at run time
//! ([`probe`]), so this crate builds and its tests run on machines with no GPU and no toolkit.
//! [`DeviceTimer`] times work on a backend's stream with CUDA events, for benchmarks.

mod blas1;
pub mod compile;
mod cusparse;
mod device;
mod executor;
pub mod flashsparse;
mod libraries;
mod matrix;
mod operand;
pub mod probe;
mod rode;
mod sddmm;
mod spmm;
mod spmv;
mod timing;

pub use cusparse::CusparseBackend;
pub use executor::CudaBackend;
pub use probe::{probe, DeviceInfo};
pub use timing::DeviceTimer;
