//! What the cuSPARSE plans share: the matrix on the device, the cuSPARSE side of a plan (the
//! handle, A's descriptor, the workspace), staging of strided vectors, and the start of every
//! plan on the scaffold of `crate::plan`.
//!
//! Where cuSPARSE's semantics fall short of sparse-blas's, the plans stand in for it:
//! - `alpha == 0` never calls cuSPARSE (which would read A): the scaffold scales the output.
//! - `beta == 0` must not read the output, and cuSPARSE does not document that it will not,
//!   so the output is zeroed first (one extra write of the output, which a timing of cuSPARSE
//!   with `beta == 0` includes) and cuSPARSE then runs with `beta == 0` on zeros.
//! - cuSPARSE dense vectors have unit stride: a strided vector (a row-major n x 1 operand with a
//!   leading dimension above 1) is copied through a contiguous staging buffer of the plan, sized
//!   when it is planned.
//! - cuSPARSE's BSR has whole blocks: its rows and columns are the matrix's rounded up to the
//!   block, so where they differ x and y go through the staging too, x's tail left zero.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cusparse::sys;
use cudarc::driver::{sys as cu, CudaSlice, DevicePtr};
use sparse_core::{
    BackendKind, BlockShape, CsrRef, DeviceMemory, Error, Format, Layout, PlanInfo, Precision,
    Result, Scalar, SpIndex,
};
use sparse_formats::Bsr;

use super::library::{bind, compute_type, index, value_type, Handle, Rows, SpMat};
use super::table::Entry;
use crate::bsr::{self, DeviceBsr};
use crate::device::{CudaBuffer, Device};
use crate::matrix::DeviceCsr;
use crate::operand::{to_u32, Bound};
use crate::plan::{Phase, PlanBase, PlanClock, Values};

pub(super) const NON_TRANSPOSE: sys::cusparseOperation_t =
    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;

/// A host pointer to a scalar of the compute type, as cuSPARSE and cuBLAS take alpha and beta
/// (`T::Acc` is f64 for f64 storage and f32 otherwise, which is the compute type).
pub(super) fn scalar_ptr<A>(v: &A) -> *const c_void {
    (v as *const A).cast()
}

/// A matrix on the device in the arrays cuSPARSE reads: CSR, plus the row index of every entry
/// for COO, with values in CSR entry order; or BSR, whose values stay in its slots (value
/// updates scatter there).
pub(super) enum Matrix<T> {
    Csr {
        csr: DeviceCsr<T>,
        row_idx: Option<CudaSlice<u32>>,
    },
    Bsr(DeviceBsr<T>),
}

/// The row index of every entry of `a`: what COO holds beside CSR's column indices and values.
fn row_indices<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> Result<Vec<u32>> {
    let mut rows = Vec::with_capacity(a.nnz());
    for i in 0..a.rows() {
        rows.extend(std::iter::repeat_n(to_u32("row index", i)?, a.row_len(i)));
    }
    Ok(rows)
}

/// The block shapes cuSPARSE's BSR SpMV is asked to run: square, from 2x2 (1x1 is CSR).
fn vendor_block(block: BlockShape) -> bool {
    block.rows == block.cols && block.rows > 1
}

/// What a plan builds on the host before uploading: COO's row indices, or the BSR.
enum HostMatrix<T> {
    Csr(Option<Vec<u32>>),
    Bsr(Bsr<T>),
}

impl<T: Scalar> HostMatrix<T> {
    /// `a`'s arrays beside CSR's for `format`: BSR of `block` (4x4 when `None`), COO's row
    /// indices, or none.
    fn new<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        format: Format,
        block: Option<BlockShape>,
    ) -> Result<Self> {
        Ok(match format {
            Format::Bsr => HostMatrix::Bsr(bsr::convert(a, block)?),
            Format::Coo => HostMatrix::Csr(Some(row_indices(a)?)),
            _ => HostMatrix::Csr(None),
        })
    }
}

impl<T: Scalar> Matrix<T> {
    /// `a` on the device as `host` built it.
    fn upload<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        host: HostMatrix<T>,
    ) -> Result<Self> {
        Ok(match host {
            HostMatrix::Bsr(bsr) => Matrix::Bsr(DeviceBsr::upload(device, &bsr, false)?),
            HostMatrix::Csr(row_idx) => Matrix::Csr {
                csr: DeviceCsr::upload(device, a)?,
                row_idx: row_idx
                    .map(|rows| device.upload_converted(&rows, 0, |&r| r))
                    .transpose()?,
            },
        })
    }

    pub fn values(&self) -> Values<'_, T> {
        match self {
            Matrix::Csr { csr, .. } => Values::csr_order(&csr.values),
            Matrix::Bsr(bsr) => bsr.values.target(),
        }
    }

    /// The values buffer itself (nnz elements for CSR and COO).
    pub fn value_buffer(&self) -> &CudaBuffer<T> {
        match self {
            Matrix::Csr { csr, .. } => &csr.values,
            Matrix::Bsr(bsr) => &bsr.values.values,
        }
    }

    /// Rows and columns as cuSPARSE sees them: BSR's padded to whole blocks.
    pub fn vendor_shape(&self) -> (usize, usize) {
        match self {
            Matrix::Csr { csr, .. } => (csr.rows as usize, csr.cols as usize),
            Matrix::Bsr(bsr) => (
                bsr.block_rows as usize * bsr.block.rows,
                bsr.block_cols as usize * bsr.block.cols,
            ),
        }
    }

    pub fn bytes(&self) -> usize {
        match self {
            Matrix::Csr { csr, row_idx } => {
                csr.bytes() + row_idx.as_ref().map_or(0, |r| r.len() * 4)
            }
            Matrix::Bsr(bsr) => bsr.bytes(),
        }
    }

    /// The cuSPARSE descriptor of these arrays (zero-based, 32-bit indices).
    ///
    /// # Safety
    /// The descriptor points into `self`: it must not be used after `self` is dropped.
    unsafe fn descriptor(&self, device: &Device, dtype: sys::cudaDataType) -> Result<SpMat> {
        let stream = &device.stream;
        let (shape, rows, cols, values) = match self {
            Matrix::Csr { csr, row_idx } => (
                (
                    index("number of rows", csr.rows as usize)?,
                    index("number of columns", csr.cols as usize)?,
                    index("number of entries", csr.nnz as usize)?,
                ),
                match row_idx {
                    Some(rows) => Rows::Indices(rows.device_ptr(stream).0),
                    None => Rows::Offsets(csr.row_ptr.device_ptr(stream).0),
                },
                csr.col_idx.device_ptr(stream).0,
                csr.values.address(),
            ),
            Matrix::Bsr(bsr) => (
                (
                    index("number of block rows", bsr.block_rows as usize)?,
                    index("number of block columns", bsr.block_cols as usize)?,
                    index("number of blocks", bsr.blocks as usize)?,
                ),
                Rows::Blocks(
                    bsr.block_row_ptr.device_ptr(stream).0,
                    (bsr.block.rows as i64, bsr.block.cols as i64),
                ),
                bsr.block_col.device_ptr(stream).0,
                bsr.values.values.address(),
            ),
        };
        // SAFETY: the row pointers hold rows + 1 offsets (block rows + 1 for BSR), row indices
        // (COO), column indices and values nnz elements each (r*c values per block for BSR),
        // in `self`.
        unsafe { SpMat::new(device, shape, rows, cols, values, dtype) }
    }
}

/// The cuSPARSE side of a plan whose matrix has entries: the handle, A's descriptor, the value
/// and compute types, and the workspace, which only [`Vendor::grow`] allocates.
pub(super) struct Vendor {
    pub handle: Arc<Handle>,
    pub mat: SpMat,
    pub values: sys::cudaDataType,
    pub compute: sys::cudaDataType,
    workspace: Option<CudaSlice<u8>>,
}

impl Vendor {
    /// # Safety
    /// `a` outlives the returned value, whose descriptor points into it (a family holds both).
    pub unsafe fn new<T: Scalar>(
        device: &Device,
        handle: &Arc<Handle>,
        a: &Matrix<T>,
    ) -> Result<Self> {
        let values = value_type(T::DTYPE).ok_or_else(|| {
            Error::internal(format!("the cusparse table lists {} storage", T::DTYPE))
        })?;
        Ok(Vendor {
            handle: handle.clone(),
            // SAFETY: the caller keeps `a` alive as long as this value.
            mat: unsafe { a.descriptor(device, values)? },
            values,
            compute: compute_type(T::DTYPE),
            workspace: None,
        })
    }

    /// Grows the workspace to at least `bytes`; returns the bytes it grew by.
    pub fn grow(&mut self, device: &Device, bytes: usize) -> Result<usize> {
        device.grow_zeroed(
            &mut self.workspace,
            bytes,
            "allocating the cuSPARSE workspace",
        )
    }

    pub fn workspace_bytes(&self) -> usize {
        self.workspace.as_ref().map_or(0, |w| w.len())
    }

    /// The workspace as cuSPARSE takes it: null when none was needed.
    pub fn workspace(&self, device: &Device) -> *mut c_void {
        self.workspace.as_ref().map_or(std::ptr::null_mut(), |w| {
            w.device_ptr(&device.stream).0 as *mut c_void
        })
    }
}

/// A plan started: the table row it runs, its description from it, the shared kernels loaded,
/// and A on the device (with its descriptor when it has entries); the clock has counted the
/// upload.
pub(super) struct Started<T: Scalar> {
    pub entry: &'static Entry,
    pub base: PlanBase<T>,
    pub clock: PlanClock,
    pub a: Matrix<T>,
    /// `None` when A holds no entry: runs then only scale the output, and cuSPARSE is never
    /// called.
    pub vendor: Option<Vendor>,
}

/// A plan of `a` running `entry` in `precision` with `reserved_width` on the handle's device
/// (BSR in `block`, 4x4 when `None`), started.
pub(super) fn start<T: Scalar, I: SpIndex>(
    handle: &Arc<Handle>,
    a: CsrRef<'_, T, I>,
    (entry, precision, block): (&'static Entry, Precision, Option<BlockShape>),
    reserved_width: usize,
    clock: PlanClock,
) -> Result<Started<T>> {
    let device = handle.device();
    let info = PlanInfo {
        reserved_width,
        ..PlanInfo::new(
            BackendKind::Cusparse,
            entry.op,
            entry.format,
            precision,
            entry.algorithm,
            entry.deterministic,
        )
    };
    if let Some(shape) = block.filter(|&b| entry.format == Format::Bsr && !vendor_block(b)) {
        return Err(Error::Unsupported {
            op: entry.op,
            format: entry.format,
            precision,
            algorithm: Some(entry.algorithm),
            backend: BackendKind::Cusparse,
            supported: format!(
                "bsr with square blocks of 2x2 to 16x16 (cuSPARSE's BSR SpMV), not {shape}"
            ),
        });
    }
    let host = HostMatrix::new(a, entry.format, block)?;
    let (base, mut clock) = PlanBase::new(device, a, info, &[], clock)?;
    let matrix = Matrix::upload(device, a, host)?;
    clock.lap(device, Phase::Transfer)?;
    let vendor = if a.nnz() > 0 {
        // SAFETY: the family made of this keeps `matrix` beside the descriptor.
        Some(unsafe { Vendor::new(device, handle, &matrix)? })
    } else {
        None
    };
    Ok(Started {
        entry,
        base,
        clock,
        a: matrix,
        vendor,
    })
}

/// Copies `count` elements of `elem` bytes from every `src_stride`-th element at `src` to every
/// `dst_stride`-th at `dst`, in stream order (a 2D copy one element wide).
fn copy_strided(
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
    bind(device)?;
    // SAFETY: both ranges lie inside live device allocations (a bound operand, and staging of at
    // least `count` elements, checked by the callers); the copy is ordered on the stream every
    // other access to them uses.
    unsafe { cu::cuMemcpy2DAsync_v2(&copy, device.stream.cu_stream()) }
        .result()
        .map_err(|e| device.error("copying a strided vector", e))
}

/// The n x 1 operand `v` as cuSPARSE takes it, `len` elements with unit stride: `v` itself, or
/// `staging` holding a copy of it (made only when `read`: inputs, and outputs scaled by
/// `beta`). A `len` past `v`'s length (BSR's rows and columns padded to whole blocks) always
/// stages; the staging's tail is zero from its allocation and no copy writes it, so a padded x
/// adds nothing.
pub(super) fn unit_stride<T: Scalar>(
    device: &Device,
    v: &Bound,
    staging: &CudaBuffer<T>,
    (len, read): (usize, bool),
) -> Result<Bound> {
    let stride = v.increment();
    if stride == 1 && len == v.rows {
        return Ok(*v);
    }
    if staging.len() < len {
        return Err(Error::internal(format!(
            "a staging buffer of {} elements for a vector of {len}",
            staging.len(),
        )));
    }
    let staged = Bound {
        address: staging.address(),
        rows: v.rows,
        cols: 1,
        layout: Layout::ColMajor,
        ld: to_u32("vector length", v.rows.max(1))?,
    };
    if read {
        copy_strided(
            device,
            (staged.address, 1),
            (v.address, stride as usize),
            v.rows,
            size_of::<T>(),
        )?;
    }
    Ok(staged)
}

/// Copies an output `staged` by [`unit_stride`] back to `v` (nothing when it was not staged).
pub(super) fn write_back<T: Scalar>(device: &Device, staged: &Bound, v: &Bound) -> Result<()> {
    if staged.address == v.address {
        return Ok(());
    }
    copy_strided(
        device,
        (v.address, v.increment() as usize),
        (staged.address, 1),
        v.rows,
        size_of::<T>(),
    )
}
