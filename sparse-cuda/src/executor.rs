//! The `cuda` backend: sparse-blas's own kernels on one GPU.

use std::sync::Arc;

use sparse_core::{
    Algorithm, AttentionDesc, AttentionPlan, BackendKind, BlockShape, CsrRef, Dense, DenseRef,
    Error, Executor, Format, Layout, Offer, OpKind, Precision, Result, RowStats, Scalar, SddmmDesc,
    SddmmPlan, SpIndex, SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan,
};

use crate::blas1::Blas1Workspace;
use crate::cusparse::CusparseBackend;
use crate::device::{CudaBuffer, Device};
use crate::plan::{check_request, Desc, PlanClock, Request};
use crate::registry::{self, Family};
use crate::spmv_auto::{self, Choice};
use crate::wide_on_vendor::WideOnVendor;
use crate::{
    attention, bsr, ell, flashsparse, magicube, rode, sddmm, spmm, spmv, tilespmv, tuning,
};

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

impl CudaBackend {
    /// The backend on device `ordinal`; [`Error::DeviceUnavailable`] says why when it cannot be used.
    pub fn new(ordinal: usize) -> Result<Self> {
        let device = Device::new(ordinal)?;
        Ok(CudaBackend {
            blas1: Arc::new(Blas1Workspace::new(&device)?),
            device,
        })
    }

    /// What the backend runs on any device it accepts (sm_80 and newer), without one: the table
    /// [`Executor::algorithms`] reads.
    pub fn table(op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
        registry::algorithms(op, format, precision)
    }

    pub fn device_info(&self) -> &crate::DeviceInfo {
        &self.device.info
    }

    /// Kernel modules loaded on this backend's device so far (each is one instantiation).
    pub fn loaded_kernels(&self) -> usize {
        self.device.loaded_kernels()
    }

    /// The device and stream, for backends that run beside this one on the same buffers.
    pub(crate) fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// The family and algorithm a request runs: checked against the table, `auto` resolved by
    /// `auto`, the rule of the request's operation and format.
    fn resolve<T: Scalar>(
        request: Request,
        auto: impl FnOnce() -> Algorithm,
    ) -> Result<(Family, Algorithm)> {
        check_request::<T>(BackendKind::Cuda, Self::table, request)?;
        let (op, format, precision, algorithm) = request;
        let algorithm = match algorithm {
            Algorithm::Auto => auto(),
            chosen => chosen,
        };
        let family = registry::family(op, format, precision, algorithm).ok_or_else(|| {
            Error::internal(format!(
                "auto chose {algorithm} for {op} on {format} in {precision}, which the table lacks"
            ))
        })?;
        Ok((family, algorithm))
    }

    /// `auto` for CSR SpMM and SDDMM (RoDe or `vector`), for ME-BCRS (8x1 or 16x1 by the
    /// block shape) and for SR-BCRS (Magicube on s8 or s4 MMAs, by the precision and what the
    /// device's tensor cores do).
    fn auto_dense(
        &self,
        (op, format, precision): (OpKind, Format, Precision),
        block: Option<BlockShape>,
        stats: &RowStats,
        (rows, nnz): (usize, usize),
    ) -> Algorithm {
        match format {
            Format::MeBcrs => flashsparse::auto_algorithm(block),
            Format::SrBcrs => {
                magicube::auto_algorithm(precision, self.device.info.compute_capability)
            }
            _ => rode::auto_algorithm(op, stats, (rows, nnz), precision),
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

fn misrouted(family: Family, op: OpKind) -> Error {
    Error::internal(format!("the table routes {op} to the {family:?} family"))
}

impl Executor for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn description(&self) -> String {
        format!("cuda ({})", self.device.info.summary())
    }

    fn algorithms(&self, op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
        Self::table(op, format, precision)
    }

    fn plan_spmv<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmvDesc,
    ) -> Result<Box<dyn SpmvPlan<T> + 'a>> {
        let clock = PlanClock::start();
        let stats = a.row_stats();
        let mut desc = *desc;
        if desc.algorithm == Algorithm::Auto && desc.format == Format::Csr {
            check_request::<T>(BackendKind::Cuda, Self::table, desc.request())?;
            if desc.tune {
                return tuning::spmv(self, a, &desc);
            }
            let span = || a.column_span();
            let blocks = || spmv_auto::whole_blocks(a, spmv_auto::BLOCK_EDGE);
            match spmv_auto::csr_choice(&stats, (a.rows(), a.nnz()), span, blocks, desc.precision) {
                Choice::Cuda(format, algorithm) => {
                    desc.format = format;
                    desc.algorithm = algorithm;
                }
                Choice::Blocks(shape) => {
                    desc.format = Format::Bsr;
                    desc.algorithm = Algorithm::Vector;
                    desc.block = Some(shape);
                }
                Choice::Vendor(format, algorithm) => match CusparseBackend::sharing(self) {
                    Ok(vendor) => {
                        return vendor.plan_spmv(
                            a,
                            &SpmvDesc {
                                format,
                                algorithm,
                                ..desc
                            },
                        )
                    }
                    // Without cuSPARSE, the balanced kernel of our own.
                    Err(_) => desc.algorithm = Algorithm::MergePath,
                },
            }
        }
        let (family, algorithm) =
            Self::resolve::<T>(desc.request(), || spmv::auto_algorithm(desc.format))?;
        match family {
            Family::Spmv => Ok(Box::new(spmv::plan(
                &self.device,
                a,
                &stats,
                (desc.format, desc.precision, algorithm),
                clock,
            )?)),
            Family::Ell => Ok(Box::new(ell::plan(
                &self.device,
                a,
                (desc.format, desc.precision, algorithm),
                desc.block,
                clock,
            )?)),
            Family::Bsr => Ok(Box::new(bsr::plan(
                &self.device,
                a,
                (desc.precision, algorithm),
                desc.block,
                clock,
            )?)),
            Family::TileSpmv => Ok(Box::new(tilespmv::plan(&self.device, a, &desc, clock)?)),
            other => Err(misrouted(other, OpKind::Spmv)),
        }
    }

    fn plan_spmm<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &SpmmDesc,
    ) -> Result<Box<dyn SpmmPlan<T> + 'a>> {
        let clock = PlanClock::start();
        if desc.algorithm == Algorithm::Auto && desc.tune {
            check_request::<T>(BackendKind::Cuda, Self::table, desc.request())?;
            return tuning::spmm(self, a, desc);
        }
        let stats = a.row_stats();
        let (family, algorithm) = Self::resolve::<T>(desc.request(), || {
            self.auto_dense(
                (OpKind::Spmm, desc.format, desc.precision),
                desc.block,
                &stats,
                (a.rows(), a.nnz()),
            )
        })?;
        let device = &self.device;
        match family {
            Family::Spmm => Ok(Box::new(spmm::plan(device, a, &stats, desc, clock)?)),
            Family::Rode => {
                let rode: Box<dyn SpmmPlan<T> + 'a> =
                    Box::new(rode::spmm_plan(device, a, desc, algorithm, clock)?);
                if desc.algorithm != Algorithm::Auto
                    || !rode::spmm_wide_on_vendor(&stats, a.nnz(), desc.precision)
                {
                    return Ok(rode);
                }
                let wide = SpmmDesc {
                    algorithm: Algorithm::VendorDefault,
                    ..*desc
                };
                // The cuSPARSE plan only speeds wide runs up: where it cannot be made (no
                // library, no memory left for its copy of A), RoDe runs at every width.
                match CusparseBackend::sharing(self).and_then(|v| v.plan_spmm(a, &wide)) {
                    Ok(wide) => Ok(Box::new(WideOnVendor::new(rode, wide))),
                    Err(_) => Ok(rode),
                }
            }
            Family::FlashSparse => Ok(Box::new(flashsparse::spmm_plan(device, a, desc, clock)?)),
            Family::Magicube => magicube::spmm(device, a, desc, algorithm, clock),
            other => Err(misrouted(other, OpKind::Spmm)),
        }
    }

    fn plan_sddmm<'a, T: Scalar, I: SpIndex>(
        &self,
        s: CsrRef<'a, T, I>,
        desc: &SddmmDesc,
    ) -> Result<Box<dyn SddmmPlan<T> + 'a>> {
        let clock = PlanClock::start();
        if desc.algorithm == Algorithm::Auto && desc.tune {
            check_request::<T>(BackendKind::Cuda, Self::table, desc.request())?;
            return tuning::sddmm(self, s, desc);
        }
        let stats = s.row_stats();
        let (family, algorithm) = Self::resolve::<T>(desc.request(), || {
            self.auto_dense(
                (OpKind::Sddmm, desc.format, desc.precision),
                desc.block,
                &stats,
                (s.rows(), s.nnz()),
            )
        })?;
        let device = &self.device;
        let narrow: Box<dyn SddmmPlan<T> + 'a> = match family {
            Family::Sddmm => Box::new(sddmm::plan(device, s, desc, clock)?),
            Family::Rode => Box::new(rode::sddmm_plan(device, s, desc, algorithm, clock)?),
            Family::FlashSparse => {
                return Ok(Box::new(flashsparse::sddmm_plan(device, s, desc, clock)?))
            }
            Family::Magicube => {
                return Ok(Box::new(magicube::sddmm_plan(
                    device, s, desc, algorithm, clock,
                )?))
            }
            other => return Err(misrouted(other, OpKind::Sddmm)),
        };
        let on_vendor = desc.algorithm == Algorithm::Auto
            && rode::sddmm_wide_on_vendor(&stats, s.nnz(), desc.precision, desc.scale_by_values);
        if !on_vendor {
            return Ok(narrow);
        }
        let wide = SddmmDesc {
            algorithm: Algorithm::VendorDefault,
            ..*desc
        };
        // As for SpMM: without a cuSPARSE plan the narrow one runs at every width.
        match CusparseBackend::sharing(self).and_then(|v| v.plan_sddmm(s, &wide)) {
            Ok(wide) => Ok(Box::new(WideOnVendor::new(narrow, wide))),
            Err(_) => Ok(narrow),
        }
    }

    fn plan_attention<'a, T: Scalar, I: SpIndex>(
        &self,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
    ) -> Result<Box<dyn AttentionPlan<T> + 'a>> {
        let clock = PlanClock::start();
        if desc.heads == 0 {
            return Err(Error::invalid("attention needs at least one head"));
        }
        desc.resolved_scale(1)?;
        let (family, algorithm) =
            Self::resolve::<T>(desc.request(), || attention::auto_algorithm(desc.precision))?;
        let device = &self.device;
        match (family, algorithm) {
            (Family::Attention, Algorithm::Unfused) => {
                Ok(Box::new(attention::unfused_plan(device, a, desc, clock)?))
            }
            (Family::Attention, Algorithm::Fused) if desc.algorithm == Algorithm::Auto => Ok(
                Box::new(attention::AutoAttention::new(device, a, desc, clock)?),
            ),
            (Family::Attention, _) => Ok(Box::new(attention::plan(
                device, a, desc, algorithm, clock,
            )?)),
            (other, _) => Err(misrouted(other, OpKind::Attention)),
        }
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
        let len = rows
            .checked_mul(cols)
            .ok_or_else(|| Error::invalid(format!("a {rows}x{cols} matrix overflows usize")))?;
        let buf = self.device.zeros::<T>(len)?;
        Dense::from_device(Box::new(buf), rows, cols, ld, layout)
    }

    fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }
}
