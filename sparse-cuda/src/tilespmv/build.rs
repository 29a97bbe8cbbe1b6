//! Tiled16 built on the device from CSR (`tile_build` in tilespmv.cu says how): the CSR is
//! uploaded once; a counting pass sizes every tile row, scans place them, and a filling pass
//! writes the tiles, the deferred CSR, and each CSR entry's slot in the values (for value
//! updates). Only the per-tile-row totals and the tile pointers come back to the host: the totals
//! to check them against u32 and the fill limit before anything large is allocated, the tile
//! pointers to cut long tile rows into segments. [`DeviceTiled16::to_host`] gives the arrays
//! back as a validated [`Tiled16`], which the tests hold equal to `Tiled16::from_csr`.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use sparse_core::{CsrRef, Error, Format, Result, Scalar, SpIndex};
use sparse_formats::{Csr, FillLimit, TileFormat, TileSelection, Tiled16, Tiled16Parts};

use super::TILE;
use crate::device::{CudaBuffer, Device};
use crate::flashsparse::build::{download, Scan, ScanEntries};
use crate::kernel::{c_type, kernel_params, Entry, Kernel, KernelSpec, MutPtr, Ptr};
use crate::matrix::DeviceCsr;
use crate::operand::to_u32;
use crate::plan::{Phase, PlanClock};
use crate::spmv::grid as spmv_grid;

/// What an allocation failure of the builder names.
const ARRAYS: &str = "allocating Tiled16 arrays";
/// `TileRule::forced` for the adaptive rule (`TILE_ADAPTIVE`): past every [`TileFormat`].
pub(super) const ADAPTIVE: u32 = TileFormat::ALL.len() as u32;

kernel_params! {
    /// A [`TileSelection`] as the builder applies it: `forced` a [`TileFormat`] as u8, or
    /// `ADAPTIVE`; tiles of at most `deferred_max` entries deferred (none when 0).
    pub(crate) struct TileRule {
        dense_min_fill: f64,
        ell_max_cv: f64,
        coo_max_nnz: u32,
        forced: u32,
        deferred_max: u32,
    }
}

kernel_params! {
    /// `tile_build<T, false>` writes the per-tile-row counts (`row_*`) and per-row deferred
    /// lengths; `tile_build<T, true>` reads their scans (`tile_ptr` .. `deferred_ptr`) and writes
    /// the matrix (`tile_col` .. `slots`; `payload` as zeroed words OR-ed into).
    pub(crate) struct TileBuild<T> {
        rule: plain(TileRule),
        rows: u32,
        cols: u32,
        tile_rows: u32,
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        csr_values: ptr(T),
        row_tiles: out(u32),
        row_nnz: out(u32),
        row_bytes: out(u32),
        row_values: out(u32),
        deferred_len: out(u32),
        tile_ptr: ptr(u32),
        nnz_base: ptr(u32),
        byte_base: ptr(u32),
        value_base: ptr(u32),
        deferred_ptr: ptr(u32),
        tile_col: out(u32),
        tile_nnz: out(u32),
        tile_format: out(u8),
        byte_ptr: out(u32),
        value_ptr: out(u32),
        payload: out(u32),
        values: out(T),
        deferred_col: out(u32),
        slots: out(u32),
        row_start: out(u8),
    }
}

impl TileRule {
    /// The rule of `selection` for a matrix of `nnz` entries; errors as the host conversion does.
    fn new(selection: &TileSelection, nnz: usize) -> Result<Self> {
        selection.check()?;
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Ok(TileRule {
            dense_min_fill: selection.dense_min_fill,
            ell_max_cv: selection.ell_max_cv,
            coo_max_nnz: clamp(selection.coo_max_nnz),
            forced: selection.forced.map_or(ADAPTIVE, |f| f as u32),
            deferred_max: selection.deferred_max_nnz(nnz).map_or(0, clamp),
        })
    }
}

/// The builder's kernels for storage type `T`.
pub(crate) struct BuildEntries<T: Scalar> {
    count: Entry<TileBuild<T>>,
    fill: Entry<TileBuild<T>>,
    scan: ScanEntries,
}

impl<T: Scalar> BuildEntries<T> {
    pub fn new() -> Result<Self> {
        let t = c_type(T::DTYPE)?;
        Ok(BuildEntries {
            count: Entry::new(&super::SOURCE, "tile_build", &[&t, &false])?,
            fill: Entry::new(&super::SOURCE, "tile_build", &[&t, &true])?,
            scan: ScanEntries::new()?,
        })
    }

    /// Every entry, the scan's (another file's) included.
    pub fn specs(&self) -> Vec<&KernelSpec> {
        let mut specs = vec![self.count.spec(), self.fill.spec()];
        specs.extend(self.scan.specs());
        specs
    }

    /// The entries of this file only.
    pub fn own_specs(&self) -> [&KernelSpec; 2] {
        [self.count.spec(), self.fill.spec()]
    }

    pub fn load(&self, device: &Arc<Device>) -> Result<Builder<T>> {
        Ok(Builder {
            count: device.kernel(&self.count)?,
            fill: device.kernel(&self.fill)?,
            scan: self.scan.load(device)?,
        })
    }
}

/// The builder's kernels, loaded.
pub(crate) struct Builder<T: Scalar> {
    count: Kernel<TileBuild<T>>,
    fill: Kernel<TileBuild<T>>,
    scan: Scan,
}

/// Deferred entries on the device: their row pointers and columns (their values follow the
/// tiles' in [`DeviceTiled16::values`]).
pub(crate) struct DeviceDeferredCsr {
    pub row_ptr: CudaSlice<u32>,
    pub col_idx: CudaSlice<u32>,
    pub nnz: usize,
}

/// A Tiled16 matrix on the device: level 1, the payload bytes, and one value buffer holding the
/// tiles' values followed by the deferred entries' (the slots of [`Tiled16::value_order`]), with
/// each CSR entry's slot there.
pub(crate) struct DeviceTiled16<T: Scalar> {
    pub rows: u32,
    pub cols: u32,
    pub tile_rows: u32,
    pub tile_ptr: CudaSlice<u32>,
    pub tile_col: CudaSlice<u32>,
    pub tile_nnz: CudaSlice<u32>,
    pub tile_format: CudaSlice<u8>,
    pub byte_ptr: CudaSlice<u32>,
    pub value_ptr: CudaSlice<u32>,
    /// `payload_len` bytes, rounded up to whole words.
    pub payload: CudaSlice<u8>,
    pub payload_len: usize,
    pub values: CudaBuffer<T>,
    /// Values of the tiles, padding included; the deferred entries' follow.
    pub tile_values: usize,
    pub deferred: Option<DeviceDeferredCsr>,
    pub slots: CudaSlice<u32>,
    /// Per tile, 16 bytes: byte r > 0 the first of row r's entries among the tile's CSR or COO
    /// entries (a HYB tile's COO part), the count for rows past the tile's height; byte 0 a HYB
    /// tile's COO count. The tile kernels read a row's span here, at the level of the tile's
    /// metadata, instead of from its payload.
    pub row_start: CudaSlice<u8>,
    pub nnz: usize,
    /// The tile pointers, also on the host.
    pub host_tile_ptr: Vec<u32>,
}

/// Element `at` of `src`.
fn element(device: &Device, src: &CudaSlice<u32>, at: usize) -> Result<u32> {
    let mut host = [0u32];
    device
        .stream
        .memcpy_dtoh(&src.slice(at..at + 1), &mut host)
        .map_err(|e| device.error("copying a total from the device", e))?;
    device.synchronize()?;
    Ok(host[0])
}

/// The sum of per-tile-row counts, which must fit the kernels' u32 offsets.
fn total(what: &str, counts: &[u32]) -> Result<usize> {
    let sum = counts.iter().map(|&c| c as usize).sum();
    to_u32(what, sum)?;
    Ok(sum)
}

impl<T: Scalar> DeviceTiled16<T> {
    /// Converts `a` (canonical CSR) on the device by `selection`, refusing with
    /// [`Error::FillLimit`] past `limit` as the host conversion does; the upload is timed as a
    /// transfer, the rest as device work.
    pub fn build<I: SpIndex>(
        device: &Arc<Device>,
        kernels: &Builder<T>,
        a: CsrRef<'_, T, I>,
        selection: &TileSelection,
        limit: FillLimit,
        clock: &mut PlanClock,
    ) -> Result<Self> {
        let rule = TileRule::new(selection, a.nnz())?;
        // A tile row's counts are u32: at most 256 values (and fewer bytes) per tile column.
        let tile_cols = a.cols().div_ceil(TILE as usize);
        to_u32("values of one tile row", tile_cols.saturating_mul(256))?;
        let csr = DeviceCsr::upload(device, a)?;
        clock.lap(device, Phase::Transfer)?;
        let (rows, cols, nnz) = (csr.rows, csr.cols, csr.nnz);
        let tile_rows = rows.div_ceil(TILE);
        let n = tile_rows as usize;
        let zeros = |len: usize| device.alloc_zeros::<u32>(len, ARRAYS);
        let (row_tiles, row_nnz, row_bytes, row_values) =
            (zeros(n)?, zeros(n)?, zeros(n)?, zeros(n)?);
        let deferred_len = zeros(rows as usize)?;
        let mut params = TileBuild {
            rule,
            rows,
            cols,
            tile_rows,
            row_ptr: Ptr::of(&csr.row_ptr, device),
            col_idx: Ptr::of(&csr.col_idx, device),
            csr_values: Ptr::of_buffer(&csr.values),
            row_tiles: MutPtr::of(&row_tiles, device),
            row_nnz: MutPtr::of(&row_nnz, device),
            row_bytes: MutPtr::of(&row_bytes, device),
            row_values: MutPtr::of(&row_values, device),
            deferred_len: MutPtr::of(&deferred_len, device),
            tile_ptr: Ptr::NULL,
            nnz_base: Ptr::NULL,
            byte_base: Ptr::NULL,
            value_base: Ptr::NULL,
            deferred_ptr: Ptr::NULL,
            tile_col: MutPtr::NULL,
            tile_nnz: MutPtr::NULL,
            tile_format: MutPtr::NULL,
            byte_ptr: MutPtr::NULL,
            value_ptr: MutPtr::NULL,
            payload: MutPtr::NULL,
            values: MutPtr::NULL,
            deferred_col: MutPtr::NULL,
            slots: MutPtr::NULL,
            row_start: MutPtr::NULL,
        };
        if tile_rows > 0 {
            // SAFETY: one warp per tile row reads its rows of the canonical CSR (row_ptr holds
            // rows + 1 offsets) and writes its own counts (tile_rows of each) and its rows'
            // deferred lengths (rows of them); the fill outputs are null and unused.
            unsafe {
                kernels
                    .count
                    .launch(spmv_grid(u64::from(tile_rows) * 32)?, &params)
            }?;
        }
        let scan = |counts: &CudaSlice<u32>, len: u32| {
            kernels.scan.run(device, Ptr::of(counts, device), len)
        };
        let tile_ptr = scan(&row_tiles, tile_rows)?;
        let nnz_base = scan(&row_nnz, tile_rows)?;
        let byte_base = scan(&row_bytes, tile_rows)?;
        let value_base = scan(&row_values, tile_rows)?;
        let deferred_ptr = scan(&deferred_len, rows)?;
        let payload_len = total("tile payload bytes", &download(device, &row_bytes, n)?)?;
        let tile_values = total("tile values", &download(device, &row_values, n)?)?;
        let host_tile_ptr = download(device, &tile_ptr, n + 1)?;
        let tiles = host_tile_ptr[n] as usize;
        let deferred_nnz = element(device, &deferred_ptr, rows as usize)? as usize;
        limit.check(Format::Tiled16, tile_values + deferred_nnz, a.nnz())?;
        to_u32("tile value slots", tile_values + deferred_nnz)?;

        let tile_col = zeros(tiles)?;
        let tile_nnz = zeros(tiles + 1)?;
        let tile_format = device.alloc_zeros::<u8>(tiles, ARRAYS)?;
        let byte_ptr = zeros(tiles + 1)?;
        let value_ptr = zeros(tiles + 1)?;
        let payload = device.alloc_zeros::<u8>(payload_len.div_ceil(4) * 4, ARRAYS)?;
        let values = device.zeros::<T>(tile_values + deferred_nnz)?;
        let deferred_col = zeros(deferred_nnz)?;
        let slots = zeros(nnz as usize)?;
        let row_start = device.alloc_zeros::<u8>(tiles * TILE as usize, ARRAYS)?;
        params.tile_ptr = Ptr::of(&tile_ptr, device);
        params.nnz_base = Ptr::of(&nnz_base, device);
        params.byte_base = Ptr::of(&byte_base, device);
        params.value_base = Ptr::of(&value_base, device);
        params.deferred_ptr = Ptr::of(&deferred_ptr, device);
        params.tile_col = MutPtr::of(&tile_col, device);
        params.tile_nnz = MutPtr::of(&tile_nnz, device);
        params.tile_format = MutPtr::of(&tile_format, device);
        params.byte_ptr = MutPtr::of(&byte_ptr, device);
        params.value_ptr = MutPtr::of(&value_ptr, device);
        params.payload = MutPtr::of_bytes(&payload, device);
        params.values = MutPtr::of_buffer(&values);
        params.deferred_col = MutPtr::of(&deferred_col, device);
        params.slots = MutPtr::of(&slots, device);
        params.row_start = MutPtr::of(&row_start, device);
        if tile_rows > 0 {
            // SAFETY: the walk repeats the counting pass's, so each tile row writes its own
            // stretches, placed by the scans, of arrays sized by their totals: tiles (+ 1) of
            // level 1, payload_len bytes (whole words), tile_values + deferred values, the
            // deferred columns, one slot per CSR entry, and 16 row starts per tile.
            unsafe {
                kernels
                    .fill
                    .launch(spmv_grid(u64::from(tile_rows) * 32)?, &params)
            }?;
        }
        clock.lap(device, Phase::Device)?;
        Ok(DeviceTiled16 {
            rows,
            cols,
            tile_rows,
            tile_ptr,
            tile_col,
            tile_nnz,
            tile_format,
            byte_ptr,
            value_ptr,
            payload,
            payload_len,
            values,
            tile_values,
            deferred: (deferred_nnz > 0).then_some(DeviceDeferredCsr {
                row_ptr: deferred_ptr,
                col_idx: deferred_col,
                nnz: deferred_nnz,
            }),
            slots,
            row_start,
            nnz: nnz as usize,
            host_tile_ptr,
        })
    }

    pub fn tiles(&self) -> usize {
        self.host_tile_ptr.last().copied().unwrap_or(0) as usize
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        let tiles = self.tiles();
        let deferred = self
            .deferred
            .as_ref()
            .map_or(0, |d| (self.rows as usize + 1 + d.nnz) * 4);
        // tile_ptr; tile_col, then tile_nnz, byte_ptr and value_ptr of tiles + 1; the slots.
        let offsets = self.tile_rows as usize + 1 + tiles + 3 * (tiles + 1) + self.nnz;
        offsets * 4
            + tiles
            + self.row_start.len()
            + self.payload.len()
            + (self.tile_values + self.deferred.as_ref().map_or(0, |d| d.nnz)) * size_of::<T>()
            + deferred
    }

    /// The arrays as a host [`Tiled16`], validated.
    pub fn to_host(&self, device: &Device) -> Result<Tiled16<T>> {
        let tiles = self.tiles();
        let formats = download(device, &self.tile_format, tiles)?
            .into_iter()
            .map(|f| {
                TileFormat::ALL.get(usize::from(f)).copied().ok_or_else(|| {
                    Error::internal(format!("device-built Tiled16: tile format {f}"))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut values = self.values.to_host()?;
        let deferred_values = values.split_off(self.tile_values);
        let (rows, cols) = (self.rows as usize, self.cols as usize);
        let deferred = match &self.deferred {
            Some(d) => Some(
                Csr::try_new(
                    rows,
                    cols,
                    download(device, &d.row_ptr, rows + 1)?,
                    download(device, &d.col_idx, d.nnz)?,
                    deferred_values,
                )
                .map_err(|rejected| rejected.error)?,
            ),
            None => None,
        };
        let parts = Tiled16Parts {
            tile_ptr: self.host_tile_ptr.clone(),
            tile_col: download(device, &self.tile_col, tiles)?,
            tile_nnz: download(device, &self.tile_nnz, tiles + 1)?,
            tile_format: formats,
            byte_ptr: download(device, &self.byte_ptr, tiles + 1)?,
            value_ptr: download(device, &self.value_ptr, tiles + 1)?,
            payload_bytes: download(device, &self.payload, self.payload_len)?,
            values,
            deferred,
        };
        Tiled16::try_new(rows, cols, parts).map_err(|rejected| rejected.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_number_tile_formats_as_rust_does() {
        let names: Vec<String> = TileFormat::ALL
            .iter()
            .enumerate()
            .map(|(i, f)| {
                assert_eq!(*f as usize, i);
                format!("{} = {i}", f.name().to_uppercase().replace('-', "_"))
            })
            .collect();
        let declared = format!("enum TileFormat {{ {} }};", names.join(", "));
        assert!(super::super::SOURCE.code.contains(&declared), "{declared}");
    }

    #[test]
    fn the_rule_carries_the_selection() {
        let forced = TileRule::new(&TileSelection::forced(TileFormat::DenseCol), 5).unwrap();
        assert_eq!((forced.forced, forced.deferred_max), (6, 0));
        let paper = TileRule::new(&TileSelection::default(), 2_000_000).unwrap();
        assert_eq!(
            (paper.forced, paper.deferred_max, paper.coo_max_nnz),
            (ADAPTIVE, 12, 12)
        );
        assert_eq!(
            TileRule::new(&TileSelection::default(), 10)
                .unwrap()
                .deferred_max,
            0
        );
        let bad = TileSelection {
            ell_max_cv: -1.0,
            ..TileSelection::default()
        };
        assert!(TileRule::new(&bad, 10).is_err());
    }
}
