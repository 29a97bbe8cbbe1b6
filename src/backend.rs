//! The backend chosen at run time.

use sparse_core::{
    AttentionDesc, AttentionPlan, BackendKind, BackendRequest, Coef, CsrRef, Dense, DenseMut,
    DenseRef, Error, Executor, Format, Layout, Offer, OpKind, Precision, Real, Result, Scalar,
    SddmmDesc, SddmmPlan, SpIndex, SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan, VectorOps,
};
use sparse_cpu::CpuBackend;
use sparse_cuda::{CudaBackend, CusparseBackend};

/// A backend picked at run time; user code is the same whichever it is.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Backend {
    Cpu(CpuBackend),
    Cuda(CudaBackend),
    Cusparse(CusparseBackend),
}

impl Backend {
    /// The backend a request names: `auto` is CUDA on device 0 when it can be used, else the
    /// CPU; `cuda` without a usable GPU is [`Error::DeviceUnavailable`] with the reason.
    pub fn new(request: BackendRequest) -> Result<Self> {
        match request {
            BackendRequest::Auto => {
                Ok(CudaBackend::new(0)
                    .map_or_else(|_| Backend::Cpu(CpuBackend::new()), Backend::Cuda))
            }
            BackendRequest::Kind(BackendKind::Cpu) => Ok(Backend::Cpu(CpuBackend::new())),
            BackendRequest::Kind(BackendKind::Cuda) => CudaBackend::new(0).map(Backend::Cuda),
            BackendRequest::Kind(BackendKind::Cusparse) => {
                CusparseBackend::new(0).map(Backend::Cusparse)
            }
            BackendRequest::Kind(backend) => Err(Error::DeviceUnavailable {
                backend,
                reason: "this backend is not part of this build".to_string(),
            }),
        }
    }

    /// The backend named `cpu`, `cuda`, `cusparse` or `auto`.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::new(name.parse()?)
    }

    /// The backend `SPARSE_BACKEND` names, or `default` when it is unset.
    pub fn from_env_or(default: &str) -> Result<Self> {
        Self::new(BackendRequest::from_env_or(default)?)
    }

    /// What a backend of `kind` runs, without making one: the GPU backends' tables hold for any
    /// device they accept (sm_80 and newer), so this needs no GPU.
    pub fn table(
        kind: BackendKind,
        op: OpKind,
        format: Format,
        precision: Precision,
    ) -> Vec<Offer> {
        match kind {
            BackendKind::Cpu => CpuBackend::new().algorithms(op, format, precision),
            BackendKind::Cuda => CudaBackend::table(op, format, precision),
            BackendKind::Cusparse => CusparseBackend::table(op, format, precision),
            _ => Vec::new(),
        }
    }
}

impl Executor for Backend {
    fn kind(&self) -> BackendKind {
        match self {
            Backend::Cpu(b) => b.kind(),
            Backend::Cuda(b) => b.kind(),
            Backend::Cusparse(b) => b.kind(),
        }
    }

    fn description(&self) -> String {
        match self {
            Backend::Cpu(b) => b.description(),
            Backend::Cuda(b) => b.description(),
            Backend::Cusparse(b) => b.description(),
        }
    }

    fn algorithms(&self, op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
        match self {
            Backend::Cpu(b) => b.algorithms(op, format, precision),
            Backend::Cuda(b) => b.algorithms(op, format, precision),
            Backend::Cusparse(b) => b.algorithms(op, format, precision),
        }
    }

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_spmv(a, desc),
            Backend::Cuda(b) => b.plan_spmv(a, desc),
            Backend::Cusparse(b) => b.plan_spmv(a, desc),
        }
    }

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_spmm(a, desc),
            Backend::Cuda(b) => b.plan_spmm(a, desc),
            Backend::Cusparse(b) => b.plan_spmm(a, desc),
        }
    }

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_sddmm(s, desc),
            Backend::Cuda(b) => b.plan_sddmm(s, desc),
            Backend::Cusparse(b) => b.plan_sddmm(s, desc),
        }
    }

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_attention(a, desc),
            Backend::Cuda(b) => b.plan_attention(a, desc),
            Backend::Cusparse(b) => b.plan_attention(a, desc),
        }
    }

    fn upload<T: Scalar>(&self, host: DenseRef<'_, T>) -> Result<Dense<T>> {
        match self {
            Backend::Cpu(b) => b.upload(host),
            Backend::Cuda(b) => b.upload(host),
            Backend::Cusparse(b) => b.upload(host),
        }
    }

    fn download<T: Scalar>(&self, dense: &Dense<T>) -> Result<Dense<T>> {
        match self {
            Backend::Cpu(b) => b.download(dense),
            Backend::Cuda(b) => b.download(dense),
            Backend::Cusparse(b) => b.download(dense),
        }
    }

    fn zeros<T: Scalar>(&self, rows: usize, cols: usize, layout: Layout) -> Result<Dense<T>> {
        match self {
            Backend::Cpu(b) => b.zeros(rows, cols, layout),
            Backend::Cuda(b) => b.zeros(rows, cols, layout),
            Backend::Cusparse(b) => b.zeros(rows, cols, layout),
        }
    }

    fn synchronize(&self) -> Result<()> {
        match self {
            Backend::Cpu(b) => b.synchronize(),
            Backend::Cuda(b) => b.synchronize(),
            Backend::Cusparse(b) => b.synchronize(),
        }
    }
}

/// `$call` on the backend inside, whichever it is.
macro_rules! each {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            Backend::Cpu($b) => $call,
            Backend::Cuda($b) => $call,
            Backend::Cusparse($b) => $call,
        }
    };
}

impl VectorOps for Backend {
    fn copy<T: Real>(&self, x: DenseRef<'_, T>, y: DenseMut<'_, T>) -> Result<()> {
        each!(self, b => VectorOps::copy(b, x, y))
    }
    fn convert<T: Real, U: Real>(&self, x: DenseRef<'_, T>, y: DenseMut<'_, U>) -> Result<()> {
        each!(self, b => VectorOps::convert(b, x, y))
    }
    fn dot<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        z: Option<DenseRef<'_, T>>,
        s: DenseMut<'_, f64>,
        slots: [usize; 2],
    ) -> Result<()> {
        each!(self, b => VectorOps::dot(b, x, y, z, s, slots))
    }
    fn axpy<T: Real>(
        &self,
        c: Coef,
        x: DenseRef<'_, T>,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        each!(self, b => VectorOps::axpy(b, c, x, y, s))
    }
    fn xpby<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        c: Coef,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        each!(self, b => VectorOps::xpby(b, x, c, y, s))
    }
    fn cg_update<T: Real>(
        &self,
        c: Coef,
        p: DenseRef<'_, T>,
        q: DenseRef<'_, T>,
        x: DenseMut<'_, T>,
        r: DenseMut<'_, T>,
        s: DenseMut<'_, f64>,
        norm: Option<usize>,
    ) -> Result<()> {
        each!(self, b => VectorOps::cg_update(b, c, p, q, x, r, s, norm))
    }
    fn scale<T: Real>(
        &self,
        d: DenseRef<'_, T>,
        r: DenseRef<'_, T>,
        z: DenseMut<'_, T>,
        s: DenseMut<'_, f64>,
        slots: Option<[usize; 2]>,
    ) -> Result<()> {
        each!(self, b => VectorOps::scale(b, d, r, z, s, slots))
    }
    fn read_scalars(&self, s: DenseRef<'_, f64>, out: &mut [f64]) -> Result<()> {
        each!(self, b => VectorOps::read_scalars(b, s, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_falls_back_to_cpu_and_cuda_says_why_it_is_missing() {
        match Backend::from_name("cuda") {
            Ok(cuda) => assert_eq!(Backend::from_name("auto").unwrap().kind(), cuda.kind()),
            Err(err) => {
                assert!(
                    matches!(
                        err,
                        Error::DeviceUnavailable {
                            backend: BackendKind::Cuda,
                            ..
                        }
                    ),
                    "{err}"
                );
                assert_eq!(Backend::from_name("auto").unwrap().kind(), BackendKind::Cpu);
            }
        }
        match Backend::from_name("cusparse") {
            Ok(b) => assert_eq!(b.kind(), BackendKind::Cusparse),
            Err(err) => assert!(
                matches!(
                    err,
                    Error::DeviceUnavailable {
                        backend: BackendKind::Cusparse,
                        ..
                    }
                ),
                "{err}"
            ),
        }
        assert!(Backend::from_name("tpu").is_err());
    }
}
