//! cuSPARSE through cudarc's raw bindings: loading, the handle, status codes and descriptors.
//!
//! cudarc resolves each entry point on first call and panics when the library or the symbol is
//! missing, so [`load`] checks both up front: a machine without cuSPARSE, or with one too old
//! for an entry point used here, gets [`Error::DeviceUnavailable`] before any call is made.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::cusparse::sys;
use sparse_core::{BackendKind, DType, Error, Layout, Result};

use crate::device::Device;
use crate::libraries::ensure_loaded;
use crate::operand::Bound;

/// Every cuSPARSE entry point this backend calls.
const SYMBOLS: &[&str] = &[
    "cusparseCreate",
    "cusparseDestroy",
    "cusparseSetStream",
    "cusparseGetVersion",
    "cusparseCreateCsr",
    "cusparseCreateCoo",
    "cusparseCreateBsr",
    "cusparseCreateBlockedEll",
    "cusparseSpMatSetValues",
    "cusparseDestroySpMat",
    "cusparseCreateDnVec",
    "cusparseDnVecSetValues",
    "cusparseDestroyDnVec",
    "cusparseCreateDnMat",
    "cusparseDnMatSetValues",
    "cusparseDestroyDnMat",
    "cusparseSpMV_bufferSize",
    "cusparseSpMV_preprocess",
    "cusparseSpMV",
    "cusparseSpMM_bufferSize",
    "cusparseSpMM_preprocess",
    "cusparseSpMM",
    "cusparseSDDMM_bufferSize",
    "cusparseSDDMM_preprocess",
    "cusparseSDDMM",
];

pub(super) fn unavailable(reason: impl Into<String>) -> Error {
    Error::DeviceUnavailable {
        backend: BackendKind::Cusparse,
        reason: reason.into(),
    }
}

/// Loads cuSPARSE (once per process) and checks that it has every entry point used here.
pub(super) fn load() -> Result<()> {
    static LOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            // libcusparse (CUDA 12+) links libnvJitLink, which the loader finds only on its path.
            ensure_loaded("nvJitLink");
            ensure_loaded("cusparse");
            // SAFETY: probing opens the library, whose initialisers have no preconditions.
            if !unsafe { sys::is_culib_present() } {
                return Err(
                    "cuSPARSE (libcusparse.so) was not found on the loader path or under \
                            CUDA_HOME, CUDA_PATH, /usr/local/cuda* or pip's nvidia/cu13"
                        .to_string(),
                );
            }
            // SAFETY: is_culib_present() opened a candidate, so culib() opens it too (no panic).
            let lib = unsafe { sys::culib() };
            for name in SYMBOLS {
                // SAFETY: the symbol is only looked up, never called through this type.
                if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
                    return Err(format!(
                        "the cuSPARSE library found has no {name} (CUDA 12.4 or newer is needed)"
                    ));
                }
            }
            Ok(())
        })
        .clone()
        .map_err(unavailable)
}

/// A status a vendor library returned in place of success: its number and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct VendorStatus {
    library: &'static str,
    code: u32,
    name: String,
}

impl VendorStatus {
    /// `status`, whose number is `code`, of `library` (its name is the enum's `Debug`).
    pub fn new(library: &'static str, code: u32, status: impl std::fmt::Debug) -> Self {
        VendorStatus {
            library,
            code,
            name: format!("{status:?}"),
        }
    }
}

impl std::fmt::Display for VendorStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} status {})", self.name, self.library, self.code)
    }
}

impl std::error::Error for VendorStatus {}

/// A failed library call as the typed error: an allocation failure inside the library is
/// [`Error::OutOfMemory`] (of a size the library does not say), every other failure
/// [`Error::Device`] naming the function, with the status as its source.
pub(super) fn status_error(
    device: &Device,
    function: &str,
    status: VendorStatus,
    alloc_failed: bool,
) -> Error {
    if alloc_failed {
        return Error::OutOfMemory {
            device: format!("{} (inside {function})", device.location()),
            requested: None,
            free: device.free_memory(),
        };
    }
    Error::Device {
        backend: BackendKind::Cusparse,
        context: function.to_string(),
        source: Box::new(status),
    }
}

/// A cuSPARSE status as the typed error ([`status_error`]).
pub(super) fn check(function: &str, status: sys::cusparseStatus_t, device: &Device) -> Result<()> {
    use sys::cusparseStatus_t::*;
    match status {
        CUSPARSE_STATUS_SUCCESS => Ok(()),
        other => Err(status_error(
            device,
            function,
            VendorStatus::new("cuSPARSE", other as u32, other),
            other == CUSPARSE_STATUS_ALLOC_FAILED,
        )),
    }
}

/// Calls a cuSPARSE function and checks its status, naming the function in the error.
macro_rules! call {
    ($device:expr, $function:ident($($arg:expr),* $(,)?)) => {
        $crate::cusparse::library::check(
            stringify!($function),
            cudarc::cusparse::sys::$function($($arg),*),
            $device,
        )
    };
}
pub(super) use call;

/// Makes the device's context current on this thread: cuSPARSE and cuBLAS launch through the
/// runtime API, which uses the thread's current context.
pub(super) fn bind(device: &Device) -> Result<()> {
    device
        .ctx
        .bind_to_thread()
        .map_err(|e| device.error("making the context current", e))
}

/// The cuSPARSE type of stored values.
pub(super) fn value_type(dtype: DType) -> Option<sys::cudaDataType> {
    match dtype {
        DType::F64 => Some(sys::cudaDataType::CUDA_R_64F),
        DType::F32 => Some(sys::cudaDataType::CUDA_R_32F),
        DType::F16 => Some(sys::cudaDataType::CUDA_R_16F),
        DType::I8 => Some(sys::cudaDataType::CUDA_R_8I),
        DType::I32 => Some(sys::cudaDataType::CUDA_R_32I),
        _ => None,
    }
}

/// The cuSPARSE compute type for stored values: f16 is always computed in f32, i8 exactly in
/// i32.
pub(super) fn compute_type(dtype: DType) -> sys::cudaDataType {
    match dtype {
        DType::F64 => sys::cudaDataType::CUDA_R_64F,
        DType::I8 | DType::I32 => sys::cudaDataType::CUDA_R_32I,
        _ => sys::cudaDataType::CUDA_R_32F,
    }
}

/// A dimension as cuSPARSE's 32-bit signed index type admits it.
pub(super) fn index(what: &str, v: usize) -> Result<i64> {
    i32::try_from(v)
        .map(i64::from)
        .map_err(|_| Error::overflow::<i32>(what, v))
}

struct RawHandle(sys::cusparseHandle_t);

// SAFETY: a cuSPARSE handle may be used from any thread as long as calls do not overlap, which
// the Mutex around it guarantees.
unsafe impl Send for RawHandle {}

/// The cuSPARSE handle of one device, bound to its stream; calls through it are serialised.
pub(super) struct Handle {
    raw: Mutex<RawHandle>,
    device: Arc<Device>,
    /// `major*1000 + minor*100 + patch` of the library in use.
    pub version: i32,
}

impl Handle {
    pub fn new(device: &Arc<Device>) -> Result<Self> {
        load()?;
        bind(device)?;
        let raw = cudarc::cusparse::result::create()
            .map_err(|e| unavailable(format!("cusparseCreate: {:?}", e.0)))?;
        // From here on Drop destroys the handle, also when the next calls fail.
        let mut handle = Handle {
            raw: Mutex::new(RawHandle(raw)),
            device: device.clone(),
            version: 0,
        };
        // SAFETY: the handle is live; the stream belongs to the device whose context is current
        // and outlives the handle (both are owned by `device`, which the handle keeps).
        unsafe {
            call!(
                device,
                cusparseSetStream(raw, device.stream.cu_stream() as sys::cudaStream_t)
            )?;
            call!(device, cusparseGetVersion(raw, &mut handle.version))?;
        }
        Ok(handle)
    }

    /// The device whose stream the handle is bound to.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// e.g. `12.6.3`.
    pub fn version_name(&self) -> String {
        let v = self.version;
        format!("{}.{}.{}", v / 1000, v % 1000 / 100, v % 100)
    }

    /// Runs `f` on the handle, locked, with the device's context current on this thread
    /// (cuSPARSE launches through the runtime API, which uses the thread's current context).
    pub fn with<R>(&self, f: impl FnOnce(sys::cusparseHandle_t) -> Result<R>) -> Result<R> {
        let guard = self.raw.lock().unwrap_or_else(PoisonError::into_inner);
        bind(&self.device)?;
        f(guard.0)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let raw = self.raw.get_mut().unwrap_or_else(PoisonError::into_inner).0;
        // Destroying synchronises with the handle's work in its context; if the context cannot
        // be made current or the destruction fails there is nothing left to do at drop.
        let _ = self.device.ctx.bind_to_thread();
        // SAFETY: the handle was made by cusparseCreate and this is its only destruction.
        let _ = unsafe { cudarc::cusparse::result::destroy(raw) };
    }
}

/// A cuSPARSE descriptor type owned by the struct `$name`: host memory describing device arrays
/// it does not own, re-pointed at other values by `set_values` and destroyed on drop.
macro_rules! descriptor {
    ($(#[$meta:meta])* $name:ident($raw:ty), $set_values:ident, $destroy:ident) => {
        $(#[$meta])*
        pub(super) struct $name($raw);

        // SAFETY: the descriptor is host memory owned by this value alone; cuSPARSE ties it to
        // no thread.
        unsafe impl Send for $name {}

        impl $name {
            /// Points the descriptor at `values`.
            ///
            /// # Safety
            /// `values` addresses as many elements on the device as the descriptor describes;
            /// cuSPARSE reads or writes them only in calls made while that holds.
            pub unsafe fn set_values(&mut self, device: &Device, values: u64) -> Result<()> {
                call!(device, $set_values(self.0, values as *mut c_void))
            }

            pub fn raw(&self) -> $raw {
                self.0
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: made by the descriptor's cusparseCreate function; this is its only
                // destruction. A failure to free host memory leaves nothing to do.
                let _ = unsafe { sys::$destroy(self.0) };
            }
        }
    };
}

descriptor!(
    /// A sparse-matrix descriptor.
    SpMat(sys::cusparseSpMatDescr_t),
    cusparseSpMatSetValues,
    cusparseDestroySpMat
);
descriptor!(
    /// A dense-vector descriptor of fixed length, pointed at each run's operand.
    DnVec(sys::cusparseDnVecDescr_t),
    cusparseDnVecSetValues,
    cusparseDestroyDnVec
);
descriptor!(
    /// A dense-matrix descriptor.
    DnMat(sys::cusparseDnMatDescr_t),
    cusparseDnMatSetValues,
    cusparseDestroyDnMat
);

/// Where a sparse descriptor finds its rows: CSR's row offsets (rows + 1 of them), COO's row
/// index of every entry (sorted), or BSR's block row offsets (block rows + 1) with the block
/// height and width.
pub(super) enum Rows {
    Offsets(u64),
    Indices(u64),
    Blocks(u64, (i64, i64)),
}

impl SpMat {
    /// A zero-based CSR, COO or BSR descriptor with 32-bit indices; for BSR the shape counts
    /// blocks, and the blocks are row-major.
    ///
    /// # Safety
    /// `rows`, `col_idx` and `values` address their elements on the device (`nnz` each, but
    /// `shape.0 + 1` row offsets and, for BSR, r*c values per block), which outlive every use
    /// of the descriptor.
    pub unsafe fn new(
        device: &Device,
        (rows, cols, nnz): (i64, i64, i64),
        row_array: Rows,
        col_idx: u64,
        values: u64,
        dtype: sys::cudaDataType,
    ) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        let (col_idx, values) = (col_idx as *mut c_void, values as *mut c_void);
        let (index, base) = (
            sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
            sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
        );
        match row_array {
            Rows::Offsets(row_ptr) => call!(
                device,
                cusparseCreateCsr(
                    &mut raw,
                    rows,
                    cols,
                    nnz,
                    row_ptr as *mut c_void,
                    col_idx,
                    values,
                    index,
                    index,
                    base,
                    dtype,
                )
            )?,
            Rows::Indices(row_idx) => call!(
                device,
                cusparseCreateCoo(
                    &mut raw,
                    rows,
                    cols,
                    nnz,
                    row_idx as *mut c_void,
                    col_idx,
                    values,
                    index,
                    base,
                    dtype,
                )
            )?,
            Rows::Blocks(block_row_ptr, (r, c)) => call!(
                device,
                cusparseCreateBsr(
                    &mut raw,
                    rows,
                    cols,
                    nnz,
                    r,
                    c,
                    block_row_ptr as *mut c_void,
                    col_idx,
                    values,
                    index,
                    index,
                    base,
                    dtype,
                    sys::cusparseOrder_t::CUSPARSE_ORDER_ROW,
                )
            )?,
        }
        Ok(SpMat(raw))
    }
}

impl SpMat {
    /// A zero-based Blocked-ELL descriptor with 32-bit indices: `rows x cols` in square blocks
    /// of `block`, `ell_cols` value columns per row.
    ///
    /// # Safety
    /// `col_ind` addresses `rows / block * ell_cols / block` block column indices and `values`
    /// `rows * ell_cols` row-major values on the device, which outlive every use of the
    /// descriptor.
    pub unsafe fn blocked_ell(
        device: &Device,
        (rows, cols): (i64, i64),
        (block, ell_cols): (i64, i64),
        (col_ind, values): (u64, u64),
        dtype: sys::cudaDataType,
    ) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        call!(
            device,
            cusparseCreateBlockedEll(
                &mut raw,
                rows,
                cols,
                block,
                ell_cols,
                col_ind as *mut c_void,
                values as *mut c_void,
                sys::cusparseIndexType_t::CUSPARSE_INDEX_32I,
                sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                dtype,
            )
        )?;
        Ok(SpMat(raw))
    }
}

impl DnVec {
    /// # Safety
    /// `values` addresses `len` contiguous elements on the device; cuSPARSE reads or writes them
    /// only in calls made while that holds.
    pub unsafe fn new(
        device: &Device,
        len: i64,
        values: u64,
        dtype: sys::cudaDataType,
    ) -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        call!(
            device,
            cusparseCreateDnVec(&mut raw, len, values as *mut c_void, dtype)
        )?;
        Ok(DnVec(raw))
    }
}

/// Shape, leading dimension and order of a dense-matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DnShape {
    rows: i64,
    cols: i64,
    ld: i64,
    layout: Layout,
}

impl std::fmt::Display for DnShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{} {} with leading dimension {}",
            self.rows, self.cols, self.layout, self.ld
        )
    }
}

impl DnShape {
    /// A bound operand's shape.
    pub fn of(d: &Bound, what: &str) -> Result<Self> {
        Self::new((d.rows, d.cols), d.ld as usize, d.layout, what)
    }

    /// `rows x cols` in `layout` with the smallest leading dimension: what a plan sizes its
    /// workspace for.
    pub fn tight((rows, cols): (usize, usize), layout: Layout, what: &str) -> Result<Self> {
        let ld = match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        };
        Self::new((rows, cols), ld.max(1), layout, what)
    }

    fn new((rows, cols): (usize, usize), ld: usize, layout: Layout, what: &str) -> Result<Self> {
        Ok(DnShape {
            rows: index(&format!("rows of {what}"), rows)?,
            cols: index(&format!("columns of {what}"), cols)?,
            ld: index(&format!("leading dimension of {what}"), ld)?,
            layout,
        })
    }

    /// The transpose over the same memory: a row-major matrix read column-major.
    pub fn transposed(self) -> Self {
        DnShape {
            rows: self.cols,
            cols: self.rows,
            ld: self.ld,
            layout: match self.layout {
                Layout::RowMajor => Layout::ColMajor,
                Layout::ColMajor => Layout::RowMajor,
            },
        }
    }

    fn order(self) -> sys::cusparseOrder_t {
        match self.layout {
            Layout::RowMajor => sys::cusparseOrder_t::CUSPARSE_ORDER_ROW,
            Layout::ColMajor => sys::cusparseOrder_t::CUSPARSE_ORDER_COL,
        }
    }
}

/// A dense-matrix descriptor kept across runs: re-pointed while the shape stays, remade when it
/// changes (descriptors are cheap; the workspace, sized per shape, is what plans keep apart).
#[derive(Default)]
pub(super) struct DnSlot(Option<(DnMat, DnShape)>);

impl DnSlot {
    /// The descriptor of `shape` over `values`.
    ///
    /// # Safety
    /// `values` addresses a matrix of `shape` on the device; cuSPARSE reads or writes it only in
    /// calls made while that holds.
    pub unsafe fn point(
        &mut self,
        device: &Device,
        shape: DnShape,
        values: u64,
        dtype: sys::cudaDataType,
    ) -> Result<sys::cusparseDnMatDescr_t> {
        match &mut self.0 {
            Some((m, kept)) if *kept == shape => m.set_values(device, values)?,
            _ => {
                // The previous descriptor, if any, is destroyed first.
                self.0 = None;
                let mut raw = std::ptr::null_mut();
                call!(
                    device,
                    cusparseCreateDnMat(
                        &mut raw,
                        shape.rows,
                        shape.cols,
                        shape.ld,
                        values as *mut c_void,
                        dtype,
                        shape.order(),
                    )
                )?;
                self.0 = Some((DnMat(raw), shape));
            }
        }
        Ok(self
            .0
            .as_ref()
            .map_or(std::ptr::null_mut(), |(m, _)| m.raw()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_keep_their_number_and_name() {
        let status = sys::cusparseStatus_t::CUSPARSE_STATUS_NOT_SUPPORTED;
        let kept = VendorStatus::new("cuSPARSE", status as u32, status);
        assert_eq!(
            kept.to_string(),
            "CUSPARSE_STATUS_NOT_SUPPORTED (cuSPARSE status 10)"
        );
        let error = Error::Device {
            backend: BackendKind::Cusparse,
            context: "cusparseSpMM".into(),
            source: Box::new(kept.clone()),
        };
        let source = std::error::Error::source(&error).expect("a source");
        assert_eq!(source.downcast_ref::<VendorStatus>(), Some(&kept));
    }
}
