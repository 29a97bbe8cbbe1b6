//! Executors and plans: plan once (analysis, conversion, upload), run many.

use std::fmt;
use std::str::FromStr;

use crate::csr_ref::CsrRef;
use crate::dense::{Dense, DenseMut, DenseRef, Layout};
use crate::error::{Error, Result};
use crate::op::{
    named_enum, Algorithm, AttentionDesc, Format, OpKind, SddmmDesc, SpmmDesc, SpmvDesc, Support,
};
use crate::precision::Precision;
use crate::scalar::{Scalar, SpIndex};
use crate::value_order::ValueOrder;

/// Environment variable naming the backend [`BackendRequest::from_env_or`] picks.
pub const BACKEND_ENV: &str = "SPARSE_BACKEND";

/// A concrete backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// rayon kernels on the host (and the serial reference).
    Cpu,
    /// sparse-blas's own CUDA kernels.
    Cuda,
    /// NVIDIA's cuSPARSE and cuBLAS, as vendor baselines.
    Cusparse,
}
named_enum!(
    BackendKind,
    "backend",
    [(Cpu, "cpu"), (Cuda, "cuda"), (Cusparse, "cusparse")]
);

/// What a user asks for: a backend by name, or `auto` (CUDA when a usable GPU is present, else
/// the CPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendRequest {
    Auto,
    Kind(BackendKind),
}

impl BackendRequest {
    /// The request named by `SPARSE_BACKEND`, or `default` when it is unset or empty.
    pub fn from_env_or(default: &str) -> Result<Self> {
        match std::env::var(BACKEND_ENV) {
            Ok(v) if !v.trim().is_empty() => v.trim().parse(),
            _ => default.parse(),
        }
    }
}

impl fmt::Display for BackendRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendRequest::Auto => f.write_str("auto"),
            BackendRequest::Kind(k) => k.fmt(f),
        }
    }
}

impl FromStr for BackendRequest {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if s == "auto" {
            return Ok(BackendRequest::Auto);
        }
        s.parse::<BackendKind>()
            .map(BackendRequest::Kind)
            .map_err(|_| {
                Error::invalid(format!(
                    "unknown backend '{s}' (expected one of auto cpu cuda cusparse)"
                ))
            })
    }
}

/// What a plan is and what it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanInfo {
    pub backend: BackendKind,
    pub op: OpKind,
    pub format: Format,
    pub precision: Precision,
    /// The algorithm actually chosen (never `Auto`).
    pub algorithm: Algorithm,
    /// Bytes the plan holds: converted matrices, analysis and workspace (borrowed inputs excluded).
    pub bytes: usize,
    /// Same inputs give bit-identical outputs on every run.
    pub deterministic: bool,
}

/// A planned `y = alpha*A*x + beta*y`.
pub trait SpmvPlan<T: Scalar>: Send {
    fn info(&self) -> &PlanInfo;
    /// `x` is cols x 1 and `y` rows x 1, in memory this plan's backend reads.
    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        y: DenseMut<'_, T::Out>,
    ) -> Result<()>;
}

/// A planned `C = alpha*A*B + beta*C`.
pub trait SpmmPlan<T: Scalar>: Send {
    fn info(&self) -> &PlanInfo;
    /// `b` is cols x n and `c` rows x n, each in either layout.
    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
    ) -> Result<()>;
}

/// A planned `C = alpha*(X*Y^T) ∘ spy(S) + beta*C`.
pub trait SddmmPlan<T: Scalar>: Send {
    fn info(&self) -> &PlanInfo;
    /// The order `c` holds C's values in: `None` for S's CSR entry order (`c` is nnz x 1);
    /// for a blocked format, its stored order (`c` is `order.len()` x 1, padding included).
    fn value_order(&self) -> Option<&ValueOrder> {
        None
    }
    /// `x` is rows x k, `y` cols x k; `c` holds the values of C in [`SddmmPlan::value_order`].
    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
    ) -> Result<()>;
}

/// A planned `O = softmax_row(scale*(Q*K^T) ∘ spy(A)) * V`.
pub trait AttentionPlan<T: Scalar>: Send {
    fn info(&self) -> &PlanInfo;
    /// `q` is rows x d, `k` cols x d, `v` cols x dv and `o` rows x dv.
    fn run(
        &mut self,
        q: DenseRef<'_, T>,
        k: DenseRef<'_, T>,
        v: DenseRef<'_, T>,
        o: DenseMut<'_, T::Out>,
    ) -> Result<()>;
}

/// One backend's implementation of the operations.
///
/// Planning takes the matrix in CSR (the interchange format) and converts it to the format the
/// descriptor names; running a plan does only the operation.
pub trait Executor: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// One line naming the backend and its device, e.g. `cpu (rayon, 8 threads)`.
    fn description(&self) -> String;

    fn capability(&self, op: OpKind, format: Format, precision: Precision) -> Support;

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>>;

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>>;

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>>;

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>>;

    /// A copy of `host` in memory this backend's plans read.
    fn upload<T: Scalar>(&self, host: DenseRef<'_, T>) -> Result<Dense<T>>;

    /// A host copy of `dense` (in its layout).
    fn download<T: Scalar>(&self, dense: &Dense<T>) -> Result<Dense<T>>;

    /// A zeroed matrix in memory this backend's plans write.
    fn zeros<T: Scalar>(&self, rows: usize, cols: usize, layout: Layout) -> Result<Dense<T>>;

    /// Waits for all work submitted so far.
    fn synchronize(&self) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        assert_eq!(
            "auto".parse::<BackendRequest>().unwrap(),
            BackendRequest::Auto
        );
        assert_eq!(
            "cusparse".parse::<BackendRequest>().unwrap(),
            BackendRequest::Kind(BackendKind::Cusparse)
        );
        assert!("gpu"
            .parse::<BackendRequest>()
            .unwrap_err()
            .to_string()
            .contains("auto cpu cuda cusparse"));
    }
}
