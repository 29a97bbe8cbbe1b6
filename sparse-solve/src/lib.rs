//! Iterative solvers of sparse-blas: conjugate gradient (symmetric positive definite systems)
//! and BiCGSTAB (general systems), with or without Jacobi preconditioning, on any backend that
//! runs [`VectorOps`](sparse_core::VectorOps).
//!
//! The iteration stays in the backend's memory: the matrix is planned once
//! ([`sparse_core::SpmvPlan`]), the vectors and the scalars of the recurrences live on the
//! device, and the host reads a handful of scalars (one transfer) every
//! [`SolveOptions::check_every`] iterations to test for convergence and breakdown.
//!
//! ```
//! use sparse_core::{DenseMut, DenseRef};
//! use sparse_solve::{solve, SolveOptions};
//!
//! let a = sparse_formats::generate::poisson2d::<f64, u32>(16)?;
//! let b = vec![1.0; a.rows()];
//! let mut x = vec![0.0; a.rows()];
//! let report = solve(
//!     &sparse_cpu::CpuBackend::new(),
//!     a.as_ref(),
//!     DenseRef::vector(&b),
//!     DenseMut::vector(&mut x),
//!     &SolveOptions::default(),
//! )?;
//! assert!(report.converged && report.relative_residual < 1e-8);
//! # Ok::<(), sparse_core::Error>(())
//! ```
//!
//! Errors: [`Error::NotSquare`](sparse_core::Error::NotSquare),
//! [`Error::ZeroDiagonal`](sparse_core::Error::ZeroDiagonal) under Jacobi,
//! [`Error::NotSpd`](sparse_core::Error::NotSpd) when conjugate gradient meets pᵀAp <= 0 and
//! [`Error::Breakdown`](sparse_core::Error::Breakdown) when a recurrence divides by zero. Running
//! out of iterations is not an error: the report says `converged: false` and `x` holds the last
//! iterate.

mod bicgstab;
mod cg;
mod options;
mod refine;
mod solver;

pub use options::{Method, Precond, SolveOptions, SolveReport};
pub use refine::{refine, RefineOptions, RefineReport};
pub use solver::{solve, Solver};
