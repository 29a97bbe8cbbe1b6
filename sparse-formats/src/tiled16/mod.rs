//! Tiled16, the two-level format of TileSpMV (Niu et al., IPDPS'21): the matrix is cut into
//! 16 x 16 tiles and every non-empty tile is stored in whichever of seven small formats suits
//! its pattern ([`TileFormat`], chosen by [`TileSelection`]).
//!
//! Level 1 is a CSR of tiles. Level 2 is, per tile, one stretch of `payload_bytes` (in-tile
//! indices as 4-bit nibbles, masks, widths) and one stretch of `values`, so a kernel (a CUDA warp
//! per tile) reads each tile's data contiguously:
//!
//! ```text
//!            tile col 0   tile col 1   tile col 2
//!          +------------+------------+------------+
//!  tile    |  t0: Hyb   |            |  t1: Coo   |    tile_ptr    = [0, 2, 3]
//!  row 0   |            |            |            |    tile_col    = [0, 2, 1]
//!          +------------+------------+------------+    tile_nnz    = [0, 19, 22, 214]   (prefix)
//!  tile    |            |  t2: Dense |            |    tile_format = [Hyb, Coo, Dense]
//!  row 1   |            |            |            |    byte_ptr    = [0, 14, 17, 49]    (prefix)
//!          +------------+------------+------------+    value_ptr   = [0, 19, 22, 278]   (prefix)
//!
//!  payload_bytes: | t0: 14 bytes | t1: 3 | t2: 32 |      values: | t0: 19 | t1: 3 | t2: 256 |
//! ```
//!
//! A tile of `h x w` cells (16 x 16, fewer at the bottom and right edges) holding `n` entries
//! stores, with nibble `k` in the low half of byte `k/2` when `k` is even, in the high half when
//! odd, and u16 masks little-endian:
//!
//! ```text
//!  format    payload bytes                                           values
//!  Csr       h row starts (u8) | ceil(n/2) column nibbles             n, row-major
//!  Coo       n x (row << 4 | col), row-major                          n
//!  Ell       width k | k slot masks (u16) | ceil(k*h/2) col nibbles   k*h, slot (j, r) at j*h + r
//!  Hyb       the Ell part of width k | m x (row << 4 | col)           k*h + m
//!  Dense     ceil(h*w/8) occupancy bytes, bit c*h + r                 h*w, column-major
//!  DenseRow  u16 mask of full rows                                    w per full row
//!  DenseCol  u16 mask of full columns                                 h per full column
//! ```
//!
//! Padding is marked and never read: an ELL slot `(j, r)` is real only when bit `r` of slot
//! mask `j` is set (each row's real slots form a prefix), and a Dense cell only when its
//! occupancy bit is, so explicit zeros of the source survive and fill zeros are no entries. The
//! COO part of a HYB tile holds the entries of rows longer than the ELL width. Edge tiles store
//! only their `h x w` cells, so no tile reaches outside the matrix.
//!
//! With deferred COO ([`DeferredCoo`]), very sparse tiles are not stored as tiles at all: their
//! entries form a separate CSR matrix ([`Tiled16::deferred`]) that SpMV adds row by row.

mod check;
mod convert;
mod payload;
mod select;

use std::fmt;

use sparse_core::{
    check_dimensions, CsrRef, Error, Format, Result, Scalar, SpIndex, StructureError, ValueOrder,
};

use crate::checks::check_length;
use crate::csr::Csr;
use crate::format::{FillLimit, SparseFormat};
use crate::rejected::{validated, Rejected};
use crate::slots::{check_new_values, gather};
use payload::TILE;

pub use payload::{PackedNibbles, TileCoo, TileEll, TileFormat, TilePayload, TILE as TILED16_TILE};
pub use select::{DeferredCoo, TileSelection};

/// A matrix in the Tiled16 format; see the [module docs](self) for the layout.
#[derive(Clone, PartialEq)]
pub struct Tiled16<T> {
    rows: usize,
    cols: usize,
    tile_ptr: Vec<u32>,
    tile_col: Vec<u32>,
    tile_nnz: Vec<u32>,
    tile_format: Vec<TileFormat>,
    byte_ptr: Vec<u32>,
    value_ptr: Vec<u32>,
    payload_bytes: Vec<u8>,
    values: Vec<T>,
    deferred: Option<Csr<T, u32>>,
}

/// The arrays of a [`Tiled16`], as [`Tiled16::try_new`] takes them and hands them back.
#[derive(Clone, Debug, PartialEq)]
pub struct Tiled16Parts<T> {
    /// Per tile row, the first of its tiles (tile_rows + 1).
    pub tile_ptr: Vec<u32>,
    /// Per tile, its tile column, increasing within a tile row.
    pub tile_col: Vec<u32>,
    /// Per tile, the entries of the tiles before it (tiles + 1).
    pub tile_nnz: Vec<u32>,
    pub tile_format: Vec<TileFormat>,
    /// Per tile, where its payload starts in `payload_bytes` (tiles + 1).
    pub byte_ptr: Vec<u32>,
    /// Per tile, where its values start in `values` (tiles + 1).
    pub value_ptr: Vec<u32>,
    pub payload_bytes: Vec<u8>,
    pub values: Vec<T>,
    /// The entries of deferred tiles; none of them lies in a stored tile.
    pub deferred: Option<Csr<T, u32>>,
}

/// One stored tile, borrowed from a [`Tiled16`].
#[derive(Clone, Copy, Debug)]
pub struct TileRef<'a, T> {
    pub tile_row: usize,
    pub tile_col: usize,
    /// Rows of the tile: 16, or fewer in the last tile row.
    pub height: usize,
    /// Columns of the tile: 16, or fewer in the last tile column.
    pub width: usize,
    pub nnz: usize,
    pub payload: TilePayload<'a, T>,
}

impl<T: Copy> TileRef<'_, T> {
    /// The matrix row of the tile's row 0.
    pub fn first_row(&self) -> usize {
        self.tile_row * TILE
    }

    /// The matrix column of the tile's column 0.
    pub fn first_col(&self) -> usize {
        self.tile_col * TILE
    }

    pub fn format(&self) -> TileFormat {
        self.payload.format()
    }

    /// Calls `f(row, col, value)` with in-tile indices for every real entry; each row's entries
    /// come in increasing column order, rows possibly interleaved (ELL slots go column by column).
    #[inline(always)]
    pub fn for_each_entry(&self, mut f: impl FnMut(usize, usize, T)) {
        self.payload
            .for_each_entry(self.height, self.width, self.nnz, |r, c, _, v| f(r, c, v));
    }
}

/// The stored tiles of a [`Tiled16`] (or of one tile row) in order.
pub struct Tiles<'a, T> {
    matrix: &'a Tiled16<T>,
    tile_row: usize,
    next: usize,
    end: usize,
}

impl<'a, T: Scalar> Iterator for Tiles<'a, T> {
    type Item = TileRef<'a, T>;

    fn next(&mut self) -> Option<TileRef<'a, T>> {
        if self.next >= self.end {
            return None;
        }
        while self.matrix.tile_ptr[self.tile_row + 1] as usize <= self.next {
            self.tile_row += 1;
        }
        let tile = self.matrix.tile_at(self.tile_row, self.next);
        self.next += 1;
        Some(tile)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end - self.next;
        (left, Some(left))
    }
}

impl<T: Scalar> ExactSizeIterator for Tiles<'_, T> {}

impl<T: Scalar> Tiled16<T> {
    /// Converts `a`, choosing each tile's format by `selection`; refuses with
    /// [`Error::FillLimit`] before allocating when the stored slots (padding of ELL, HYB and
    /// Dense tiles included) exceed `limit`. Parallel over tile rows; the result does not
    /// depend on the number of threads.
    pub fn from_csr<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        selection: &TileSelection,
        limit: FillLimit,
    ) -> Result<Self> {
        convert::from_csr(a, selection, limit)
    }

    /// Checks every invariant (see [`Tiled16::validate`]); on failure the arrays come back with
    /// the error.
    // The inputs come back by value with the error; the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        parts: Tiled16Parts<T>,
    ) -> Result<Self, Rejected<Tiled16Parts<T>>> {
        // SAFETY: validated right away; nothing reads the arrays before.
        let m = unsafe { Tiled16::new_unchecked(rows, cols, parts) };
        validated(m, Self::validate, Self::into_parts)
    }

    /// # Safety
    /// The arrays must satisfy the invariants [`Tiled16::validate`] checks: kernels index dense
    /// operands with the tile and in-tile indices without bounds checks.
    pub unsafe fn new_unchecked(rows: usize, cols: usize, parts: Tiled16Parts<T>) -> Self {
        Tiled16 {
            rows,
            cols,
            tile_ptr: parts.tile_ptr,
            tile_col: parts.tile_col,
            tile_nnz: parts.tile_nnz,
            tile_format: parts.tile_format,
            byte_ptr: parts.byte_ptr,
            value_ptr: parts.value_ptr,
            payload_bytes: parts.payload_bytes,
            values: parts.values,
            deferred: parts.deferred,
        }
    }

    pub fn into_parts(self) -> Tiled16Parts<T> {
        Tiled16Parts {
            tile_ptr: self.tile_ptr,
            tile_col: self.tile_col,
            tile_nnz: self.tile_nnz,
            tile_format: self.tile_format,
            byte_ptr: self.byte_ptr,
            value_ptr: self.value_ptr,
            payload_bytes: self.payload_bytes,
            values: self.values,
            deferred: self.deferred,
        }
    }

    /// Checks the tile CSR (pointers, tile columns in range and increasing, no empty tile), every
    /// tile's payload (lengths, in-tile indices inside the tile, entry order, masks, entry count
    /// against `tile_nnz`) and that no deferred entry lies in a stored tile. The error names the
    /// first offending tile or position.
    pub fn validate(&self) -> Result<()> {
        check_dimensions::<u32>(self.rows, self.cols)?;
        self.check_structure()
            .map_err(|error| Error::InvalidStructure {
                format: Format::Tiled16,
                error,
            })
    }

    fn check_structure(&self) -> Result<(), StructureError> {
        let tiles = self.tile_col.len();
        check_offsets(
            "tile_ptr",
            &self.tile_ptr,
            self.tile_rows() + 1,
            Some(tiles),
        )?;
        check_length("tile_format", tiles, self.tile_format.len())?;
        check_offsets("tile_nnz", &self.tile_nnz, tiles + 1, None)?;
        check_offsets(
            "byte_ptr",
            &self.byte_ptr,
            tiles + 1,
            Some(self.payload_bytes.len()),
        )?;
        check_offsets(
            "value_ptr",
            &self.value_ptr,
            tiles + 1,
            Some(self.values.len()),
        )?;
        for tr in 0..self.tile_rows() {
            let (first, end) = (self.tile_ptr[tr] as usize, self.tile_ptr[tr + 1] as usize);
            for t in first..end {
                let tc = self.tile_col[t] as usize;
                if tc >= self.tile_cols() {
                    return Err(StructureError::Other(format!(
                        "tile {t} (tile row {tr}): tile column {tc} is outside 0..{}",
                        self.tile_cols()
                    )));
                }
                if t > first && tc <= self.tile_col[t - 1] as usize {
                    return Err(StructureError::Other(format!(
                        "tile {t} (tile row {tr}): tile column {tc} follows tile column {} \
                         (tile columns must increase within a tile row)",
                        self.tile_col[t - 1]
                    )));
                }
                self.check_tile(tr, t)?;
            }
        }
        let deferred_nnz = self.deferred.as_ref().map_or(0, Csr::nnz);
        let total = self.stored_nnz() + deferred_nnz;
        if u32::try_from(total).is_err() {
            return Err(StructureError::Other(format!(
                "{total} entries in all do not fit u32 indices"
            )));
        }
        self.check_deferred()
    }

    fn check_tile(&self, tr: usize, t: usize) -> Result<(), StructureError> {
        let (h, w) = (
            self.tile_height(tr),
            self.tile_width(self.tile_col[t] as usize),
        );
        let format = self.tile_format[t];
        let nnz = (self.tile_nnz[t + 1] - self.tile_nnz[t]) as usize;
        let bytes = &self.payload_bytes[self.byte_ptr[t] as usize..self.byte_ptr[t + 1] as usize];
        let values = (self.value_ptr[t + 1] - self.value_ptr[t]) as usize;
        let within = if nnz == 0 || nnz > h * w {
            Err(format!("holds {nnz} entries, expected 1..={}", h * w))
        } else {
            check::check(format, h, w, nnz, bytes, values)
        };
        within.map_err(|message| {
            StructureError::Other(format!(
                "tile {t} (tile row {tr}, tile column {}, {h}x{w} {format}): {message}",
                self.tile_col[t]
            ))
        })
    }

    fn check_deferred(&self) -> Result<(), StructureError> {
        let Some(d) = &self.deferred else {
            return Ok(());
        };
        if d.shape() != (self.rows, self.cols) {
            return Err(StructureError::Other(format!(
                "the deferred CSR is {}x{}, expected {}x{}",
                d.rows(),
                d.cols(),
                self.rows,
                self.cols
            )));
        }
        let d = d.as_ref();
        for row in 0..self.rows {
            let tr = row / TILE;
            let stored = &self.tile_col[self.tile_ptr[tr] as usize..self.tile_ptr[tr + 1] as usize];
            for &c in d.row(row).0 {
                let tc = c / TILE as u32;
                if stored.binary_search(&tc).is_ok() {
                    return Err(StructureError::Other(format!(
                        "deferred entry ({row}, {c}) lies in stored tile ({tr}, {tc})"
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    pub fn tile_rows(&self) -> usize {
        self.rows.div_ceil(TILE)
    }
    pub fn tile_cols(&self) -> usize {
        self.cols.div_ceil(TILE)
    }
    /// Stored tiles (deferred ones not counted).
    pub fn num_tiles(&self) -> usize {
        self.tile_col.len()
    }
    pub fn tile_ptr(&self) -> &[u32] {
        &self.tile_ptr
    }
    pub fn tile_col(&self) -> &[u32] {
        &self.tile_col
    }
    pub fn tile_nnz(&self) -> &[u32] {
        &self.tile_nnz
    }
    pub fn tile_format(&self) -> &[TileFormat] {
        &self.tile_format
    }
    pub fn byte_ptr(&self) -> &[u32] {
        &self.byte_ptr
    }
    pub fn value_ptr(&self) -> &[u32] {
        &self.value_ptr
    }
    pub fn payload_bytes(&self) -> &[u8] {
        &self.payload_bytes
    }
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// The entries of deferred tiles, when any tile was deferred.
    pub fn deferred(&self) -> Option<&Csr<T, u32>> {
        self.deferred.as_ref()
    }

    /// Entries held in stored tiles.
    pub fn stored_nnz(&self) -> usize {
        self.tile_nnz.last().map_or(0, |&n| n as usize)
    }

    /// For each slot, the CSR entry it holds (in the order of [`SparseFormat::to_csr`]). The
    /// slots are the tiles' values, padding included, then the deferred entries.
    pub fn value_order(&self) -> ValueOrder {
        convert::value_order(self)
    }

    /// New values for the same pattern: `csr_values` in CSR entry order, placed through `order`,
    /// which must be this matrix's [`Tiled16::value_order`]. Padding stays zero.
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        check_new_values(
            Format::Tiled16,
            (self.stored_slots(), self.nnz()),
            order,
            csr_values,
        )?;
        let tile_slots = self.values.len();
        gather(order, 0, csr_values, &mut self.values);
        if let Some(d) = &mut self.deferred {
            gather(order, tile_slots, csr_values, d.values_mut());
        }
        Ok(())
    }

    /// Every stored tile, tile row by tile row.
    pub fn tiles(&self) -> Tiles<'_, T> {
        Tiles {
            matrix: self,
            tile_row: 0,
            next: 0,
            end: self.num_tiles(),
        }
    }

    /// The stored tiles of tile row `tr` (none when `tr` is out of range).
    pub fn tile_row(&self, tr: usize) -> Tiles<'_, T> {
        let (next, end) = match (self.tile_ptr.get(tr), self.tile_ptr.get(tr + 1)) {
            (Some(&first), Some(&end)) => (first as usize, end as usize),
            _ => (0, 0),
        };
        Tiles {
            matrix: self,
            tile_row: tr,
            next,
            end,
        }
    }

    fn tile_height(&self, tr: usize) -> usize {
        TILE.min(self.rows - tr * TILE)
    }

    fn tile_width(&self, tc: usize) -> usize {
        TILE.min(self.cols - tc * TILE)
    }

    fn tile_at(&self, tr: usize, t: usize) -> TileRef<'_, T> {
        let tc = self.tile_col[t] as usize;
        let height = self.tile_height(tr);
        let bytes = &self.payload_bytes[self.byte_ptr[t] as usize..self.byte_ptr[t + 1] as usize];
        let values = &self.values[self.value_ptr[t] as usize..self.value_ptr[t + 1] as usize];
        TileRef {
            tile_row: tr,
            tile_col: tc,
            height,
            width: self.tile_width(tc),
            nnz: (self.tile_nnz[t + 1] - self.tile_nnz[t]) as usize,
            payload: TilePayload::new(self.tile_format[t], height, bytes, values),
        }
    }
}

/// An offsets array: `len` entries from 0, never decreasing, ending at `total` when given.
fn check_offsets(
    array: &'static str,
    offsets: &[u32],
    len: usize,
    total: Option<usize>,
) -> Result<(), StructureError> {
    check_length(array, len, offsets.len())?;
    if offsets[0] != 0 {
        return Err(StructureError::Other(format!(
            "{array}[0] is {}, expected 0",
            offsets[0]
        )));
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(StructureError::Other(format!(
            "{array} decreases at {}: {} after {}",
            i + 1,
            offsets[i + 1],
            offsets[i]
        )));
    }
    match total {
        Some(total) if offsets[len - 1] as usize != total => Err(StructureError::Other(format!(
            "{array}[{}] is {}, expected {total}",
            len - 1,
            offsets[len - 1]
        ))),
        _ => Ok(()),
    }
}

impl<T: Scalar> SparseFormat<T> for Tiled16<T> {
    const FORMAT: Format = Format::Tiled16;

    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
    fn nnz(&self) -> usize {
        self.stored_nnz() + self.deferred.as_ref().map_or(0, Csr::nnz)
    }
    fn stored_slots(&self) -> usize {
        self.values.len() + self.deferred.as_ref().map_or(0, Csr::nnz)
    }
    fn memory_bytes(&self) -> usize {
        let offsets = self.tile_ptr.len()
            + self.tile_col.len()
            + self.tile_nnz.len()
            + self.byte_ptr.len()
            + self.value_ptr.len();
        offsets * std::mem::size_of::<u32>()
            + self.tile_format.len() * std::mem::size_of::<TileFormat>()
            + self.payload_bytes.len()
            + self.values.len() * std::mem::size_of::<T>()
            + self.deferred.as_ref().map_or(0, Csr::memory_bytes)
    }
    fn validate(&self) -> Result<()> {
        Tiled16::validate(self)
    }
    fn to_csr(&self) -> Csr<T, u32> {
        convert::to_csr(self)
    }
}

impl<T> Tiled16<T> {
    /// Stored tiles per format, all seven formats listed in [`TileFormat::ALL`] order.
    pub fn tile_format_histogram(&self) -> Vec<(TileFormat, usize)> {
        TileFormat::ALL
            .iter()
            .map(|&f| (f, self.tile_format.iter().filter(|&&g| g == f).count()))
            .collect()
    }
}

// No bound on T, so that containers deriving Debug over any T can hold a Tiled16.
impl<T> fmt::Debug for Tiled16<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let formats = self
            .tile_format_histogram()
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(format, n)| format!("{format}={n}"))
            .collect::<Vec<_>>()
            .join(" ");
        f.debug_struct("Tiled16")
            .field("shape", &format_args!("{}x{}", self.rows, self.cols))
            .field("tiles", &self.tile_col.len())
            .field("nnz_in_tiles", &self.tile_nnz.last().copied().unwrap_or(0))
            .field("formats", &format_args!("[{formats}]"))
            .field("deferred", &self.deferred.is_some())
            .field("payload_bytes", &self.payload_bytes.len())
            .field("values", &self.values.len())
            .finish()
    }
}
