//! cuBLAS GEMM: the dense product the benchmarks put beside the sparse kernels (the density at
//! which a sparse kernel stops paying).
//!
//! cuBLAS is loaded and its handle made on the first [`CusparseBackend::gemm`], so a machine
//! with cuSPARSE but no cuBLAS still runs every sparse plan.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::cublas::sys as blas;
use sparse_core::{Accumulator, DType, DenseMut, DenseRef, Error, Layout, Result, Scalar};

use super::library::{bind, status_error, unavailable, VendorStatus};
use super::plan::scalar_ptr;
use super::CusparseBackend;
use crate::device::Device;
use crate::libraries::ensure_loaded;
use crate::operand::{bind_input, bind_output, Bound};
use crate::plan::scale_dense;

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
            device,
            function,
            VendorStatus::new("cuBLAS", other as u32, other),
            other == CUBLAS_STATUS_ALLOC_FAILED,
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

/// cuBLAS input, output and compute types of a storage type: f16 multiplies in f32, i8 sums
/// exactly into i32.
fn types(
    dtype: DType,
) -> Option<(
    blas::cudaDataType,
    blas::cudaDataType,
    blas::cublasComputeType_t,
)> {
    use blas::cublasComputeType_t::*;
    use blas::cudaDataType::*;
    match dtype {
        DType::F64 => Some((CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F)),
        DType::F32 => Some((CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F)),
        DType::F16 => Some((CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F)),
        DType::I8 => Some((CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I)),
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
}

impl CusparseBackend {
    /// Dense `C = alpha*A*B + beta*C` through cuBLAS (`cublasGemmEx`), for device matrices of
    /// this backend in either layout: f64, f32, f16 with f32 compute, and i8 with i32 compute
    /// and output (cuBLAS's integer GEMM wants leading dimensions that are multiples of 4, and
    /// is fastest with A transposed and B not, as column-major sees them). `alpha == 0` reads
    /// neither A nor B; `beta == 0` does not read C (as cuBLAS documents).
    pub fn gemm<T: Scalar>(
        &self,
        alpha: T::Acc,
        a: DenseRef<'_, T>,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let ((m, k), n) = (a.shape(), b.cols());
        b.expect_shape("gemm B", (k, n))?;
        c.expect_shape("gemm C", (m, n))?;
        let Some((dtype, out_type, compute)) = types(T::DTYPE) else {
            return Err(Error::invalid(format!(
                "cuBLAS gemm takes f64, f32, f16 (f32 compute) or i8 (i32 compute), not {}",
                T::DTYPE
            )));
        };
        let Blas { device, handle } = &*self.blas;
        let (a, b, c) = (
            bind_input(&a, device, "gemm A")?,
            bind_input(&b, device, "gemm B")?,
            bind_output(&mut c, device, "gemm C")?,
        );
        if alpha == T::Acc::ZERO || k == 0 {
            // A and B must not be read: C becomes beta*C, as everywhere in sparse-blas.
            return scale_dense::<T>(device, &c, beta);
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        // cuBLAS is column-major, and a row-major matrix is its transpose stored column-major:
        // a column-major C is A*B, a row-major C is computed as C^T = B^T*A^T. An operand is
        // transposed exactly when its layout differs from C's.
        let op = |d: &Bound| {
            if d.layout == c.layout {
                blas::cublasOperation_t::CUBLAS_OP_N
            } else {
                blas::cublasOperation_t::CUBLAS_OP_T
            }
        };
        let (first, second, rows, cols) = match c.layout {
            Layout::ColMajor => (&a, &b, m, n),
            Layout::RowMajor => (&b, &a, n, m),
        };
        let (rows, cols, inner) = (
            int("rows", rows)?,
            int("columns", cols)?,
            int("inner dimension", k)?,
        );
        let (first_ld, second_ld, c_ld) = (
            int("leading dimension", first.ld as usize)?,
            int("leading dimension", second.ld as usize)?,
            int("leading dimension of C", c.ld as usize)?,
        );
        load()?;
        let mut handle = handle.lock().unwrap_or_else(PoisonError::into_inner);
        bind(device)?;
        if handle.is_none() {
            let raw = cudarc::cublas::result::create_handle().map_err(|e| {
                let status = VendorStatus::new("cuBLAS", e.0 as u32, e.0);
                status_error(device, "cublasCreate_v2", status, false)
            })?;
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
        // SAFETY: the operands are bound operands of this device whose geometry (checked by
        // their Dense views) covers the rows x cols x inner product with the leading dimensions
        // given; alpha and beta are host scalars of the compute type (T::Acc); the call is
        // ordered on the stream every other access to them uses.
        let status = unsafe {
            blas::cublasGemmEx(
                raw,
                op(first),
                op(second),
                rows,
                cols,
                inner,
                scalar_ptr(&alpha),
                first.address as *const c_void,
                dtype,
                first_ld,
                second.address as *const c_void,
                dtype,
                second_ld,
                scalar_ptr(&beta),
                c.address as *mut c_void,
                out_type,
                c_ld,
                compute,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        check("cublasGemmEx", status, device)
    }
}
