//! The vocabulary every other crate of sparse-blas speaks.
//!
//! - [`Scalar`] and [`SpIndex`]: the value and index types a matrix may hold.
//! - [`Precision`]: storage type plus compute mode, with the names `f64 f32 tf32 f16 bf16 i8 i4`.
//! - [`DenseRef`] / [`DenseMut`] / [`Dense`]: dense operands with rows, cols, leading dimension
//!   and layout, in host or device memory.
//! - [`CsrRef`]: the borrowed CSR view that executors plan from.
//! - [`OpKind`], [`Format`], [`Algorithm`] and the op descriptors: what to compute and how.
//! - [`Executor`] and the plan traits: plan once, run many.
//! - [`VectorOps`]: vector operations with scalars in backend memory, for iterative solvers.
//! - [`Error`]: the one error type.
//!
//! # Semantics
//! - SpMV `y = alpha*A*x + beta*y`; SpMM `C = alpha*A*B + beta*C`.
//! - SDDMM `C = alpha*(X*Y^T) ∘ spy(S) + beta*C`, C holding S's pattern; optionally multiplied
//!   entry-wise by S's values.
//! - Sparse attention `O = softmax_row(scale*(Q*K^T) ∘ spy(A)) * V`; a row of A without entries
//!   gives a zero row of O.
//! - `beta == 0` means the output is write-only: whatever it held (NaN included) is never read.
//! - `alpha == 0` short-circuits: A and the dense inputs are not read, the output becomes
//!   `beta*y` (or zero when `beta == 0`).

mod backend;
pub mod cost;
mod csr_ref;
mod dense;
mod error;
mod op;
mod precision;
mod scalar;
mod value_order;
mod vector_ops;

pub use backend::{
    check_offered, supported_summary, AlgorithmTable, AttentionBackward, AttentionPlan,
    BackendKind, BackendRequest, Executor, PlanInfo, PlanTime, SddmmPlan, SpmmPlan, SpmvPlan,
    BACKEND_ENV,
};
pub use csr_ref::{check_dimensions, validate_csr, CsrRef, RowStats};
pub use dense::{Dense, DenseMut, DenseRef, DeviceMemory, Layout, Memory, MemoryMut};
pub use error::{Error, Result, StructureError};
pub use op::{
    support_of, Algorithm, AttentionDesc, AttentionShape, BlockShape, Format, Offer, OpKind,
    SddmmDesc, SpmmDesc, SpmvDesc, Support, DEFAULT_MAX_WIDTH,
};
pub use precision::{Compute, DType, Precision};
pub use scalar::{Accumulator, Scalar, SpIndex};
pub use value_order::ValueOrder;
pub use vector_ops::{check_slots, Coef, Real, VectorOps, ONE};

pub use half::{bf16, f16};
