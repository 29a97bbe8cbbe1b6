//! The CUDA backend of sparse-blas.
//!
//! Kernels are `.cu` files embedded in the binary and compiled at run time by NVRTC for the
//! device's architecture, one instantiation per module, only those a plan can launch
//! ([`compile`], [`kernel`]); the CUDA libraries are found and loaded at run time ([`probe`]),
//! so this crate builds and its tests run on machines with no GPU and no toolkit.
//! [`DeviceTimer`] times work on a backend's stream with CUDA events, for benchmarks.

mod attention;
mod blas1;
mod bsr;
pub mod compile;
mod cusparse;
mod device;
mod ell;
mod executor;
pub mod flashsparse;
pub mod kernel;
mod libraries;
pub mod magicube;
mod matrix;
mod operand;
mod plan;
pub mod probe;
mod registry;
mod rode;
mod sddmm;
mod spmm;
mod spmv;
mod spmv_auto;
pub mod tilespmv;
mod timing;
mod tuning;
mod vector_ops;
mod wide_on_vendor;

pub use cusparse::{BlockedEllSpmm, CusparseBackend};
pub use executor::CudaBackend;
pub use probe::{probe, DeviceInfo};
pub use timing::DeviceTimer;

/// Every kernel instantiation Rust can ask for, for compile tests.
pub fn every_kernel() -> sparse_core::Result<Vec<kernel::KernelSpec>> {
    let mut specs = plan::all_specs()?;
    specs.extend(spmv::all_specs()?);
    specs.extend(ell::all_specs()?);
    specs.extend(bsr::all_specs()?);
    specs.extend(spmm::all_specs()?);
    specs.extend(sddmm::all_specs()?);
    specs.extend(rode::all_specs()?);
    specs.extend(blas1::all_specs()?);
    specs.extend(vector_ops::all_specs()?);
    specs.extend(flashsparse::all_specs()?);
    specs.extend(tilespmv::all_specs()?);
    specs.extend(attention::all_specs()?);
    specs.extend(magicube::all_specs()?);
    Ok(specs)
}
