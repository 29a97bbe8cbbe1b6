//! Conversions between CSR and Tiled16, parallel over tile rows. From CSR: a planning pass
//! picks every tile's format and sizes its payload, prefix sums place the tiles (and the fill
//! limit is checked before anything large is allocated), and a fill pass encodes each tile row
//! into its own stretch of the preallocated arrays.

use rayon::prelude::*;
use sparse_core::{CsrRef, Format, Result, Scalar, SpIndex, ValueOrder};

use super::payload::{encode, payload_len, TileEntries, TileFormat, TILE};
use super::select::TileSelection;
use super::{Tiled16, Tiled16Parts};
use crate::assembly::split_lengths;
use crate::checks::{check_source, to_u32};
use crate::csr::Csr;
use crate::format::{FillLimit, SparseFormat};
use crate::slots::order_from_entry_slots;

/// Walks one tile row of a CSR matrix tile by tile, in increasing tile column.
struct TileWalker<'a, T, I> {
    a: CsrRef<'a, T, I>,
    height: usize,
    /// Per row of the tile row, its next entry not yet walked and its end.
    next: [usize; TILE],
    end: [usize; TILE],
}

impl<'a, T, I: SpIndex> TileWalker<'a, T, I> {
    fn new(a: CsrRef<'a, T, I>, tile_row: usize) -> Self {
        let first_row = tile_row * TILE;
        let height = TILE.min(a.rows() - first_row);
        let (mut next, mut end) = ([0; TILE], [0; TILE]);
        for r in 0..height {
            let range = a.row_range(first_row + r);
            (next[r], end[r]) = (range.start, range.end);
        }
        TileWalker {
            a,
            height,
            next,
            end,
        }
    }

    /// Collects the next non-empty tile into `tile` and returns its tile column, or `None`
    /// after the last.
    fn next_tile(&mut self, tile: &mut TileEntries) -> Option<usize> {
        let cols = self.a.col_idx();
        let tc = (0..self.height)
            .filter(|&r| self.next[r] < self.end[r])
            .map(|r| cols[self.next[r]].to_usize() / TILE)
            .min()?;
        tile.clear(self.height, TILE.min(self.a.cols() - tc * TILE));
        for r in 0..self.height {
            while self.next[r] < self.end[r] && cols[self.next[r]].to_usize() / TILE == tc {
                tile.push(r, cols[self.next[r]].to_usize() - tc * TILE, self.next[r]);
                self.next[r] += 1;
            }
        }
        Some(tc)
    }
}

/// Where a tile goes.
#[derive(Clone, Copy)]
enum Placement {
    Stored(TileFormat),
    /// Into the separate CSR of deferred entries.
    Deferred,
}

struct PlannedTile {
    col: usize,
    nnz: usize,
    placement: Placement,
    bytes: usize,
    values: usize,
}

#[derive(Default)]
struct TileRowPlan {
    tiles: Vec<PlannedTile>,
    /// Per row, the entries it has in deferred tiles.
    deferred_row_len: [usize; TILE],
}

fn plan_tile_row<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    tile_row: usize,
    selection: &TileSelection,
    deferred_max_nnz: Option<usize>,
) -> TileRowPlan {
    let value_bytes = std::mem::size_of::<T>();
    let mut walker = TileWalker::new(a, tile_row);
    let mut tile = TileEntries::default();
    let mut plan = TileRowPlan::default();
    while let Some(col) = walker.next_tile(&mut tile) {
        let nnz = tile.nnz();
        let planned = if deferred_max_nnz.is_some_and(|max| nnz <= max) {
            for (total, &n) in plan.deferred_row_len.iter_mut().zip(tile.row_lengths()) {
                *total += n;
            }
            PlannedTile {
                col,
                nnz,
                placement: Placement::Deferred,
                bytes: 0,
                values: 0,
            }
        } else {
            let format = selection.choose(&tile, value_bytes);
            let (bytes, values) = payload_len(format, &tile, value_bytes);
            PlannedTile {
                col,
                nnz,
                placement: Placement::Stored(format),
                bytes,
                values,
            }
        };
        plan.tiles.push(planned);
    }
    plan
}

/// One tile row's stretches of the output arrays.
struct TileRowOut<'s, T> {
    bytes: &'s mut [u8],
    values: &'s mut [T],
    deferred_cols: &'s mut [u32],
    deferred_values: &'s mut [T],
}

fn fill_tile_row<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    tile_row: usize,
    plan: &TileRowPlan,
    out: TileRowOut<'_, T>,
) {
    let mut walker = TileWalker::new(a, tile_row);
    let mut tile = TileEntries::default();
    let mut next_deferred = [0usize; TILE];
    let mut start = 0;
    for (next, &n) in next_deferred.iter_mut().zip(&plan.deferred_row_len) {
        *next = start;
        start += n;
    }
    let (mut b, mut v) = (0, 0);
    for planned in &plan.tiles {
        // The walk repeats the planning pass's, so it meets the same tiles in the same order.
        if walker.next_tile(&mut tile).is_none() {
            break;
        }
        match planned.placement {
            Placement::Stored(format) => {
                encode(
                    format,
                    &tile,
                    a.values(),
                    &mut out.bytes[b..b + planned.bytes],
                    &mut out.values[v..v + planned.values],
                );
                b += planned.bytes;
                v += planned.values;
            }
            Placement::Deferred => {
                for (r, _, source) in tile.entries() {
                    let slot = &mut next_deferred[r];
                    // Fits: the number of columns was checked to fit u32.
                    out.deferred_cols[*slot] = a.col_idx()[source].to_usize() as u32;
                    out.deferred_values[*slot] = a.values()[source];
                    *slot += 1;
                }
            }
        }
    }
}

/// Level 1 of the result and the sizes of each tile row's stretches of the level-2 arrays.
struct Placed {
    tile_ptr: Vec<u32>,
    tile_col: Vec<u32>,
    tile_nnz: Vec<u32>,
    tile_format: Vec<TileFormat>,
    byte_ptr: Vec<u32>,
    value_ptr: Vec<u32>,
    deferred_row_ptr: Vec<u32>,
    spans: Vec<RowSpan>,
}

/// The lengths of one tile row's stretches of the level-2 arrays.
#[derive(Clone, Copy, Default)]
struct RowSpan {
    bytes: usize,
    values: usize,
    deferred: usize,
}

impl RowSpan {
    fn sum(spans: &[RowSpan]) -> RowSpan {
        spans.iter().fold(RowSpan::default(), |t, s| RowSpan {
            bytes: t.bytes + s.bytes,
            values: t.values + s.values,
            deferred: t.deferred + s.deferred,
        })
    }
}

fn place(plans: &[TileRowPlan], rows: usize) -> Result<Placed> {
    let mut p = Placed {
        tile_ptr: vec![0],
        tile_col: Vec::new(),
        tile_nnz: vec![0],
        tile_format: Vec::new(),
        byte_ptr: vec![0],
        value_ptr: vec![0],
        deferred_row_ptr: Vec::with_capacity(rows + 1),
        spans: Vec::with_capacity(plans.len()),
    };
    p.deferred_row_ptr.push(0);
    let (mut nnz, mut bytes, mut values, mut deferred) = (0usize, 0usize, 0usize, 0usize);
    for (tr, plan) in plans.iter().enumerate() {
        let (bytes0, values0, deferred0) = (bytes, values, deferred);
        for tile in &plan.tiles {
            if let Placement::Stored(format) = tile.placement {
                (nnz, bytes, values) = (nnz + tile.nnz, bytes + tile.bytes, values + tile.values);
                p.tile_col.push(to_u32("tile column", tile.col)?);
                p.tile_format.push(format);
                p.tile_nnz.push(to_u32("entries in tiles", nnz)?);
                p.byte_ptr.push(to_u32("tile payload bytes", bytes)?);
                p.value_ptr.push(to_u32("tile values", values)?);
            }
        }
        p.tile_ptr
            .push(to_u32("number of tiles", p.tile_col.len())?);
        let height = TILE.min(rows - tr * TILE);
        for &n in &plan.deferred_row_len[..height] {
            deferred += n;
            p.deferred_row_ptr
                .push(to_u32("deferred entries", deferred)?);
        }
        p.spans.push(RowSpan {
            bytes: bytes - bytes0,
            values: values - values0,
            deferred: deferred - deferred0,
        });
    }
    Ok(p)
}

pub(super) fn from_csr<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    selection: &TileSelection,
    limit: FillLimit,
) -> Result<Tiled16<T>> {
    check_source(a)?;
    selection.check()?;
    let deferred_max_nnz = selection.deferred_max_nnz(a.nnz());
    let plans: Vec<TileRowPlan> = (0..a.rows().div_ceil(TILE))
        .into_par_iter()
        .map(|tr| plan_tile_row(a, tr, selection, deferred_max_nnz))
        .collect();
    let placed = place(&plans, a.rows())?;
    let total = RowSpan::sum(&placed.spans);
    limit.check(Format::Tiled16, total.values + total.deferred, a.nnz())?;

    let mut payload_bytes = vec![0u8; total.bytes];
    let mut payload_values = vec![T::default(); total.values];
    let mut deferred_cols = vec![0u32; total.deferred];
    let mut deferred_values = vec![T::default(); total.deferred];
    let spans = &placed.spans;
    let outs: Vec<TileRowOut<'_, T>> =
        split_lengths(&mut payload_bytes, spans.iter().map(|s| s.bytes))
            .into_iter()
            .zip(split_lengths(
                &mut payload_values,
                spans.iter().map(|s| s.values),
            ))
            .zip(split_lengths(
                &mut deferred_cols,
                spans.iter().map(|s| s.deferred),
            ))
            .zip(split_lengths(
                &mut deferred_values,
                spans.iter().map(|s| s.deferred),
            ))
            .map(
                |(((bytes, values), deferred_cols), deferred_values)| TileRowOut {
                    bytes,
                    values,
                    deferred_cols,
                    deferred_values,
                },
            )
            .collect();
    plans
        .par_iter()
        .zip(outs)
        .enumerate()
        .for_each(|(tr, (plan, out))| fill_tile_row(a, tr, plan, out));

    let deferred = (total.deferred > 0).then(|| {
        // SAFETY: each row's deferred entries were written in increasing column order (tiles in
        // increasing tile column, each tile's entries in increasing column), all in range, and
        // deferred_row_ptr counts them.
        unsafe {
            Csr::new_unchecked(
                a.rows(),
                a.cols(),
                placed.deferred_row_ptr,
                deferred_cols,
                deferred_values,
            )
        }
    });
    let parts = Tiled16Parts {
        tile_ptr: placed.tile_ptr,
        tile_col: placed.tile_col,
        tile_nnz: placed.tile_nnz,
        tile_format: placed.tile_format,
        byte_ptr: placed.byte_ptr,
        value_ptr: placed.value_ptr,
        payload_bytes,
        values: payload_values,
        deferred,
    };
    // SAFETY: every tile was encoded from a canonical CSR by the layouts `validate` checks, and
    // the deferred entries are those of tiles that were not stored.
    Ok(unsafe { Tiled16::new_unchecked(a.rows(), a.cols(), parts) })
}

/// The entries of tile row `tr` as (row within the tile row, column, slot), sorted by row,
/// then column: the CSR entry order. Slots number the tiles' values, then the deferred entries.
fn tile_row_entries<T: Scalar>(m: &Tiled16<T>, tr: usize) -> Vec<(usize, u32, usize)> {
    let mut entries = Vec::new();
    for t in m.tile_ptr()[tr] as usize..m.tile_ptr()[tr + 1] as usize {
        let tile = m.tile_at(tr, t);
        let (first_col, first_slot) = (tile.first_col(), m.value_ptr()[t] as usize);
        tile.payload
            .for_each_entry(tile.height, tile.width, tile.nnz, |r, c, slot, _| {
                // Fits: columns fit u32 (checked by validate).
                entries.push((r, (first_col + c) as u32, first_slot + slot));
            });
    }
    if let Some(d) = m.deferred() {
        let (d, first_slot) = (d.as_ref(), m.values().len());
        let first_row = tr * TILE;
        for (r, row) in (first_row..m.rows().min(first_row + TILE)).enumerate() {
            entries.extend(
                d.row_range(row)
                    .map(|e| (r, d.col_idx()[e], first_slot + e)),
            );
        }
    }
    // Positions are unique: deferred entries lie outside the stored tiles.
    entries.sort_unstable_by_key(|&(r, c, _)| (r, c));
    entries
}

/// One tile row's stretches of the CSR being built.
struct CsrRowsOut<'s, T> {
    /// Entries before the tile row.
    base: usize,
    /// row_ptr of the tile row's rows, each the end of its row.
    row_end: &'s mut [u32],
    col_idx: &'s mut [u32],
    values: &'s mut [T],
}

pub(super) fn to_csr<T: Scalar>(m: &Tiled16<T>) -> Csr<T, u32> {
    let (rows, cols) = m.shape();
    let deferred = m.deferred().map(Csr::as_ref);
    let counts: Vec<usize> = (0..m.tile_rows())
        .map(|tr| {
            let (first, end) = (m.tile_ptr()[tr] as usize, m.tile_ptr()[tr + 1] as usize);
            let stored = (m.tile_nnz()[end] - m.tile_nnz()[first]) as usize;
            let r = tr * TILE..rows.min(tr * TILE + TILE);
            stored
                + deferred.map_or(0, |d| {
                    d.row_ptr()[r.end] as usize - d.row_ptr()[r.start] as usize
                })
        })
        .collect();
    let nnz = counts.iter().sum();
    let mut row_ptr = vec![0u32; rows + 1];
    let mut col_idx = vec![0u32; nnz];
    let mut values = vec![T::default(); nnz];
    let mut base = 0;
    let outs: Vec<CsrRowsOut<'_, T>> = row_ptr[1..]
        .chunks_mut(TILE)
        .zip(split_lengths(&mut col_idx, counts.iter().copied()))
        .zip(split_lengths(&mut values, counts.iter().copied()))
        .zip(&counts)
        .map(|(((row_end, col_idx), values), &count)| {
            base += count;
            CsrRowsOut {
                base: base - count,
                row_end,
                col_idx,
                values,
            }
        })
        .collect();
    let tile_values = m.values();
    let deferred_values = deferred.map_or(&[][..], |d| d.values());
    let slot_value = |slot: usize| match tile_values.get(slot) {
        Some(&v) => v,
        None => deferred_values[slot - tile_values.len()],
    };
    outs.into_par_iter().enumerate().for_each(|(tr, out)| {
        let mut row_len = [0usize; TILE];
        for (k, (r, c, slot)) in tile_row_entries(m, tr).into_iter().enumerate() {
            out.col_idx[k] = c;
            out.values[k] = slot_value(slot);
            row_len[r] += 1;
        }
        let mut end = out.base;
        for (ptr, &n) in out.row_end.iter_mut().zip(&row_len) {
            end += n;
            // Fits: the total entry count fits u32 (checked by validate).
            *ptr = end as u32;
        }
    });
    // SAFETY: every row's entries are sorted by column, unique (tiles are disjoint and deferred
    // entries lie outside stored tiles), in range, and row_ptr counts them.
    unsafe { Csr::new_unchecked(rows, cols, row_ptr, col_idx, values) }
}

pub(super) fn value_order<T: Scalar>(m: &Tiled16<T>) -> ValueOrder {
    let entry_slots: Vec<usize> = (0..m.tile_rows())
        .into_par_iter()
        .flat_map_iter(|tr| tile_row_entries(m, tr).into_iter().map(|(_, _, slot)| slot))
        .collect();
    order_from_entry_slots(&entry_slots, m.stored_slots())
}
