//! sparse-blas: a sparse BLAS with one interface and several backends.
//!
//! Pick a [`Backend`] at run time (`cpu`, `cuda`, `cusparse`, `auto`, or the `SPARSE_BACKEND`
//! environment variable), plan an operation once on a [`Csr`] matrix, run the plan many times:
//!
//! ```
//! use sparse_blas::{Backend, Csr, DenseMut, DenseRef, Executor, Precision, SpmvDesc};
//!
//! let a = Csr::<f64>::from_triplets(2, 2, &[(0, 0, 2.0), (1, 0, 1.0), (1, 1, 3.0)])?;
//! let backend = Backend::from_env_or("auto")?;
//! let mut plan = backend.plan_spmv(a.as_ref(), &SpmvDesc::new(Precision::F64))?;
//! let x = [1.0, 1.0];
//! let mut y = [0.0; 2];
//! plan.run(1.0, DenseRef::vector(&x), 0.0, DenseMut::vector(&mut y))?;
//! assert_eq!(y, [2.0, 4.0]);
//! # Ok::<(), sparse_blas::Error>(())
//! ```
//!
//! [`solve`] solves linear systems with the plans and [`VectorOps`], keeping the iteration on
//! the backend.
//!
//! The semantics of every operation are fixed in [`sparse_core`]; [`reference`] holds the
//! serial oracle every backend is tested against.

mod backend;

pub use backend::Backend;
pub use sparse_core::*;
pub use sparse_cpu::{bound, reference, CpuBackend};
pub use sparse_cuda::compile::CACHE_DIR_ENV as KERNEL_CACHE_DIR_ENV;
pub use sparse_cuda::{magicube, CudaBackend, CusparseBackend, DeviceTimer};
pub use sparse_formats::{
    csr_from_dense, dense_from_csr, generate, quantize, Bsr, Converted, Coo, Csr, Ell, FillLimit,
    Hyb, HybWidth, MeBcrs, MeBcrsShape, Rejected, RowStats, SparseFormat, SrBcrs, SrBcrsShape,
    TileFormat, TileSelection, Tiled16,
};

/// Iterative solvers: conjugate gradient and BiCGSTAB, Jacobi preconditioning, mixed-precision
/// refinement, on any [`Backend`].
pub mod solve {
    pub use sparse_solve::*;
}

/// Matrix Market reading and writing.
pub mod io {
    pub use sparse_formats::mtx::*;
}
