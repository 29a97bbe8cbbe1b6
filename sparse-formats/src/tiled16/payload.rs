//! The level-2 storage of one tile in each of the seven tile formats: how many bytes and values
//! a tile takes, how its entries are encoded, and the views kernels read. The layouts are drawn
//! in the module docs of [`crate::Tiled16`].

use std::fmt;

/// Tile edge of [`crate::Tiled16`]: tiles are 16 x 16 cells (fewer at the bottom and right
/// edges), so an in-tile row or column index fits in 4 bits.
pub const TILE: usize = 16;

/// How one tile stores its entries (level 2 of [`crate::Tiled16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum TileFormat {
    Csr,
    Coo,
    Ell,
    Hyb,
    Dense,
    DenseRow,
    DenseCol,
}

impl TileFormat {
    pub const ALL: [TileFormat; 7] = [
        TileFormat::Csr,
        TileFormat::Coo,
        TileFormat::Ell,
        TileFormat::Hyb,
        TileFormat::Dense,
        TileFormat::DenseRow,
        TileFormat::DenseCol,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TileFormat::Csr => "csr",
            TileFormat::Coo => "coo",
            TileFormat::Ell => "ell",
            TileFormat::Hyb => "hyb",
            TileFormat::Dense => "dense",
            TileFormat::DenseRow => "dense-row",
            TileFormat::DenseCol => "dense-col",
        }
    }
}

impl fmt::Display for TileFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One tile's entries as the conversion collects them, with the row and column counts the
/// selection rule reads.
#[derive(Default)]
pub(super) struct TileEntries {
    pub(super) height: usize,
    pub(super) width: usize,
    /// `(row << 4) | col` of every entry, in row-major order.
    pub(super) positions: Vec<u8>,
    /// The source CSR entry of each position.
    pub(super) sources: Vec<usize>,
    pub(super) row_len: [usize; TILE],
    pub(super) col_len: [usize; TILE],
}

impl TileEntries {
    pub(super) fn clear(&mut self, height: usize, width: usize) {
        self.height = height;
        self.width = width;
        self.positions.clear();
        self.sources.clear();
        self.row_len = [0; TILE];
        self.col_len = [0; TILE];
    }

    pub(super) fn push(&mut self, row: usize, col: usize, source: usize) {
        self.positions.push(pack_position(row, col));
        self.sources.push(source);
        self.row_len[row] += 1;
        self.col_len[col] += 1;
    }

    pub(super) fn nnz(&self) -> usize {
        self.positions.len()
    }

    /// `(row, col, source entry)` in row-major order.
    pub(super) fn entries(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        self.positions.iter().zip(&self.sources).map(|(&p, &s)| {
            let (r, c) = unpack_position(p);
            (r, c, s)
        })
    }

    pub(super) fn row_lengths(&self) -> &[usize] {
        &self.row_len[..self.height]
    }

    /// Every row holds no entry or all `width` of them.
    pub(super) fn rows_empty_or_full(&self) -> bool {
        self.row_lengths()
            .iter()
            .all(|&n| n == 0 || n == self.width)
    }

    /// Every column holds no entry or all `height` of them.
    pub(super) fn cols_empty_or_full(&self) -> bool {
        self.col_len[..self.width]
            .iter()
            .all(|&n| n == 0 || n == self.height)
    }

    fn max_row_len(&self) -> usize {
        self.row_lengths().iter().copied().max().unwrap_or(0)
    }
}

fn pack_position(row: usize, col: usize) -> u8 {
    // Both are below TILE = 16 (in-tile indices).
    ((row << 4) | col) as u8
}

pub(super) fn unpack_position(p: u8) -> (usize, usize) {
    (usize::from(p >> 4), usize::from(p & 0xF))
}

/// Bytes of an ELL part of width `k` over `h` rows: the width, one u16 mask per slot column,
/// the packed column nibbles.
pub(super) fn ell_bytes(k: usize, h: usize) -> usize {
    1 + 2 * k + (k * h).div_ceil(2)
}

/// Entries of rows longer than `k`, which a HYB tile of width `k` keeps in its COO part.
fn overflow(row_len: &[usize], k: usize) -> usize {
    row_len.iter().map(|&n| n.saturating_sub(k)).sum()
}

/// Bytes a HYB tile of width `k` stores, values of `value_bytes` each included.
fn hyb_stored_bytes(row_len: &[usize], k: usize, value_bytes: usize) -> usize {
    let (h, m) = (row_len.len(), overflow(row_len, k));
    ell_bytes(k, h) + m + (k * h + m) * value_bytes
}

/// The ELL width of a HYB tile, by the paper's search: from the longest row downwards, narrow
/// while the stored bytes keep falling (never below 1).
pub(super) fn hyb_width(row_len: &[usize], value_bytes: usize) -> usize {
    let longest = row_len.iter().copied().max().unwrap_or(0);
    let mut best = longest;
    let mut best_bytes = hyb_stored_bytes(row_len, longest, value_bytes);
    for k in (1..longest).rev() {
        let bytes = hyb_stored_bytes(row_len, k, value_bytes);
        if bytes >= best_bytes {
            break;
        }
        (best, best_bytes) = (k, bytes);
    }
    best
}

/// (bytes, values) the tile takes in `format`; `format` must be able to hold it.
pub(super) fn payload_len(
    format: TileFormat,
    tile: &TileEntries,
    value_bytes: usize,
) -> (usize, usize) {
    let (h, w, n) = (tile.height, tile.width, tile.nnz());
    match format {
        TileFormat::Csr => (h + n.div_ceil(2), n),
        TileFormat::Coo => (n, n),
        TileFormat::Ell => {
            let k = tile.max_row_len();
            (ell_bytes(k, h), k * h)
        }
        TileFormat::Hyb => {
            let k = hyb_width(tile.row_lengths(), value_bytes);
            let m = overflow(tile.row_lengths(), k);
            (ell_bytes(k, h) + m, k * h + m)
        }
        TileFormat::Dense => ((h * w).div_ceil(8), h * w),
        TileFormat::DenseRow | TileFormat::DenseCol => (2, n),
    }
}

/// Bytes the tile stores in `format`, values of `value_bytes` each included.
pub(super) fn stored_bytes(format: TileFormat, tile: &TileEntries, value_bytes: usize) -> usize {
    let (bytes, values) = payload_len(format, tile, value_bytes);
    bytes + values * value_bytes
}

fn set_nibble(bytes: &mut [u8], k: usize, value: usize) {
    // value < 16: an in-tile index.
    bytes[k / 2] |= (value as u8) << (4 * (k % 2));
}

fn set_mask_bit(bytes: &mut [u8], bit: usize) {
    bytes[bit / 8] |= 1 << (bit % 8);
}

pub(super) fn mask_bit(bytes: &[u8], bit: usize) -> bool {
    bytes[bit / 8] >> (bit % 8) & 1 == 1
}

fn write_u16(bytes: &mut [u8], value: u16) {
    bytes[..2].copy_from_slice(&value.to_le_bytes());
}

pub(super) fn read_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// Set bits of `mask`, lowest first.
pub(super) fn bit_indices(mask: u16) -> impl Iterator<Item = usize> {
    (0..TILE).filter(move |&i| mask >> i & 1 == 1)
}

/// Rows holding at least `len` (>= 1) entries.
fn row_mask(tile: &TileEntries, len: usize) -> u16 {
    tile.row_lengths()
        .iter()
        .enumerate()
        .filter(|&(_, &n)| n >= len)
        .fold(0, |m, (r, _)| m | 1 << r)
}

/// Writes the tile in `format` into `bytes` and `values`, which have exactly the lengths of
/// [`payload_len`], `bytes` zeroed and `values` default (padding stays zero).
pub(super) fn encode<T: Copy>(
    format: TileFormat,
    tile: &TileEntries,
    source: &[T],
    bytes: &mut [u8],
    values: &mut [T],
) {
    let (h, w) = (tile.height, tile.width);
    let entries = tile.entries().map(|(r, c, s)| ((r, c), source[s]));
    match format {
        TileFormat::Csr => {
            let mut start = 0;
            for (r, &n) in tile.row_lengths().iter().enumerate() {
                // At most 15 rows of 16 entries precede a row start: it fits a byte.
                bytes[r] = start as u8;
                start += n;
            }
            for (k, ((_, c), v)) in entries.enumerate() {
                set_nibble(&mut bytes[h..], k, c);
                values[k] = v;
            }
        }
        TileFormat::Coo => {
            bytes.copy_from_slice(&tile.positions);
            for (k, (_, v)) in entries.enumerate() {
                values[k] = v;
            }
        }
        TileFormat::Ell | TileFormat::Hyb => {
            let k = if format == TileFormat::Ell {
                tile.max_row_len()
            } else {
                hyb_width(tile.row_lengths(), std::mem::size_of::<T>())
            };
            // k <= TILE: a row holds at most 16 entries.
            bytes[0] = k as u8;
            for j in 0..k {
                write_u16(&mut bytes[1 + 2 * j..], row_mask(tile, j + 1));
            }
            let (ell, coo) = bytes.split_at_mut(ell_bytes(k, h));
            let nibbles = &mut ell[1 + 2 * k..];
            let mut slot_in_row = [0usize; TILE];
            let mut coo_count = 0;
            for ((r, c), v) in entries {
                let j = slot_in_row[r];
                slot_in_row[r] += 1;
                if j < k {
                    set_nibble(nibbles, j * h + r, c);
                    values[j * h + r] = v;
                } else {
                    coo[coo_count] = pack_position(r, c);
                    values[k * h + coo_count] = v;
                    coo_count += 1;
                }
            }
        }
        TileFormat::Dense => {
            for ((r, c), v) in entries {
                set_mask_bit(bytes, c * h + r);
                values[c * h + r] = v;
            }
        }
        TileFormat::DenseRow => {
            write_u16(bytes, row_mask(tile, w));
            // Only full rows hold entries, so row-major entry order is the order of full rows.
            for (k, (_, v)) in entries.enumerate() {
                values[k] = v;
            }
        }
        TileFormat::DenseCol => {
            let full = (0..w)
                .filter(|&c| tile.col_len[c] == h)
                .fold(0u16, |m, c| m | 1 << c);
            write_u16(bytes, full);
            for ((r, c), v) in entries {
                let rank = (full & ((1u16 << c) - 1)).count_ones() as usize;
                values[rank * h + r] = v;
            }
        }
    }
}

/// Column indices packed two per byte: index `k` is the low nibble of byte `k / 2` when `k` is
/// even, the high nibble when it is odd.
#[derive(Clone, Copy, Debug)]
pub struct PackedNibbles<'a> {
    bytes: &'a [u8],
}

impl<'a> PackedNibbles<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        PackedNibbles { bytes }
    }

    #[inline(always)]
    pub fn get(&self, k: usize) -> usize {
        usize::from(self.bytes[k / 2] >> (4 * (k % 2)) & 0xF)
    }

    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// The ELL part of an ELL or HYB tile: `width` slot columns over the tile's `h` rows, slot
/// `(j, r)` at `j*h + r`; slot column `j` holds a real entry of row `r` exactly when bit `r` of
/// its mask is set (the other slots are padding, never read).
#[derive(Clone, Copy, Debug)]
pub struct TileEll<'a, T> {
    pub width: usize,
    /// One little-endian u16 per slot column.
    pub slot_masks: &'a [u8],
    pub cols: PackedNibbles<'a>,
    pub values: &'a [T],
}

impl<T: Copy> TileEll<'_, T> {
    pub fn slot_mask(&self, j: usize) -> u16 {
        read_u16(self.slot_masks, 2 * j)
    }

    #[inline(always)]
    fn for_each_entry(&self, h: usize, f: &mut impl FnMut(usize, usize, usize, T)) {
        for j in 0..self.width {
            let mask = self.slot_mask(j);
            for r in bit_indices(mask) {
                let slot = j * h + r;
                f(r, self.cols.get(slot), slot, self.values[slot]);
            }
        }
    }
}

/// Entries as `(row << 4) | col` bytes in row-major order, with their values.
#[derive(Clone, Copy, Debug)]
pub struct TileCoo<'a, T> {
    pub positions: &'a [u8],
    pub values: &'a [T],
}

impl<T: Copy> TileCoo<'_, T> {
    /// `first_slot` is the tile slot of the first entry.
    #[inline(always)]
    fn for_each_entry(&self, first_slot: usize, f: &mut impl FnMut(usize, usize, usize, T)) {
        for (k, (&p, &v)) in self.positions.iter().zip(self.values).enumerate() {
            let (r, c) = unpack_position(p);
            f(r, c, first_slot + k, v);
        }
    }
}

/// The level-2 storage of one tile, borrowed; see the layouts in [`crate::Tiled16`].
#[derive(Clone, Copy, Debug)]
pub enum TilePayload<'a, T> {
    /// `row_start[r]` is the first entry of row `r`; a row ends where the next starts (the
    /// last at the tile's nnz).
    Csr {
        row_start: &'a [u8],
        cols: PackedNibbles<'a>,
        values: &'a [T],
    },
    Coo(TileCoo<'a, T>),
    Ell(TileEll<'a, T>),
    /// Rows longer than the ELL width continue in the COO part.
    Hyb {
        ell: TileEll<'a, T>,
        coo: TileCoo<'a, T>,
    },
    /// `h*w` values column-major; bit `c*h + r` of `mask` marks a real entry.
    Dense {
        mask: &'a [u8],
        values: &'a [T],
    },
    /// Bit `r` of `rows` marks a full row; `w` values per full row, rows in increasing order.
    DenseRow {
        rows: u16,
        values: &'a [T],
    },
    /// Bit `c` of `cols` marks a full column; `h` values per full column.
    DenseCol {
        cols: u16,
        values: &'a [T],
    },
}

impl<'a, T: Copy> TilePayload<'a, T> {
    /// The view of a payload whose lengths `validate` has checked.
    pub(super) fn new(format: TileFormat, h: usize, bytes: &'a [u8], values: &'a [T]) -> Self {
        let ell = |bytes: &'a [u8]| {
            let k = usize::from(bytes[0]);
            let end = ell_bytes(k, h);
            let part = TileEll {
                width: k,
                slot_masks: &bytes[1..1 + 2 * k],
                cols: PackedNibbles::new(&bytes[1 + 2 * k..end]),
                values: &values[..k * h],
            };
            (part, &bytes[end..], &values[k * h..])
        };
        match format {
            TileFormat::Csr => TilePayload::Csr {
                row_start: &bytes[..h],
                cols: PackedNibbles::new(&bytes[h..]),
                values,
            },
            TileFormat::Coo => TilePayload::Coo(TileCoo {
                positions: bytes,
                values,
            }),
            TileFormat::Ell => TilePayload::Ell(ell(bytes).0),
            TileFormat::Hyb => {
                let (ell, positions, values) = ell(bytes);
                TilePayload::Hyb {
                    ell,
                    coo: TileCoo { positions, values },
                }
            }
            TileFormat::Dense => TilePayload::Dense {
                mask: bytes,
                values,
            },
            TileFormat::DenseRow => TilePayload::DenseRow {
                rows: read_u16(bytes, 0),
                values,
            },
            TileFormat::DenseCol => TilePayload::DenseCol {
                cols: read_u16(bytes, 0),
                values,
            },
        }
    }

    pub fn format(&self) -> TileFormat {
        match self {
            TilePayload::Csr { .. } => TileFormat::Csr,
            TilePayload::Coo(_) => TileFormat::Coo,
            TilePayload::Ell(_) => TileFormat::Ell,
            TilePayload::Hyb { .. } => TileFormat::Hyb,
            TilePayload::Dense { .. } => TileFormat::Dense,
            TilePayload::DenseRow { .. } => TileFormat::DenseRow,
            TilePayload::DenseCol { .. } => TileFormat::DenseCol,
        }
    }

    /// Calls `f(row, col, slot, value)` for every real entry of an `h x w` tile of `nnz`
    /// entries, `slot` indexing the tile's values; each row's entries come in increasing column
    /// order (rows may interleave).
    #[inline(always)]
    pub(super) fn for_each_entry(
        &self,
        h: usize,
        w: usize,
        nnz: usize,
        mut f: impl FnMut(usize, usize, usize, T),
    ) {
        match self {
            TilePayload::Csr {
                row_start,
                cols,
                values,
            } => {
                for r in 0..h {
                    let start = usize::from(row_start[r]);
                    let end = row_start.get(r + 1).map_or(nnz, |&s| usize::from(s));
                    for k in start..end {
                        f(r, cols.get(k), k, values[k]);
                    }
                }
            }
            TilePayload::Coo(coo) => coo.for_each_entry(0, &mut f),
            TilePayload::Ell(ell) => ell.for_each_entry(h, &mut f),
            TilePayload::Hyb { ell, coo } => {
                ell.for_each_entry(h, &mut f);
                coo.for_each_entry(ell.values.len(), &mut f);
            }
            TilePayload::Dense { mask, values } => {
                for c in 0..w {
                    for r in 0..h {
                        let slot = c * h + r;
                        if mask_bit(mask, slot) {
                            f(r, c, slot, values[slot]);
                        }
                    }
                }
            }
            TilePayload::DenseRow { rows, values } => {
                for (i, r) in bit_indices(*rows).enumerate() {
                    for (c, &v) in values[i * w..(i + 1) * w].iter().enumerate() {
                        f(r, c, i * w + c, v);
                    }
                }
            }
            TilePayload::DenseCol { cols, values } => {
                for (j, c) in bit_indices(*cols).enumerate() {
                    for (r, &v) in values[j * h..(j + 1) * h].iter().enumerate() {
                        f(r, c, j * h + r, v);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(h: usize, w: usize, cells: &[(usize, usize)]) -> TileEntries {
        let mut t = TileEntries::default();
        t.clear(h, w);
        let mut sorted = cells.to_vec();
        sorted.sort_unstable();
        for (s, &(r, c)) in sorted.iter().enumerate() {
            t.push(r, c, s);
        }
        t
    }

    fn round_trip(format: TileFormat, t: &TileEntries) -> Vec<(usize, usize, f64)> {
        let source: Vec<f64> = (0..t.nnz()).map(|s| s as f64 + 1.0).collect();
        let (nb, nv) = payload_len(format, t, 8);
        let (mut bytes, mut values) = (vec![0u8; nb], vec![0.0; nv]);
        encode(format, t, &source, &mut bytes, &mut values);
        super::super::check::check(format, t.height, t.width, t.nnz(), &bytes, nv).unwrap();
        let mut out = Vec::new();
        TilePayload::new(format, t.height, &bytes, &values).for_each_entry(
            t.height,
            t.width,
            t.nnz(),
            |r, c, _, v| out.push((r, c, v)),
        );
        out.sort_by_key(|&(r, c, _)| (r, c));
        out
    }

    #[test]
    fn every_format_encodes_and_decodes_the_same_entries() {
        let t = tile(5, 3, &[(0, 0), (0, 1), (0, 2), (2, 0), (2, 1), (2, 2)]);
        let expected: Vec<_> = t
            .positions
            .iter()
            .enumerate()
            .map(|(s, &p)| (usize::from(p >> 4), usize::from(p & 15), s as f64 + 1.0))
            .collect();
        for format in TileFormat::ALL {
            if format == TileFormat::DenseCol {
                continue;
            }
            assert_eq!(round_trip(format, &t), expected, "{format}");
        }
        let cols = tile(3, 4, &[(0, 1), (1, 1), (2, 1), (0, 3), (1, 3), (2, 3)]);
        assert_eq!(round_trip(TileFormat::DenseCol, &cols).len(), 6);
    }

    #[test]
    fn hyb_width_stops_where_bytes_stop_falling() {
        // 13 rows of one entry and 3 of two: width 1 with 3 COO entries beats width 2.
        let lens: Vec<usize> = (0..16).map(|r| if r < 3 { 2 } else { 1 }).collect();
        assert_eq!(hyb_width(&lens, 8), 1);
        // Every row equally long: narrowing only moves entries into the COO part.
        assert_eq!(hyb_width(&[4; 16], 8), 4);
    }

    #[test]
    fn nibbles_pack_low_half_first() {
        let n = PackedNibbles::new(&[0x21, 0x03]);
        assert_eq!((n.get(0), n.get(1), n.get(2)), (1, 2, 3));
    }
}
