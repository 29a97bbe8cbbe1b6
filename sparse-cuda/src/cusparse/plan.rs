//! What the cuSPARSE plans share: the matrix and its descriptor, the workspace, staging of
//! strided vectors, and the output scaling that stands in for cuSPARSE where the library's
//! semantics fall short of sparse-blas's.
//!
//! - `alpha == 0` never calls cuSPARSE (which would read A): the output becomes `beta*out`.
//! - `beta == 0` must not read the output, and cuSPARSE does not document that it will not,
//!   so the output is zeroed first (one extra write of the output, which a timing of cuSPARSE
//!   with `beta == 0` includes) and cuSPARSE then runs with `beta == 0` on zeros.
//! - cuSPARSE dense vectors have unit stride: a strided vector (a row-major n x 1 operand with a
//!   leading dimension above 1) is copied through a contiguous staging buffer of the plan.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cusparse::sys;
use cudarc::driver::{sys as cu, CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use sparse_core::{
    BackendKind, CsrRef, Error, Format, Layout, PlanInfo, Precision, Result, Scalar, SpIndex,
};

use super::library::{compute_type, driver, index, value_type, Handle, SpMat};
use super::table::Entry;
use crate::compile::sources;
use crate::device::Device;
use crate::matrix::DeviceCsr;
use crate::operand::{suffix, to_u32, AccArg};

/// A device pointer of a buffer (event tracking is off on the backend's contexts, so taking it
/// records nothing).
pub(super) fn ptr(slice: &CudaSlice<u8>, device: &Device) -> u64 {
    slice.device_ptr(&device.stream).0
}

/// A host pointer to a scalar of the compute type, as cuSPARSE takes alpha and beta.
pub(super) fn scalar_ptr(v: &AccArg) -> *const c_void {
    match v {
        AccArg::F32(x) => (x as *const f32).cast(),
        AccArg::F64(x) => (x as *const f64).cast(),
    }
}

/// A device buffer that only grows: the cuSPARSE workspace, or the staging of a strided vector.
#[derive(Default)]
pub(super) struct Scratch {
    buffer: Option<CudaSlice<u8>>,
}

impl Scratch {
    /// At least `bytes` bytes; a larger request replaces the buffer (losing its contents).
    /// Returns the device pointer, 0 when no bytes were ever asked for.
    pub fn reserve(&mut self, device: &Device, bytes: usize) -> Result<u64> {
        if bytes > self.bytes() {
            // The old buffer is freed first so that the two never need to fit together.
            self.buffer = None;
            let slice = device.stream.alloc_zeros::<u8>(bytes).map_err(|e| {
                match driver("allocating a cuSPARSE plan buffer", e) {
                    Error::OutOfMemory { .. } => Error::OutOfMemory {
                        device: device.location(),
                        bytes,
                    },
                    other => other,
                }
            })?;
            self.buffer = Some(slice);
        }
        Ok(self.ptr(device))
    }

    pub fn ptr(&self, device: &Device) -> u64 {
        self.buffer.as_ref().map_or(0, |b| ptr(b, device))
    }

    pub fn bytes(&self) -> usize {
        self.buffer.as_ref().map_or(0, |b| b.len())
    }
}

/// The elements of a dense operand as the scale kernel walks them: `outer` runs of `inner`
/// contiguous elements, `ld` apart.
#[derive(Clone, Copy, Debug)]
pub(super) struct Runs {
    inner: u32,
    outer: u32,
    ld: u32,
}

impl Runs {
    pub fn of(rows: usize, cols: usize, ld: usize, layout: Layout) -> Result<Self> {
        let (inner, outer) = match layout {
            Layout::RowMajor => (cols, rows),
            Layout::ColMajor => (rows, cols),
        };
        Ok(Runs {
            inner: to_u32("elements of a dense run", inner)?,
            outer: to_u32("dense runs", outer)?,
            ld: to_u32("leading dimension", ld)?,
        })
    }

    pub fn contiguous(n: usize) -> Result<Self> {
        Self::of(n, 1, n.max(1), Layout::ColMajor)
    }
}

/// Element stride of an n x 1 operand.
pub(super) fn stride(rows: usize, ld: usize, layout: Layout) -> usize {
    match layout {
        Layout::RowMajor if rows > 1 => ld,
        _ => 1,
    }
}

/// Copies `count` elements of `elem` bytes from every `src_stride`-th element at `src` to every
/// `dst_stride`-th at `dst`, in stream order (a 2D copy one element wide).
pub(super) fn copy_strided(
    device: &Device,
    (dst, dst_stride): (u64, usize),
    (src, src_stride): (u64, usize),
    count: usize,
    elem: usize,
) -> Result<()> {
    let copy = cu::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_stride * elem,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: cu::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_stride * elem,
        WidthInBytes: elem,
        Height: count,
    };
    device
        .ctx
        .bind_to_thread()
        .map_err(|e| driver("making the context current", e))?;
    // SAFETY: both ranges lie inside live device allocations (the caller's operands, checked
    // by their geometry, and staging reserved for `count` elements); the copy is ordered on the
    // stream every other access to them uses.
    unsafe { cu::cuMemcpy2DAsync_v2(&copy, device.stream.cu_stream()) }
        .result()
        .map_err(|e| driver("copying a strided vector", e))
}

/// A vector operand made contiguous for cuSPARSE: the operand itself, or staging that holds a
/// copy of it (and is copied back for outputs).
pub(super) struct Contiguous {
    pub ptr: u64,
    /// The strided original (pointer, stride) the staging stands for.
    original: Option<(u64, usize)>,
}

impl Contiguous {
    /// `n` elements at `ptr`, `stride` apart; staged through `staging` unless `stride` is 1.
    /// `read` copies the operand into the staging (inputs, and outputs scaled by `beta`).
    pub fn new(
        device: &Device,
        staging: &mut Scratch,
        (ptr, stride): (u64, usize),
        n: usize,
        elem: usize,
        read: bool,
    ) -> Result<Self> {
        if stride == 1 {
            return Ok(Contiguous {
                ptr,
                original: None,
            });
        }
        let staged = staging.reserve(device, n * elem)?;
        if read {
            copy_strided(device, (staged, 1), (ptr, stride), n, elem)?;
        }
        Ok(Contiguous {
            ptr: staged,
            original: Some((ptr, stride)),
        })
    }

    /// Copies an output back to its strided original.
    pub fn write_back(&self, device: &Device, n: usize, elem: usize) -> Result<()> {
        match self.original {
            Some(original) => copy_strided(device, original, (self.ptr, 1), n, elem),
            None => Ok(()),
        }
    }
}

/// A matrix on the device with its cuSPARSE descriptor: CSR, or COO over the same column
/// indices and values plus row indices.
pub(super) struct SparseOnDevice<T> {
    pub mat: SpMat,
    /// (rows, cols, nnz) as cuSPARSE takes them.
    pub shape: (i64, i64, i64),
    csr: DeviceCsr<T>,
    row_idx: Option<CudaSlice<u32>>,
}

impl<T: Scalar> SparseOnDevice<T> {
    pub fn upload<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        format: Format,
    ) -> Result<Self> {
        let shape = (
            index("number of rows", a.rows())?,
            index("number of columns", a.cols())?,
            index("number of entries", a.nnz())?,
        );
        let dtype = value_type(T::DTYPE)
            .ok_or_else(|| Error::invalid(format!("cuSPARSE takes no {}", T::DTYPE)))?;
        let csr = DeviceCsr::upload(device, a)?;
        let (cols, values) = (
            csr.col_idx.device_ptr(&device.stream).0,
            ptr(&csr.values.bytes, device),
        );
        let (mat, row_idx) = match format {
            Format::Coo => {
                let rows = DeviceCsr::upload_row_indices(device, a)?;
                // SAFETY: row and column indices and values hold nnz elements each, owned by
                // the returned value together with the descriptor.
                let mat = unsafe {
                    SpMat::coo(
                        device,
                        shape,
                        rows.device_ptr(&device.stream).0,
                        cols,
                        values,
                        dtype,
                    )?
                };
                (mat, Some(rows))
            }
            _ => {
                // SAFETY: the row pointer holds rows + 1 offsets, indices and values nnz
                // elements, owned by the returned value together with the descriptor.
                let mat = unsafe {
                    SpMat::csr(
                        device,
                        shape,
                        csr.row_ptr.device_ptr(&device.stream).0,
                        cols,
                        values,
                        dtype,
                    )?
                };
                (mat, None)
            }
        };
        Ok(SparseOnDevice {
            mat,
            shape,
            csr,
            row_idx,
        })
    }

    /// The device address of the values.
    pub fn values(&self, device: &Device) -> u64 {
        ptr(&self.csr.values.bytes, device)
    }

    pub fn bytes(&self) -> usize {
        self.csr.bytes() + self.row_idx.as_ref().map_or(0, |r| r.len() * 4)
    }
}

/// The parts every plan has: the handle, the algorithm, the workspace and the scale kernel.
pub(super) struct Common {
    pub device: Arc<Device>,
    pub handle: Arc<Handle>,
    pub entry: &'static Entry,
    pub values: sys::cudaDataType,
    pub compute: sys::cudaDataType,
    pub workspace: Scratch,
    scale: CudaFunction,
    matrix_bytes: usize,
    pub info: PlanInfo,
}

impl Common {
    pub fn new<T: Scalar>(
        device: &Arc<Device>,
        handle: &Arc<Handle>,
        entry: &'static Entry,
        precision: Precision,
        matrix_bytes: usize,
    ) -> Result<Self> {
        let (values, sfx) = value_type(T::DTYPE)
            .zip(suffix(T::DTYPE))
            .ok_or_else(|| Error::invalid(format!("cuSPARSE takes no {}", T::DTYPE)))?;
        Ok(Common {
            device: device.clone(),
            handle: handle.clone(),
            entry,
            values,
            compute: compute_type(T::DTYPE),
            workspace: Scratch::default(),
            scale: scale_function(device, sfx)?,
            matrix_bytes,
            info: PlanInfo {
                backend: BackendKind::Cusparse,
                op: entry.op,
                format: entry.format,
                precision,
                algorithm: entry.algorithm,
                bytes: matrix_bytes,
                deterministic: entry.deterministic,
            },
        })
    }

    /// Counts the workspace and `staging` bytes in the plan's size.
    pub fn account(&mut self, staging: usize) {
        self.info.bytes = self.matrix_bytes + self.workspace.bytes() + staging;
    }

    /// `out = beta*out` over `runs` at `out` (zeros, without reading, when beta is 0).
    pub fn scale(&self, out: u64, runs: Runs, beta: AccArg) -> Result<()> {
        scale(&self.device, &self.scale, out, runs, beta)
    }

    /// Grows the workspace to `bytes`; the pointer cuSPARSE is given (null when none is needed).
    pub fn workspace(&mut self, bytes: usize) -> Result<*mut c_void> {
        Ok(self.workspace.reserve(&self.device, bytes)? as *mut c_void)
    }
}

/// The kernel that scales (or zeroes) a strided dense operand: the SpMM kernels' `scale_matrix`.
pub(super) fn scale_function(device: &Device, sfx: &str) -> Result<CudaFunction> {
    device.function(sources::SPMM, &format!("scale_matrix_{sfx}"))
}

/// `out = beta*out` over `runs` at `out` with `function` from [`scale_function`] (zeros, without
/// reading, when beta is 0).
pub(super) fn scale(
    device: &Device,
    function: &CudaFunction,
    out: u64,
    runs: Runs,
    beta: AccArg,
) -> Result<()> {
    if runs.inner == 0 || runs.outer == 0 {
        return Ok(());
    }
    const BLOCK: u32 = 256;
    let config = LaunchConfig {
        grid_dim: (runs.inner.div_ceil(BLOCK), runs.outer.min(65_535), 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut args = device.stream.launch_builder(function);
    args.arg(&runs.inner)
        .arg(&runs.outer)
        .arg(&out)
        .arg(&runs.ld);
    beta.push(&mut args);
    // SAFETY: scale_matrix(u32 inner, u32 outer, T* out, u32 ld, acc beta) gets those arguments
    // (a device pointer is passed as its 64-bit address); `runs` was built from the operand's
    // checked geometry, so every element it walks lies in the operand.
    unsafe { args.launch(config) }.map_err(|e| driver("scale_matrix", e))?;
    Ok(())
}
