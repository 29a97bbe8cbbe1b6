//! ME-BCRS built on the device from CSR (`fs_build_*` and `fs_scan_*` in flashsparse.cu say
//! how): the CSR is uploaded once, every step runs in parallel over entries, and only the vector
//! count and the window pointers come back to the host (to size the arrays and to cut the
//! work into chunks). The values are the matrix's own, not 1.0 as in the published builder, and
//! the row count needs no padding. Each CSR entry's slot in the ME-BCRS values is kept, for
//! value updates and the SDDMM's value order. [`DeviceMeBcrs::to_host`] gives the arrays back
//! as a validated [`MeBcrs`], which the tests hold equal to `MeBcrs::from_csr`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DeviceRepr, LaunchConfig};
use sparse_core::{CsrRef, Error, Result, Scalar, SpIndex, ValueOrder};
use sparse_formats::{MeBcrs, MeBcrsParts, MeBcrsShape};

use super::{storage, SOURCE};
use crate::device::{CudaBuffer, Device};
use crate::kernel::{kernel_params, Entry, Kernel, KernelSpec, MutPtr, Ptr};
use crate::matrix::DeviceCsr;
use crate::operand::to_u32;
use crate::plan::{Phase, PlanClock};

/// Threads per block of the per-entry and per-window kernels (`FS_BUILD_THREADS`).
pub(super) const THREADS: u32 = 256;
/// Threads per block of the scan kernels (their template argument), flags each thread sums
/// (`FS_SCAN_ITEMS`), and so flags per block.
const SCAN_THREADS: u32 = 256;
pub(super) const SCAN_ITEMS: u32 = 4;
const SCAN_TILE: u32 = SCAN_THREADS * SCAN_ITEMS;

/// What an allocation failure of the builder names.
const ARRAYS: &str = "allocating ME-BCRS arrays";

kernel_params! {
    /// `fs_build_first`: `first[e]` = 1 when no earlier row of entry e's window holds its
    /// column.
    pub(crate) struct FsBuildFirst {
        nnz: u32,
        rows: u32,
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        first: out(u32),
    }
}

kernel_params! {
    /// `fs_scan_tiles`, `fs_scan_offsets`, `fs_scan_apply`: `prefix` (n + 1 values) = the
    /// exclusive scan of the `n` flags, through the totals of the `tiles` tiles in `offsets`
    /// (`tiles + 1` values).
    pub(crate) struct FsScan {
        n: u32,
        tiles: u32,
        flags: ptr(u32),
        offsets: out(u32),
        prefix: out(u32),
    }
}

kernel_params! {
    /// `fs_build_window_ptr`: `window_ptr[w]` = the vectors of the windows before w.
    pub(crate) struct FsBuildWindowPtr {
        windows: u32,
        rows: u32,
        row_ptr: ptr(u32),
        prefix: ptr(u32),
        window_ptr: out(u32),
    }
}

kernel_params! {
    /// `fs_build_fill<T>`: each entry's value to its slot of `values` and the slot to `slots`,
    /// each vector's column and mask.
    pub(crate) struct FsBuildFill<T> {
        nnz: u32,
        rows: u32,
        k: u32,
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        csr_values: ptr(T),
        prefix: ptr(u32),
        window_ptr: ptr(u32),
        vec_col: out(u32),
        vec_mask: out(u8),
        values: out(T),
        slots: out(u32),
    }
}

/// The exclusive scan of u32 counts (`fs_scan_*`), which the ME-BCRS and Tiled16 builders
/// size their arrays with.
pub(crate) struct ScanEntries {
    tiles: Entry<FsScan>,
    offsets: Entry<FsScan>,
    apply: Entry<FsScan>,
}

impl ScanEntries {
    pub fn new() -> Result<Self> {
        Ok(ScanEntries {
            tiles: Entry::new(&SOURCE, "fs_scan_tiles", &[&SCAN_THREADS])?,
            offsets: Entry::new(&SOURCE, "fs_scan_offsets", &[&SCAN_THREADS])?,
            apply: Entry::new(&SOURCE, "fs_scan_apply", &[&SCAN_THREADS])?,
        })
    }

    pub fn specs(&self) -> [&KernelSpec; 3] {
        [self.tiles.spec(), self.offsets.spec(), self.apply.spec()]
    }

    pub fn load(&self, device: &Arc<Device>) -> Result<Scan> {
        Ok(Scan {
            tiles: device.kernel(&self.tiles)?,
            offsets: device.kernel(&self.offsets)?,
            apply: device.kernel(&self.apply)?,
        })
    }
}

/// The scan's kernels, loaded.
pub(crate) struct Scan {
    tiles: Kernel<FsScan>,
    offsets: Kernel<FsScan>,
    apply: Kernel<FsScan>,
}

impl Scan {
    /// `prefix[i]` (n + 1 values) = the sum of `counts[..i]`, on the device's stream.
    pub fn run(&self, device: &Device, counts: Ptr<u32>, n: u32) -> Result<CudaSlice<u32>> {
        let tiles = n / SCAN_TILE + 1;
        let offsets = device.alloc_zeros::<u32>(tiles as usize + 1, "allocating a scan")?;
        let prefix = device.alloc_zeros::<u32>(n as usize + 1, "allocating a scan")?;
        let scan = FsScan {
            n,
            tiles,
            flags: counts,
            offsets: MutPtr::of(&offsets, device),
            prefix: MutPtr::of(&prefix, device),
        };
        let grid = LaunchConfig {
            grid_dim: (tiles, 1, 1),
            block_dim: (SCAN_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `tiles` blocks of SCAN_TILE counts cover the n counts (reading none past
        // them); offsets holds tiles + 1 values.
        unsafe { self.tiles.launch(grid, &scan) }?;
        let one_block = LaunchConfig {
            grid_dim: (1, 1, 1),
            ..grid
        };
        // SAFETY: one block over the `tiles` totals, writing offsets[tiles].
        unsafe { self.offsets.launch(one_block, &scan) }?;
        // SAFETY: as fs_scan_tiles; prefix holds n + 1 values, the last in tile n / SCAN_TILE.
        unsafe { self.apply.launch(grid, &scan) }?;
        Ok(prefix)
    }
}

/// The builder's kernels for storage type `T` and windows of `window` rows.
pub(crate) struct BuildEntries<T: Scalar> {
    window: usize,
    first: Entry<FsBuildFirst>,
    scan: ScanEntries,
    window_ptr: Entry<FsBuildWindowPtr>,
    fill: Entry<FsBuildFill<T>>,
}

impl<T: Scalar> BuildEntries<T> {
    pub fn new(window: usize) -> Result<Self> {
        Ok(BuildEntries {
            window,
            first: Entry::new(&SOURCE, "fs_build_first", &[&window])?,
            scan: ScanEntries::new()?,
            window_ptr: Entry::new(&SOURCE, "fs_build_window_ptr", &[&window])?,
            fill: Entry::new(&SOURCE, "fs_build_fill", &[&storage::<T>()?, &window])?,
        })
    }

    pub fn specs(&self) -> Vec<&KernelSpec> {
        let mut specs = vec![self.first.spec()];
        specs.extend(self.scan.specs());
        specs.extend([self.window_ptr.spec(), self.fill.spec()]);
        specs
    }

    /// The kernels, compiled (in parallel) and loaded where they are not yet.
    pub fn load(&self, device: &Arc<Device>) -> Result<Builder<T>> {
        device.prepare(&self.specs())?;
        Ok(Builder {
            window: self.window,
            first: device.kernel(&self.first)?,
            scan: self.scan.load(device)?,
            window_ptr: device.kernel(&self.window_ptr)?,
            fill: device.kernel(&self.fill)?,
        })
    }
}

/// Every builder kernel Rust can ask for, once each (the scans are the same for every window
/// height and storage type).
pub(super) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs: Vec<KernelSpec> = Vec::new();
    for window in [8, 16] {
        let (f16, f32) = (
            BuildEntries::<half::f16>::new(window)?,
            BuildEntries::<f32>::new(window)?,
        );
        for spec in f16.specs().into_iter().chain(f32.specs()) {
            if !specs.contains(spec) {
                specs.push(spec.clone());
            }
        }
    }
    Ok(specs)
}

/// The builder's kernels, loaded.
pub(crate) struct Builder<T: Scalar> {
    /// The window height the kernels are made for.
    window: usize,
    first: Kernel<FsBuildFirst>,
    scan: Scan,
    window_ptr: Kernel<FsBuildWindowPtr>,
    fill: Kernel<FsBuildFill<T>>,
}

/// An ME-BCRS matrix on the device, with its window pointers also on the host.
pub(crate) struct DeviceMeBcrs<T> {
    pub rows: u32,
    pub cols: u32,
    pub nnz: u32,
    pub shape: MeBcrsShape,
    pub window_ptr: CudaSlice<u32>,
    pub vec_col: CudaSlice<u32>,
    /// `window / 8` bytes per vector, as in [`MeBcrs`].
    pub vec_mask: CudaSlice<u8>,
    pub values: CudaBuffer<T>,
    /// For each CSR entry, its slot in `values`.
    pub slots: CudaSlice<u32>,
    pub host_window_ptr: Vec<u32>,
}

/// One thread per item, [`THREADS`] a block.
fn per_item(items: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (items.div_ceil(THREADS).max(1), 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// The first `len` elements of `src`, on the host.
pub(crate) fn download<V: DeviceRepr + Default + Clone>(
    device: &Device,
    src: &CudaSlice<V>,
    len: usize,
) -> Result<Vec<V>> {
    let mut host = vec![V::default(); len];
    if len > 0 {
        device
            .stream
            .memcpy_dtoh(&src.slice(..len), &mut host)
            .map_err(|e| device.error("copying arrays from the device", e))?;
        device.synchronize()?;
    }
    Ok(host)
}

impl<T: Scalar> DeviceMeBcrs<T> {
    /// Converts `a` (canonical CSR) on the device with `kernels` (made for `shape`'s window
    /// height); the upload is timed as a transfer, the rest as device work.
    pub fn build<I: SpIndex>(
        device: &Arc<Device>,
        kernels: &Builder<T>,
        a: CsrRef<'_, T, I>,
        shape: MeBcrsShape,
        clock: &mut PlanClock,
    ) -> Result<Self> {
        if kernels.window != shape.window() {
            return Err(Error::internal(format!(
                "ME-BCRS of {}-row windows built with the kernels of {}-row windows",
                shape.window(),
                kernels.window
            )));
        }
        let csr = DeviceCsr::upload(device, a)?;
        clock.lap(device, Phase::Transfer)?;
        let (rows, nnz) = (csr.rows, csr.nnz);
        let h = shape.window() as u32;
        let k = shape.block() as u32;
        let windows = rows.div_ceil(h);
        let row_ptr = Ptr::of(&csr.row_ptr, device);
        let col_idx = Ptr::of(&csr.col_idx, device);

        // 1. First-row flags, 2. their exclusive scan over nnz + 1 positions.
        let first = device.alloc_zeros::<u32>(nnz as usize, ARRAYS)?;
        if nnz > 0 {
            let params = FsBuildFirst {
                nnz,
                rows,
                row_ptr,
                col_idx,
                first: MutPtr::of(&first, device),
            };
            // SAFETY: one thread per entry < nnz; row_ptr has rows + 1 entries and col_idx nnz
            // sorted within rows (canonical CSR); `first` holds nnz flags.
            unsafe { kernels.first.launch(per_item(nnz), &params) }?;
        }
        let prefix = kernels.scan.run(device, Ptr::of(&first, device), nnz)?;

        // 3. Window pointers; the vector count sizes the arrays.
        let window_ptr = device.alloc_zeros::<u32>(windows as usize + 1, ARRAYS)?;
        let params = FsBuildWindowPtr {
            windows,
            rows,
            row_ptr,
            prefix: Ptr::of(&prefix, device),
            window_ptr: MutPtr::of(&window_ptr, device),
        };
        // SAFETY: windows + 1 threads read row_ptr at rows or below and prefix at nnz or below,
        // and write window_ptr, which holds windows + 1 values.
        unsafe { kernels.window_ptr.launch(per_item(windows + 1), &params) }?;
        let host_window_ptr = download(device, &window_ptr, windows as usize + 1)?;
        let vectors = host_window_ptr[windows as usize] as usize;
        let slot_count = vectors.checked_mul(h as usize).ok_or_else(|| {
            Error::invalid(format!("{vectors} ME-BCRS vectors overflow usize slots"))
        })?;
        to_u32("number of ME-BCRS slots", slot_count)?;

        // 4. Columns, masks, values and the slot of each entry.
        let vec_col = device.alloc_zeros::<u32>(vectors, ARRAYS)?;
        let vec_mask = device.alloc_zeros::<u8>(vectors * (h as usize / 8), ARRAYS)?;
        let values = device.zeros::<T>(slot_count)?;
        let slots = device.alloc_zeros::<u32>(nnz as usize, ARRAYS)?;
        if nnz > 0 {
            let params = FsBuildFill {
                nnz,
                rows,
                k,
                row_ptr,
                col_idx,
                csr_values: Ptr::of_buffer(&csr.values),
                prefix: Ptr::of(&prefix, device),
                window_ptr: Ptr::of(&window_ptr, device),
                vec_col: MutPtr::of(&vec_col, device),
                vec_mask: MutPtr::of(&vec_mask, device),
                values: MutPtr::of_buffer(&values),
                slots: MutPtr::of(&slots, device),
            };
            // SAFETY: one thread per entry; each writes its own slots[e] (nnz of them) and one
            // value slot below vectors * h (its rank is below its window's vector count), and
            // the first row of a vector writes that vector's column and mask bytes, once.
            unsafe { kernels.fill.launch(per_item(nnz), &params) }?;
        }
        clock.lap(device, Phase::Device)?;
        Ok(DeviceMeBcrs {
            rows,
            cols: csr.cols,
            nnz,
            shape,
            window_ptr,
            vec_col,
            vec_mask,
            values,
            slots,
            host_window_ptr,
        })
    }

    pub fn vectors(&self) -> usize {
        self.host_window_ptr.last().copied().unwrap_or(0) as usize
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        let v = self.vectors();
        (self.host_window_ptr.len() + v + self.nnz as usize) * size_of::<u32>()
            + v * self.shape.window() / 8
            + v * self.shape.window() * size_of::<T>()
    }

    /// The slot of each CSR entry, on the host.
    pub fn download_slots(&self, device: &Device) -> Result<Vec<u32>> {
        download(device, &self.slots, self.nnz as usize)
    }

    /// The CSR entry of each slot, from the [`DeviceMeBcrs::download_slots`] of this matrix.
    pub fn value_order(&self, slots: &[u32]) -> Result<ValueOrder> {
        let broken = |what: String| Error::internal(format!("device-built ME-BCRS slots: {what}"));
        let mut order = vec![ValueOrder::PADDING; self.vectors() * self.shape.window()];
        for (entry, &slot) in slots.iter().enumerate() {
            let held = order
                .get_mut(slot as usize)
                .ok_or_else(|| broken(format!("entry {entry} has slot {slot}, past the end")))?;
            *held = entry;
        }
        ValueOrder::new(order, self.nnz as usize).map_err(|e| broken(e.to_string()))
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
