//! Differential conformance harness of sparse-blas: every backend against the oracle.
//!
//! - [`bound`]: the per-entry error bound a result must meet, and the comparison.
//! - [`generators`], [`strategies`], [`corpus`]: the inputs — structured matrices and
//!   adversarial values, proptest strategies, and real matrices from Matrix Market files.
//! - [`Case`]: one operation on one matrix with its dense operands.
//! - [`run_suite`]: the suite, written once for every backend and scalar type.
//! - [`Report`]: the results, as text or markdown tables.
//!
//! The `conformance` binary runs the suite on a backend chosen at run time; it is what runs on
//! machines with a GPU.

pub mod bound;
mod case;
pub mod corpus;
pub mod generators;
mod operands;
pub mod report;
pub mod strategies;
pub mod suite;

pub use case::{Case, Fill, MatrixSource, Profile, Strides};
pub use report::{Report, Row, Style, Totals};
pub use suite::{algorithms, reads_host_memory, run_suite, Filter};
