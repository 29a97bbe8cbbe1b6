//! ME-BCRS built on the device from CSR (`fs_build_*` and `fs_scan_*` in flashsparse.cu say
//! how): the CSR is uploaded once, every step runs in parallel over entries, and only the vector
//! count and the window pointers come back to the host (to size the arrays and to cut the
//! work into chunks). The values are the matrix's own, not 1.0 as in the published builder, and
//! the row count needs no padding. [`DeviceMeBcrs::to_host`] gives the arrays back as a
//! validated [`MeBcrs`], which the tests hold equal to `MeBcrs::from_csr`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use sparse_core::{CsrRef, Error, Result, Scalar, SpIndex};
use sparse_formats::{MeBcrs, MeBcrsParts, MeBcrsShape};

use crate::compile::sources;
use crate::device::{driver_error, CudaBuffer, Device};
use crate::matrix::DeviceCsr;
use crate::operand::{suffix, to_u32};

/// Threads per block of the per-entry and per-window kernels.
const THREADS: u32 = 256;
/// Flags per block of the scan kernels (`FS_SCAN_TILE`) and threads of the one-block pass.
const SCAN_TILE: u32 = 1024;
const SCAN_THREADS: u32 = 256;

/// An ME-BCRS matrix on the device, with its window pointers also on the host.
pub(crate) struct DeviceMeBcrs<T> {
    pub rows: u32,
    pub cols: u32,
    pub shape: MeBcrsShape,
    pub window_ptr: CudaSlice<u32>,
    pub vec_col: CudaSlice<u32>,
    /// `window / 8` bytes per vector, as in [`MeBcrs`].
    pub vec_mask: CudaSlice<u8>,
    pub values: CudaBuffer<T>,
    pub host_window_ptr: Vec<u32>,
}

fn zeroed<V: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    device: &Device,
    len: usize,
) -> Result<CudaSlice<V>> {
    // One spare element keeps a pointer valid when `len` is 0.
    device
        .stream
        .alloc_zeros::<V>(len.max(1))
        .map_err(|e| driver_error("allocating ME-BCRS arrays", e))
}

fn grid(items: u32, per_block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (items.div_ceil(per_block).max(1), 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn launched(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| driver_error(what, e)
}

fn download<V: cudarc::driver::DeviceRepr + Default + Clone>(
    device: &Device,
    src: &CudaSlice<V>,
    len: usize,
) -> Result<Vec<V>> {
    let mut host = vec![V::default(); len];
    if len > 0 {
        device
            .stream
            .memcpy_dtoh(&src.slice(..len), &mut host)
            .map_err(|e| driver_error("copying ME-BCRS arrays from the device", e))?;
        device.synchronize()?;
    }
    Ok(host)
}

impl<T: Scalar> DeviceMeBcrs<T> {
    /// Converts `a` (canonical CSR) on the device.
    pub fn build<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        shape: MeBcrsShape,
    ) -> Result<Self> {
        let sfx = suffix(T::DTYPE)
            .ok_or_else(|| Error::invalid(format!("no ME-BCRS builder for {}", T::DTYPE)))?;
        let csr = DeviceCsr::upload(device, a)?;
        let (rows, nnz) = (csr.rows, csr.nnz);
        let h = shape.window() as u32;
        let k = shape.block() as u32;
        let windows = rows.div_ceil(h);
        let stream = &device.stream;

        // 1. First-row flags, 2. their exclusive scan over nnz + 1 positions.
        let first = zeroed::<u32>(device, nnz as usize)?;
        let tiles = nnz / SCAN_TILE + 1;
        let offsets = zeroed::<u32>(device, tiles as usize + 1)?;
        let prefix = zeroed::<u32>(device, nnz as usize + 1)?;
        if nnz > 0 {
            let f = device.function(sources::FLASHSPARSE, "fs_build_first")?;
            let mut args = stream.launch_builder(&f);
            args.arg(&nnz)
                .arg(&rows)
                .arg(&h)
                .arg(&csr.row_ptr)
                .arg(&csr.col_idx)
                .arg(&first);
            // SAFETY: one thread per entry < nnz; row_ptr has rows + 1 entries and col_idx nnz
            // sorted within rows (canonical CSR); `first` holds nnz flags.
            unsafe { args.launch(grid(nnz, THREADS)) }.map_err(launched("fs_build_first"))?;
        }
        let scan = LaunchConfig {
            grid_dim: (tiles, 1, 1),
            block_dim: (SCAN_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let f = device.function(sources::FLASHSPARSE, "fs_scan_tiles")?;
        let mut args = stream.launch_builder(&f);
        args.arg(&nnz).arg(&first).arg(&offsets);
        // SAFETY: `tiles` blocks of SCAN_TILE flags cover nnz; offsets holds tiles + 1 values.
        unsafe { args.launch(scan) }.map_err(launched("fs_scan_tiles"))?;
        let f = device.function(sources::FLASHSPARSE, "fs_scan_offsets")?;
        let mut args = stream.launch_builder(&f);
        args.arg(&tiles).arg(&offsets);
        // SAFETY: one block over the `tiles` totals, writing offsets[tiles].
        unsafe {
            args.launch(LaunchConfig {
                grid_dim: (1, 1, 1),
                ..scan
            })
        }
        .map_err(launched("fs_scan_offsets"))?;
        let f = device.function(sources::FLASHSPARSE, "fs_scan_apply")?;
        let mut args = stream.launch_builder(&f);
        args.arg(&nnz).arg(&first).arg(&offsets).arg(&prefix);
        // SAFETY: as fs_scan_tiles; prefix holds nnz + 1 values, the last in tile nnz / TILE.
        unsafe { args.launch(scan) }.map_err(launched("fs_scan_apply"))?;

        // 3. Window pointers; the vector count sizes the arrays.
        let window_ptr = zeroed::<u32>(device, windows as usize + 1)?;
        let f = device.function(sources::FLASHSPARSE, "fs_build_window_ptr")?;
        let mut args = stream.launch_builder(&f);
        args.arg(&windows)
            .arg(&rows)
            .arg(&h)
            .arg(&csr.row_ptr)
            .arg(&prefix)
            .arg(&window_ptr);
        // SAFETY: windows + 1 threads read row_ptr at rows or below and prefix at nnz or below.
        unsafe { args.launch(grid(windows + 1, THREADS)) }
            .map_err(launched("fs_build_window_ptr"))?;
        let host_window_ptr = download(device, &window_ptr, windows as usize + 1)?;
        let vectors = host_window_ptr[windows as usize] as usize;
        let slots = vectors.checked_mul(h as usize).ok_or_else(|| {
            Error::invalid(format!("{vectors} ME-BCRS vectors overflow usize slots"))
        })?;
        to_u32("number of ME-BCRS slots", slots)?;

        // 4. Columns, masks and values.
        let vec_col = zeroed::<u32>(device, vectors)?;
        let vec_mask = zeroed::<u8>(device, vectors * (h as usize / 8))?;
        let values = device.zeros::<T>(slots)?;
        if nnz > 0 {
            let f = device.function(sources::FLASHSPARSE, &format!("fs_build_fill_{sfx}"))?;
            let mut args = stream.launch_builder(&f);
            args.arg(&nnz)
                .arg(&rows)
                .arg(&h)
                .arg(&k)
                .arg(&csr.row_ptr)
                .arg(&csr.col_idx)
                .arg(&csr.values.bytes)
                .arg(&prefix)
                .arg(&window_ptr)
                .arg(&vec_col)
                .arg(&vec_mask)
                .arg(&values.bytes);
            // SAFETY: one thread per entry; each writes one slot below vectors * h (its rank
            // is below its window's vector count) and the first row of a vector writes that
            // vector's column and mask bytes, once.
            unsafe { args.launch(grid(nnz, THREADS)) }.map_err(launched("fs_build_fill"))?;
        }
        Ok(DeviceMeBcrs {
            rows,
            cols: csr.cols,
            shape,
            window_ptr,
            vec_col,
            vec_mask,
            values,
            host_window_ptr,
        })
    }

    pub fn vectors(&self) -> usize {
        self.host_window_ptr.last().copied().unwrap_or(0) as usize
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        let v = self.vectors();
        (self.host_window_ptr.len() + v) * 4
            + v * self.shape.window() / 8
            + v * self.shape.window() * size_of::<T>()
    }

    /// The arrays as a host [`MeBcrs`], validated.
    pub fn to_host(&self, device: &Device) -> Result<MeBcrs<T>> {
        let v = self.vectors();
        let parts = MeBcrsParts {
            window_ptr: self.host_window_ptr.clone(),
            vec_col: download(device, &self.vec_col, v)?,
            values: self.values.to_host()?,
            vec_mask: download(device, &self.vec_mask, v * self.shape.window() / 8)?,
        };
        MeBcrs::try_new(self.rows as usize, self.cols as usize, self.shape, parts)
            .map_err(|rejected| rejected.error)
    }
}
