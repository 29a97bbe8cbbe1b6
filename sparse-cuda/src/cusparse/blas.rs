//! cuBLAS GEMM: the dense product the benchmarks put beside the sparse kernels (the density at
//! which a sparse kernel stops paying).
//!
//! cuBLAS is loaded and its handle made on the first [`Blas::gemm`], so a machine with cuSPARSE
//! but no cuBLAS still runs every sparse plan.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::cublas::sys as blas;
use sparse_core::{Accumulator, DType, DenseMut, DenseRef, Error, Layout, Result, Scalar};

use super::library::{driver, status_error, unavailable};
use super::plan::{ptr, scalar_ptr, scale, scale_function, Runs};
use crate::device::Device;
use crate::libraries::ensure_loaded;
use crate::operand::{input, output, suffix, AccArg};

/// Every cuBLAS entry point called here.
const SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasGemmEx",
];

fn load() -> Result<()> {
    static LOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            // libcublas links libcublasLt, which the loader finds only on its path.
            ensure_loaded("cublasLt");
            ensure_loaded("cublas");
            // SAFETY: probing opens the library, whose initialisers have no preconditions.
            if !unsafe { blas::is_culib_present() } {
                return Err(
                    "cuBLAS (libcublas.so with libcublasLt.so) was not found on the \
                            loader path or under CUDA_HOME, CUDA_PATH, /usr/local/cuda* or pip's \
                            nvidia/cu13"
                        .to_string(),
                );
            }
            // SAFETY: is_culib_present() opened a candidate, so culib() opens it too (no panic).
            let lib = unsafe { blas::culib() };
            for name in SYMBOLS {
                // SAFETY: the symbol is only looked up, never called through this type.
                if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
                    return Err(format!("the cuBLAS library found has no {name}"));
                }
            }
            Ok(())
        })
        .clone()
        .map_err(unavailable)
}

fn check(function: &str, status: blas::cublasStatus_t, device: &Device) -> Result<()> {
    use blas::cublasStatus_t::*;
    match status {
        CUBLAS_STATUS_SUCCESS => Ok(()),
        other => Err(status_error(
            function,
            other,
            other == CUBLAS_STATUS_ALLOC_FAILED,
            device,
        )),
    }
}

struct RawHandle(blas::cublasHandle_t);

// SAFETY: a cuBLAS handle may be used from any thread as long as calls do not overlap, which the
// Mutex in Blas guarantees.
unsafe impl Send for RawHandle {}

impl Drop for RawHandle {
    fn drop(&mut self) {
        // SAFETY: made by cublasCreate_v2; this is its only destruction. A failure leaves
        // nothing to do at drop.
        let _ = unsafe { blas::cublasDestroy_v2(self.0) };
    }
}

/// cuBLAS on one device, its handle made on first use and bound to the device's stream.
pub(super) struct Blas {
    device: Arc<Device>,
    handle: Mutex<Option<RawHandle>>,
}

/// cuBLAS value and compute types of a storage type: f16 multiplies in f32.
fn types(dtype: DType) -> Option<(blas::cudaDataType, blas::cublasComputeType_t)> {
    use blas::cublasComputeType_t::*;
    use blas::cudaDataType::*;
    match dtype {
        DType::F64 => Some((CUDA_R_64F, CUBLAS_COMPUTE_64F)),
        DType::F32 => Some((CUDA_R_32F, CUBLAS_COMPUTE_32F)),
        DType::F16 => Some((CUDA_R_16F, CUBLAS_COMPUTE_32F)),
        _ => None,
    }
}

fn int(what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::overflow::<i32>(what, v))
}

impl Blas {
    pub fn new(device: &Arc<Device>) -> Self {
        Blas {
            device: device.clone(),
            handle: Mutex::new(None),
        }
    }

    /// `C = alpha*A*B + beta*C` for dense matrices on this device, each in either layout.
    pub fn gemm<T: Scalar>(
        &self,
        alpha: T::Acc,
        a: DenseRef<'_, T>,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T>,
    ) -> Result<()> {
        let ((m, k), n) = (a.shape(), b.cols());
        b.expect_shape("gemm B", (k, n))?;
        c.expect_shape("gemm C", (m, n))?;
        let (Some((dtype, compute)), Some(sfx)) = (types(T::DTYPE), suffix(T::DTYPE)) else {
            return Err(Error::invalid(format!(
                "cuBLAS gemm takes f64, f32 or f16 (f32 compute), not {}",
                T::DTYPE
            )));
        };
        let device = &self.device;
        let (a_ptr, b_ptr) = (
            ptr(&input(&a, device, "gemm A")?.bytes, device),
            ptr(&input(&b, device, "gemm B")?.bytes, device),
        );
        let c_runs = Runs::of(m, n, c.ld(), c.layout())?;
        let c_layout = c.layout();
        let c_ld = int("leading dimension of C", c.ld())?;
        let c_ptr = ptr(&output(&mut c, device, "gemm C")?.bytes, device);
        let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
        let (acc_alpha, acc_beta) = (AccArg::of::<T>(alpha), AccArg::of::<T>(beta));
        if alpha == 0.0 || k == 0 {
            // A and B must not be read: C becomes beta*C, as everywhere in sparse-blas.
            return scale(
                device,
                &scale_function(device, sfx)?,
                c_ptr,
                c_runs,
                acc_beta,
            );
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        // cuBLAS is column-major, and a row-major matrix is its transpose stored column-major:
        // a column-major C is A*B, a row-major C is computed as C^T = B^T*A^T. An operand is
        // transposed exactly when its layout differs from C's.
        let op = |d: &DenseRef<'_, T>| {
            if d.layout() == c_layout {
                blas::cublasOperation_t::CUBLAS_OP_N
            } else {
                blas::cublasOperation_t::CUBLAS_OP_T
            }
        };
        let ((first, first_ptr), (second, second_ptr), rows, cols) = match c_layout {
            Layout::ColMajor => ((&a, a_ptr), (&b, b_ptr), m, n),
            Layout::RowMajor => ((&b, b_ptr), (&a, a_ptr), n, m),
        };
        let (rows, cols, inner) = (
            int("rows", rows)?,
            int("columns", cols)?,
            int("inner dimension", k)?,
        );
        let (first_ld, second_ld) = (
            int("leading dimension", first.ld())?,
            int("leading dimension", second.ld())?,
        );
        load()?;
        let mut handle = self.handle.lock().unwrap_or_else(PoisonError::into_inner);
        device
            .ctx
            .bind_to_thread()
            .map_err(|e| driver("making the context current", e))?;
        if handle.is_none() {
            let raw = cudarc::cublas::result::create_handle()
                .map_err(|e| status_error("cublasCreate_v2", e.0, false, device))?;
            let made = RawHandle(raw);
            // SAFETY: the handle is live; the stream belongs to the current context and outlives
            // the handle (Blas keeps the device that owns both).
            check(
                "cublasSetStream_v2",
                unsafe {
                    blas::cublasSetStream_v2(raw, device.stream.cu_stream() as blas::cudaStream_t)
                },
                device,
            )?;
            *handle = Some(made);
        }
        let raw = handle.as_ref().map_or(std::ptr::null_mut(), |h| h.0);
        // SAFETY: the operands are this device's buffers whose geometry (checked on their
        // construction) covers the rows x cols x inner product with the leading dimensions
        // given; alpha and beta are host scalars of the compute type; the call is ordered on the
        // stream every other access to them uses.
        let status = unsafe {
            blas::cublasGemmEx(
                raw,
                op(first),
                op(second),
                rows,
                cols,
                inner,
                scalar_ptr(&acc_alpha),
                first_ptr as *const c_void,
                dtype,
                first_ld,
                second_ptr as *const c_void,
                dtype,
                second_ld,
                scalar_ptr(&acc_beta),
                c_ptr as *mut c_void,
                dtype,
                c_ld,
                compute,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        check("cublasGemmEx", status, device)
    }
}
