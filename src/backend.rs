//! The backend chosen at run time.

use sparse_core::{
    AttentionDesc, AttentionPlan, BackendKind, BackendRequest, CsrRef, Dense, DenseRef, Error,
    Executor, Format, Layout, OpKind, Precision, Result, Scalar, SddmmDesc, SddmmPlan, SpIndex,
    SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan, Support,
};
use sparse_cpu::CpuBackend;

/// A backend picked at run time; user code is the same whichever it is.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Backend {
    Cpu(CpuBackend),
}

impl Backend {
    /// The backend a request names. `auto` is the CPU in a build without a GPU backend; `cuda`
    /// and `cusparse` are then [`Error::DeviceUnavailable`].
    pub fn new(request: BackendRequest) -> Result<Self> {
        match request {
            BackendRequest::Auto | BackendRequest::Kind(BackendKind::Cpu) => {
                Ok(Backend::Cpu(CpuBackend::new()))
            }
            BackendRequest::Kind(backend) => Err(Error::DeviceUnavailable {
                backend,
                reason: "this build of sparse-blas has no CUDA backend".to_string(),
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
}

impl Executor for Backend {
    fn kind(&self) -> BackendKind {
        match self {
            Backend::Cpu(b) => b.kind(),
        }
    }

    fn description(&self) -> String {
        match self {
            Backend::Cpu(b) => b.description(),
        }
    }

    fn capability(&self, op: OpKind, format: Format, precision: Precision) -> Support {
        match self {
            Backend::Cpu(b) => b.capability(op, format, precision),
        }
    }

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_spmv(a, desc),
        }
    }

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_spmm(a, desc),
        }
    }

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_sddmm(s, desc),
        }
    }

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>> {
        match self {
            Backend::Cpu(b) => b.plan_attention(a, desc),
        }
    }

    fn upload<T: Scalar>(&self, host: DenseRef<'_, T>) -> Result<Dense<T>> {
        match self {
            Backend::Cpu(b) => b.upload(host),
        }
    }

    fn download<T: Scalar>(&self, dense: &Dense<T>) -> Result<Dense<T>> {
        match self {
            Backend::Cpu(b) => b.download(dense),
        }
    }

    fn zeros<T: Scalar>(&self, rows: usize, cols: usize, layout: Layout) -> Result<Dense<T>> {
        match self {
            Backend::Cpu(b) => b.zeros(rows, cols, layout),
        }
    }

    fn synchronize(&self) -> Result<()> {
        match self {
            Backend::Cpu(b) => b.synchronize(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_cpu_and_gpu_backends_say_why_they_are_missing() {
        assert_eq!(Backend::from_name("auto").unwrap().kind(), BackendKind::Cpu);
        let err = Backend::from_name("cuda").unwrap_err();
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
        assert!(Backend::from_name("tpu").is_err());
    }
}
