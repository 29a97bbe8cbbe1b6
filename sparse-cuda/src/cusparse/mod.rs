//! The `cusparse` backend: NVIDIA's cuSPARSE (and cuBLAS GEMM) behind sparse-blas's interface,
//! the vendor baseline every kernel of the `cuda` backend is measured against.
//!
//! It shares the `cuda` backend's device type, buffers and transfers: operands come from
//! [`Executor::upload`] / [`Executor::zeros`] of either backend when both run on one device
//! ([`CusparseBackend::sharing`]). One cuSPARSE handle per backend, bound to the device's
//! stream, made once and destroyed with the last plan. Plans are built on the `cuda` backend's
//! scaffold (`crate::plan`), one family per operation (`ops.rs`), and hold the matrix, its
//! descriptor and the cuSPARSE workspace; what runs is fixed by one table (`table.rs`): SpMV on
//! CSR and COO, SpMM and SDDMM on CSR, in f64, f32 and f16 (f32 compute). Beside the table, as
//! baselines for the benchmarks: cuBLAS GEMM (`blas.rs`) and cuSPARSE's Blocked-ELL SpMM
//! (`blocked_ell.rs`, i8).
//!
//! Semantics are sparse-blas's, not cuSPARSE's where they differ (see `plan.rs`): `alpha == 0`
//! never calls cuSPARSE, `beta == 0` zeroes the output before cuSPARSE runs, strided vectors go
//! through staging. `scale_by_values` SDDMM is refused: cuSPARSE's SDDMM multiplies by the
//! pattern of S, not by its values.

mod blas;
mod blocked_ell;
mod library;
mod ops;
mod plan;
mod table;

use std::sync::Arc;

use sparse_core::{
    AttentionDesc, AttentionPlan, BackendKind, BlockShape, CsrRef, Dense, DenseRef, Error,
    Executor, Format, Layout, Offer, OpKind, Precision, Result, Scalar, SddmmDesc, SddmmPlan,
    SpIndex, SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan,
};

use crate::executor::CudaBackend;
use crate::plan::{check_request, Desc, PlanClock, Request, WidthDesc};
use blas::Blas;
pub use blocked_ell::BlockedEllSpmm;
use library::Handle;
use plan::Started;
use table::Entry;

/// cuSPARSE and cuBLAS on one device. Operands must be device memory of this backend (or of
/// the [`CudaBackend`] it shares a device with).
///
/// - Algorithms: `vendor-default`, `vendor-alg1..3` name cuSPARSE's (SpMV CSR: DEFAULT,
///   CSR_ALG1, CSR_ALG2; SpMV COO: DEFAULT, COO_ALG1, COO_ALG2; SpMM CSR: DEFAULT, CSR_ALG1..3;
///   SDDMM CSR: DEFAULT); `auto` is `vendor-default` except for f16 SpMM, where it is CSR_ALG3
///   (the others round partial sums to f16). Errors name what runs instead.
/// - Workspace: sized at plan time, for SpMM and SDDMM for the descriptor's width (N or K) in
///   every layout; `reserve` grows it, runs never allocate. A run whose leading dimensions
///   need more workspace than that is refused until a `reserve`.
/// - Semantics are sparse-blas's: `alpha == 0` does not call cuSPARSE; `beta == 0` zeroes the
///   output first (cuSPARSE does not document that it ignores the output then), which adds one
///   write of the output to a timed run; strided vectors are staged through contiguous copies.
#[derive(Clone)]
pub struct CusparseBackend {
    /// The device, and the uploads, downloads and allocations, exactly as the `cuda` backend.
    cuda: CudaBackend,
    handle: Arc<Handle>,
    blas: Arc<Blas>,
}

impl std::fmt::Debug for CusparseBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CusparseBackend({})", self.description())
    }
}

/// The `cuda` backend's errors about the device, as this backend's.
fn as_cusparse(e: Error) -> Error {
    match e {
        Error::DeviceUnavailable { reason, .. } => library::unavailable(reason),
        other => other,
    }
}

impl CusparseBackend {
    /// The backend on device `ordinal`; [`Error::DeviceUnavailable`] says why when the device or
    /// cuSPARSE cannot be used.
    pub fn new(ordinal: usize) -> Result<Self> {
        Self::sharing(&CudaBackend::new(ordinal).map_err(as_cusparse)?)
    }

    /// The backend on `cuda`'s device and stream: buffers of either backend serve both, and
    /// their work runs in one order.
    pub fn sharing(cuda: &CudaBackend) -> Result<Self> {
        let device = cuda.device();
        Ok(CusparseBackend {
            cuda: cuda.clone(),
            handle: Arc::new(Handle::new(device).map_err(as_cusparse)?),
            blas: Arc::new(Blas::new(device)),
        })
    }

    /// What the backend runs with any cuSPARSE it accepts (12.4 and newer), without a device:
    /// the table [`Executor::algorithms`] reads.
    pub fn table(op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
        table::algorithms(op, format, precision)
    }

    pub fn device_info(&self) -> &crate::DeviceInfo {
        self.cuda.device_info()
    }

    /// The cuSPARSE version in use, e.g. `12.6.3`.
    pub fn version(&self) -> String {
        self.handle.version_name()
    }

    /// The table row that runs a request (`auto` resolved), or the typed error saying what
    /// runs instead.
    fn select<T: Scalar>(request: Request) -> Result<&'static Entry> {
        check_request::<T>(BackendKind::Cusparse, Self::table, request)?;
        let (op, format, precision, algorithm) = request;
        table::find(op, format, precision, algorithm).ok_or_else(|| {
            Error::internal(format!(
                "the cusparse table offers {algorithm} for {op} on {format} in {precision} \
                 but has no row for it"
            ))
        })
    }

    /// A plan of `a` for `request` started on its table row, reserving `width`; BSR in
    /// `block`.
    fn start<T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'_, T, I>,
        (request, block): (Request, Option<BlockShape>),
        width: usize,
    ) -> Result<Started<T>> {
        let clock = PlanClock::start();
        let entry = Self::select::<T>(request)?;
        let (_, _, precision, _) = request;
        plan::start(&self.handle, a, (entry, precision, block), width, clock)
    }
}

impl Executor for CusparseBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cusparse
    }

    fn description(&self) -> String {
        format!(
            "cusparse (cuSPARSE {}, {})",
            self.version(),
            self.device_info().summary()
        )
    }

    fn algorithms(&self, op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
        Self::table(op, format, precision)
    }

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        let started = self.start(a, (desc.request(), desc.block), 0)?;
        Ok(Box::new(ops::plan_spmv(started)?))
    }

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
        let started = self.start(a, (desc.request(), desc.block), desc.width())?;
        Ok(Box::new(ops::plan_dense::<_, ops::Spmm>(started)?))
    }

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
        if desc.scale_by_values {
            return Err(Error::Unsupported {
                op: OpKind::Sddmm,
                format: desc.format,
                precision: desc.precision,
                algorithm: Some(Self::select::<T>(desc.request())?.algorithm),
                backend: BackendKind::Cusparse,
                supported: "sddmm without scale_by_values (cuSPARSE's SDDMM multiplies X*Y^T by \
                            the pattern of S, never by its values)"
                    .to_string(),
            });
        }
        let started = self.start(s, (desc.request(), desc.block), desc.width())?;
        Ok(Box::new(ops::plan_dense::<_, ops::Sddmm>(started)?))
    }

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        _a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>> {
        let entry = Self::select::<T>(desc.request())?;
        Err(Error::internal(format!(
            "the cusparse table lists attention ({}) but no plan runs it",
            entry.vendor.name()
        )))
    }

    fn upload<T: Scalar>(&self, host: DenseRef<'_, T>) -> Result<Dense<T>> {
        self.cuda.upload(host)
    }

    fn download<T: Scalar>(&self, dense: &Dense<T>) -> Result<Dense<T>> {
        self.cuda.download(dense)
    }

    fn zeros<T: Scalar>(&self, rows: usize, cols: usize, layout: Layout) -> Result<Dense<T>> {
        self.cuda.zeros(rows, cols, layout)
    }

    fn synchronize(&self) -> Result<()> {
        self.cuda.synchronize()
    }
}

impl CusparseBackend {
    /// The `cuda` backend on the same device and stream, whose vector operations this backend
    /// shares.
    pub(crate) fn cuda(&self) -> &CudaBackend {
        &self.cuda
    }
}
