//! Executors and plans: plan once (analysis, conversion, upload), run many.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::csr_ref::CsrRef;
use crate::dense::{Dense, DenseMut, DenseRef, Layout};
use crate::error::{Error, Result};
use crate::op::{
    named_enum, support_of, Algorithm, AttentionDesc, Format, Offer, OpKind, SddmmDesc, SpmmDesc,
    SpmvDesc, Support,
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
    /// Bytes the plan holds: converted matrices, analysis and workspace (borrowed inputs
    /// excluded). Fixed once planned: only [`SpmmPlan::reserve`] (and SDDMM's) changes it, and
    /// the first `update_values` of a plan that borrowed the caller's values (a CPU plan on
    /// CSR), which then holds its own.
    pub bytes: usize,
    /// Same inputs give bit-identical outputs on every run.
    pub deterministic: bool,
    /// The widest dense operand runs may take without a `reserve` (N of SpMM, K of SDDMM; 0
    /// where the operation has no such width).
    pub reserved_width: usize,
    /// Where planning spent its time.
    pub plan_time: PlanTime,
}

impl PlanInfo {
    /// A plan's description with no bytes, no reserved width and no time yet.
    pub fn new(
        backend: BackendKind,
        op: OpKind,
        format: Format,
        precision: Precision,
        algorithm: Algorithm,
        deterministic: bool,
    ) -> Self {
        PlanInfo {
            backend,
            op,
            format,
            precision,
            algorithm,
            bytes: 0,
            deterministic,
            reserved_width: 0,
            plan_time: PlanTime::default(),
        }
    }

    /// [`Error::WidthExceeded`] when a run of `width` is wider than the plan reserved for.
    pub fn check_width(&self, width: usize) -> Result<()> {
        if width > self.reserved_width {
            return Err(Error::WidthExceeded {
                op: self.op,
                width,
                reserved: self.reserved_width,
            });
        }
        Ok(())
    }
}

/// Where planning spent its time. The parts do not overlap; their sum is about the plan's wall
/// time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlanTime {
    /// Host work: checks, statistics, conversions, packing for an upload.
    pub host: Duration,
    /// Copies from the host to the device.
    pub transfer: Duration,
    /// Analysis and conversion on the device.
    pub device: Duration,
    /// Compiling and loading kernels (loading only, when they are cached).
    pub kernels: Duration,
    /// Planning and timing the candidates that plan-time tuning rejected, and timing the one
    /// it kept.
    pub tuning: Duration,
}

impl PlanTime {
    pub fn total(&self) -> Duration {
        self.host + self.transfer + self.device + self.kernels + self.tuning
    }
}

/// The time of two plannings: a plan made of two plans took both.
impl std::ops::AddAssign for PlanTime {
    fn add_assign(&mut self, other: PlanTime) {
        self.host += other.host;
        self.transfer += other.transfer;
        self.device += other.device;
        self.kernels += other.kernels;
        self.tuning += other.tuning;
    }
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
    /// New values for the matrix planned from, same pattern: `values` (nnz x 1, host or this
    /// backend's device memory) in its CSR entry order. No re-analysis; blocked formats are
    /// rearranged into their own order.
    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()>;
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
    /// As [`SpmvPlan::update_values`].
    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()>;
    /// Makes runs up to N = `width` possible: grows the workspace where it depends on N (runs
    /// never do), so [`PlanInfo::bytes`] and [`PlanInfo::reserved_width`] may change.
    fn reserve(&mut self, width: usize) -> Result<()>;
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
    /// As [`SpmvPlan::update_values`] (the values matter with `scale_by_values`).
    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()>;
    /// As [`SpmmPlan::reserve`], for K.
    fn reserve(&mut self, width: usize) -> Result<()>;
}

/// A planned `O = softmax_row(scale*(Q*K^T) ∘ spy(A)) * V` over the descriptor's heads.
pub trait AttentionPlan<T: Scalar>: Send {
    fn info(&self) -> &PlanInfo;
    /// `q` is rows x heads*d, `k` cols x heads*d, `v` cols x heads*dv and `o` rows x heads*dv,
    /// each in either layout.
    fn run(
        &mut self,
        q: DenseRef<'_, T>,
        k: DenseRef<'_, T>,
        v: DenseRef<'_, T>,
        o: DenseMut<'_, T::Out>,
    ) -> Result<()>;

    /// The gradients of a loss given dL/dO, for the inputs and output of the last `run` (whose
    /// row statistics the plan kept): dQ, dK, dV, and with a bias the gradient of A's values.
    /// An `Unsupported` error where the plan has no backward.
    fn backward(&mut self, grads: AttentionBackward<'_, T>) -> Result<()> {
        let _ = grads;
        let info = self.info();
        Err(Error::Unsupported {
            op: info.op,
            format: info.format,
            precision: info.precision,
            algorithm: Some(info.algorithm),
            backend: info.backend,
            supported: "the attention backward on the cpu backend".into(),
        })
    }
}

/// What [`AttentionPlan::backward`] reads and writes, each in either layout: the forward's
/// inputs and output, dL/dO, and the gradients it writes (dQ like Q, dK like K, dV like V, and
/// `dbias`, nnz x 1 in A's CSR entry order, required with a bias and not read without).
pub struct AttentionBackward<'a, T: Scalar> {
    pub q: DenseRef<'a, T>,
    pub k: DenseRef<'a, T>,
    pub v: DenseRef<'a, T>,
    pub o: DenseRef<'a, T::Out>,
    pub d_o: DenseRef<'a, T::Out>,
    pub dq: DenseMut<'a, T::Out>,
    pub dk: DenseMut<'a, T::Out>,
    pub dv: DenseMut<'a, T::Out>,
    pub dbias: Option<DenseMut<'a, T::Out>>,
}

/// One backend's implementation of the operations.
///
/// Planning takes the matrix in CSR (the interchange format) and converts it to the format the
/// descriptor names; running a plan does only the operation.
pub trait Executor: Send + Sync {
    fn kind(&self) -> BackendKind;

    /// One line naming the backend and its device, e.g. `cpu (rayon, 8 threads)`.
    fn description(&self) -> String;

    /// The one table of what this backend runs: the algorithms for `op` on `format` in
    /// `precision` (`auto` is not listed: it resolves to one of them), empty when none.
    /// Capability, the Unsupported errors, the conformance suite, the benchmarks and
    /// `spblas capabilities` all derive from it.
    fn algorithms(&self, op: OpKind, format: Format, precision: Precision) -> Vec<Offer>;

    /// Native / Emulated / Unsupported, from [`Executor::algorithms`].
    fn capability(&self, op: OpKind, format: Format, precision: Precision) -> Support {
        support_of(&self.algorithms(op, format, precision))
    }

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

/// A table of what a backend runs, as [`Executor::algorithms`] gives it.
pub trait AlgorithmTable: Fn(OpKind, Format, Precision) -> Vec<Offer> {}
impl<F: Fn(OpKind, Format, Precision) -> Vec<Offer>> AlgorithmTable for F {}

/// Checks a request against `backend`'s table: `Ok(None)` for `auto` and `Ok(Some(offer))` for
/// an algorithm the table lists; otherwise [`Error::Unsupported`] naming what runs instead.
pub fn check_offered(
    backend: BackendKind,
    table: impl AlgorithmTable,
    op: OpKind,
    format: Format,
    precision: Precision,
    algorithm: Algorithm,
) -> Result<Option<Offer>> {
    let offers = table(op, format, precision);
    if offers.is_empty() {
        return Err(Error::Unsupported {
            op,
            format,
            precision,
            algorithm: None,
            backend,
            supported: supported_summary(&table, op),
        });
    }
    if algorithm == Algorithm::Auto {
        return Ok(None);
    }
    offers
        .iter()
        .find(|o| o.algorithm == algorithm)
        .copied()
        .map(Some)
        .ok_or_else(|| Error::Unsupported {
            op,
            format,
            precision,
            algorithm: Some(algorithm),
            backend,
            supported: format!(
                "{op} on {format} in {precision} with {}",
                algorithm_names(&offers)
            ),
        })
}

/// `auto` and the offers' algorithms, e.g. `auto, scalar, vector`.
fn algorithm_names(offers: &[Offer]) -> String {
    std::iter::once("auto")
        .chain(offers.iter().map(|o| o.algorithm.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `table` runs for `op`, one clause per format and set of algorithms, e.g.
/// `spmv on csr in f64 f32 f16 (scalar, vector); on coo in f64 f32 (atomic)`; `nothing` when
/// the table lists nothing for `op`.
pub fn supported_summary(table: &impl AlgorithmTable, op: OpKind) -> String {
    let mut clauses: Vec<(Format, Vec<Algorithm>, Vec<&str>)> = Vec::new();
    for &format in Format::ALL {
        for precision in Precision::ALL {
            let offers = table(op, format, precision);
            if offers.is_empty() {
                continue;
            }
            let algorithms: Vec<Algorithm> = offers.iter().map(|o| o.algorithm).collect();
            match clauses
                .iter_mut()
                .find(|(f, a, _)| *f == format && *a == algorithms)
            {
                Some((_, _, precisions)) => precisions.push(precision.name()),
                None => clauses.push((format, algorithms, vec![precision.name()])),
            }
        }
    }
    if clauses.is_empty() {
        return "nothing".to_string();
    }
    let clauses: Vec<String> = clauses
        .iter()
        .map(|(format, algorithms, precisions)| {
            let names: Vec<&str> = algorithms.iter().map(|a| a.name()).collect();
            format!(
                "on {format} in {} ({})",
                precisions.join(" "),
                names.join(", ")
            )
        })
        .collect();
    format!("{op} {}", clauses.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compute;

    fn table(op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
        let csr = [
            Offer::native(Algorithm::Scalar, true),
            Offer::native(Algorithm::Atomic, false),
        ];
        match (op, format) {
            (OpKind::Spmv, Format::Csr)
                if !matches!(precision.compute, Compute::IntBits { .. }) =>
            {
                csr.to_vec()
            }
            (OpKind::Spmv, Format::Coo) if precision == Precision::F64 => csr[1..].to_vec(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn requests_are_checked_against_the_table() {
        let check = |format, precision, algorithm| {
            check_offered(
                BackendKind::Cuda,
                table,
                OpKind::Spmv,
                format,
                precision,
                algorithm,
            )
        };
        assert_eq!(
            check(Format::Csr, Precision::F32, Algorithm::Auto).unwrap(),
            None
        );
        assert!(
            !check(Format::Csr, Precision::F32, Algorithm::Atomic)
                .unwrap()
                .unwrap()
                .deterministic
        );
        let err = check(Format::Csr, Precision::F32, Algorithm::Rode).unwrap_err();
        assert!(
            err.to_string().contains("with rode")
                && err.to_string().contains("auto, scalar, atomic"),
            "{err}"
        );
        let err = check(Format::Ell, Precision::F32, Algorithm::Auto).unwrap_err();
        assert!(
            err.to_string().contains(
                "spmv on csr in f64 f32 tf32 f16 bf16 i8 (scalar, atomic); on coo in f64 (atomic)"
            ),
            "{err}"
        );
        assert_eq!(supported_summary(&table, OpKind::Spmm), "nothing");
    }

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
