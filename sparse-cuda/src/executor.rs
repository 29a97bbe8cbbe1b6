//! The `cuda` backend: sparse-blas's own kernels on one GPU.

use std::sync::Arc;

use sparse_core::{
    Algorithm, AttentionDesc, AttentionPlan, BackendKind, Compute, CsrRef, DType, Dense, DenseRef,
    Error, Executor, Format, Layout, OpKind, Precision, Result, Scalar, SddmmDesc, SddmmPlan,
    SpIndex, SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan, Support,
};

use crate::blas1::Blas1Workspace;
use crate::device::{CudaBuffer, Device};
use crate::flashsparse::{FlashSparseSddmmPlan, FlashSparseSpmmPlan};
use crate::rode::{auto_algorithm, RodeSddmmPlan, RodeSpmmPlan};
use crate::sddmm::CudaSddmmPlan;
use crate::spmm::CudaSpmmPlan;
use crate::spmv::CudaSpmvPlan;

/// sparse-blas's CUDA kernels on one device. Plans hold the matrix on the device; operands
/// must be device memory made by [`Executor::upload`] or [`Executor::zeros`] of this backend.
#[derive(Clone)]
pub struct CudaBackend {
    device: Arc<Device>,
    /// The reduction workspace of the BLAS-1 methods (`blas1.rs`), shared by clones.
    pub(crate) blas1: Arc<Blas1Workspace>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBackend({})", self.device.info.summary())
    }
}

/// The precisions a CUDA-core kernel computes natively: f64, f32, and f16 storage with f32
/// accumulation.
fn native_float(precision: Precision) -> bool {
    matches!(
        (precision.storage, precision.compute),
        (DType::F64, Compute::F64) | (DType::F32, Compute::F32) | (DType::F16, Compute::F32)
    )
}

impl CudaBackend {
    /// The backend on device `ordinal`; [`Error::DeviceUnavailable`] says why when it cannot be used.
    pub fn new(ordinal: usize) -> Result<Self> {
        let device = Device::new(ordinal)?;
        Ok(CudaBackend {
            blas1: Arc::new(Blas1Workspace::new(&device)?),
            device,
        })
    }

    pub fn device_info(&self) -> &crate::DeviceInfo {
        &self.device.info
    }

    /// The device and stream, for backends that run beside this one on the same buffers.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.device
    }

    fn check<T: Scalar>(&self, op: OpKind, format: Format, precision: Precision) -> Result<()> {
        if precision.storage != T::DTYPE {
            return Err(Error::invalid(format!(
                "{op}: the descriptor asks for {precision} but the matrix holds {}",
                T::DTYPE
            )));
        }
        if self.capability(op, format, precision) == Support::Unsupported {
            return Err(Error::Unsupported {
                op,
                format,
                precision,
                backend: BackendKind::Cuda,
                supported: "spmv, spmm and sddmm on csr in f64 f32 f16; spmv on coo in f64 f32; \
                            spmm and sddmm on me-bcrs in f16 tf32"
                    .to_string(),
            });
        }
        Ok(())
    }

    /// The algorithm a CSR SpMM or SDDMM plan runs: `auto` resolved by the matrix statistics
    /// ([`auto_algorithm`]); one the backend lacks is refused.
    fn csr_algorithm<T, I: SpIndex>(
        op: OpKind,
        a: CsrRef<'_, T, I>,
        precision: Precision,
        algorithm: Algorithm,
    ) -> Result<Algorithm> {
        match algorithm {
            Algorithm::Auto => Ok(auto_algorithm(op, a)),
            Algorithm::Vector | Algorithm::Rode | Algorithm::RodeDeterministic => Ok(algorithm),
            _ => Err(Error::Unsupported {
                op,
                format: Format::Csr,
                precision,
                backend: BackendKind::Cuda,
                supported: format!(
                    "{op} on csr with the algorithms auto, vector, rode and rode-deterministic"
                ),
            }),
        }
    }

    fn buffer<'a, T: Scalar>(&self, dense: &'a Dense<T>) -> Result<&'a CudaBuffer<T>> {
        dense
            .device_memory()
            .and_then(|m| m.as_any().downcast_ref::<CudaBuffer<T>>())
            .ok_or_else(|| Error::WrongMemory {
                context: "download".into(),
                expected: self.device.location(),
                found: dense.as_ref().location(),
            })
    }
}

impl Executor for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn description(&self) -> String {
        format!("cuda ({})", self.device.info.summary())
    }

    fn capability(&self, op: OpKind, format: Format, precision: Precision) -> Support {
        let supported = match (op, format) {
            (OpKind::Spmv | OpKind::Spmm | OpKind::Sddmm, Format::Csr) => native_float(precision),
            (OpKind::Spmm | OpKind::Sddmm, Format::MeBcrs) => {
                crate::flashsparse::supports(precision)
            }
            (OpKind::Spmv, Format::Coo) => {
                native_float(precision) && precision.storage != DType::F16
            }
            _ => false,
        };
        if supported {
            Support::Native
        } else {
            Support::Unsupported
        }
    }

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        self.check::<T>(OpKind::Spmv, desc.format, desc.precision)?;
        Ok(Box::new(CudaSpmvPlan::new(
            &self.device,
            a,
            desc.format,
            desc.precision,
            desc.algorithm,
        )?))
    }

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
        self.check::<T>(OpKind::Spmm, desc.format, desc.precision)?;
        if desc.format == Format::MeBcrs {
            return Ok(Box::new(FlashSparseSpmmPlan::new(&self.device, a, desc)?));
        }
        let algorithm = Self::csr_algorithm(OpKind::Spmm, a, desc.precision, desc.algorithm)?;
        if matches!(algorithm, Algorithm::Rode | Algorithm::RodeDeterministic) {
            return Ok(Box::new(RodeSpmmPlan::new(
                &self.device,
                a,
                desc.precision,
                algorithm,
            )?));
        }
        Ok(Box::new(CudaSpmmPlan::new(
            &self.device,
            a,
            desc.precision,
            algorithm,
        )?))
    }

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
        self.check::<T>(OpKind::Sddmm, desc.format, desc.precision)?;
        if desc.format == Format::MeBcrs {
            return Ok(Box::new(FlashSparseSddmmPlan::new(&self.device, s, desc)?));
        }
        let algorithm = Self::csr_algorithm(OpKind::Sddmm, s, desc.precision, desc.algorithm)?;
        if matches!(algorithm, Algorithm::Rode | Algorithm::RodeDeterministic) {
            return Ok(Box::new(RodeSddmmPlan::new(
                &self.device,
                s,
                desc.precision,
                algorithm,
                desc.scale_by_values,
            )?));
        }
        Ok(Box::new(CudaSddmmPlan::new(
            &self.device,
            s,
            desc.precision,
            algorithm,
            desc.scale_by_values,
        )?))
    }

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        _a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>> {
        self.check::<T>(OpKind::Attention, desc.format, desc.precision)?;
        Err(Error::invalid("unreachable: capability refuses attention"))
    }

    fn upload<T: Scalar>(&self, host: DenseRef<'_, T>) -> Result<Dense<T>> {
        let data = host.host("upload")?;
        let buf = self.device.upload(&data[..host.span()])?;
        Dense::from_device(
            Box::new(buf),
            host.rows(),
            host.cols(),
            host.ld(),
            host.layout(),
        )
    }

    fn download<T: Scalar>(&self, dense: &Dense<T>) -> Result<Dense<T>> {
        let values = self.buffer(dense)?.to_host()?;
        Dense::from_vec(
            values,
            dense.rows(),
            dense.cols(),
            dense.ld(),
            dense.layout(),
        )
    }

    fn zeros<T: Scalar>(&self, rows: usize, cols: usize, layout: Layout) -> Result<Dense<T>> {
        let ld = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        }
        .max(1);
        let buf = self.device.zeros::<T>(rows * cols)?;
        Dense::from_device(Box::new(buf), rows, cols, ld, layout)
    }

    fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }
}
