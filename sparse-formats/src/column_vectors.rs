//! The column-vector layout ME-BCRS and SR-BCRS share ([`ColumnVectors`]), and what is written
//! once against it: the passes of a conversion from CSR, the checks, the way back to CSR and the
//! value order.
//!
//! Rows are cut into groups of `height` rows (ME-BCRS windows, SR-BCRS vector-rows). A group's
//! column vectors, the `height x 1` column slices holding at least one entry, are listed in
//! increasing column order (SR-BCRS then pads their count) and stored in tiles of consecutive
//! vectors ([`VectorTiles`]); a per-vector mask marks the rows that hold entries.

use std::ops::Range;

use rayon::prelude::*;
use sparse_core::{CsrRef, Scalar, SpIndex, StructureError, ValueOrder};

use crate::assembly::split_lengths;
use crate::csr::Csr;
use crate::format::SparseFormat;

/// The most rows a column vector may span (a mask is a `u16`).
pub const MAX_VECTOR_HEIGHT: usize = 16;

/// One stored column vector as a kernel reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorSlots {
    /// Its column; meaningless for a padding vector (empty mask).
    pub col: usize,
    /// Bit `r` set when row `r` of the group holds an entry in this column.
    pub mask: u16,
    /// The slot of row 0.
    pub first: usize,
    /// Slots between consecutive rows.
    pub row_step: usize,
}

impl VectorSlots {
    /// The slot of row `r` of the group.
    #[inline(always)]
    pub fn slot(&self, r: usize) -> usize {
        self.first + r * self.row_step
    }

    /// The rows of the group holding an entry in this vector, increasing.
    #[inline(always)]
    pub fn entry_rows(&self) -> impl Iterator<Item = usize> {
        let mut rest = self.mask;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let r = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                r
            })
        })
    }
}

/// What ME-BCRS and SR-BCRS share: rows cut into groups of [`ColumnVectors::height`] rows
/// (windows, vector-rows), each group listing its column vectors in increasing column order.
/// The formats differ only in where a vector's values sit and in padding vectors, which
/// [`ColumnVectors::for_each_vector`] reports. Conversions back to CSR, the value order and the
/// CPU kernels are written once against this trait.
pub trait ColumnVectors<T: Scalar>: SparseFormat<T> + Sync {
    /// What a group is called in errors.
    const GROUP_NAME: &'static str;

    /// Rows per vector, at most [`MAX_VECTOR_HEIGHT`].
    fn height(&self) -> usize;

    /// Number of groups: rows / height, rounded up.
    fn groups(&self) -> usize {
        self.rows().div_ceil(self.height())
    }

    /// The rows of group `g`; the last group may be short.
    fn group_rows(&self, g: usize) -> Range<usize> {
        group_rows(g, self.height(), self.rows())
    }

    /// The slots of group `g`, padding included. Groups own consecutive ranges, in order.
    fn group_slots(&self, g: usize) -> Range<usize>;

    /// The stored values, indexed by slot.
    fn slot_values(&self) -> &[T];

    /// Visits every stored vector of group `g` in storage order: the real vectors by increasing
    /// column, then any padding vectors (empty mask). Together they cover the group's slots once.
    fn for_each_vector(&self, g: usize, visit: impl FnMut(VectorSlots));
}

/// The rows of group `g` of `height` rows in a matrix of `rows` rows; the last group may be
/// short.
fn group_rows(g: usize, height: usize, rows: usize) -> Range<usize> {
    g * height..((g + 1) * height).min(rows)
}

/// Where a column-vector format stores a group's vectors: in tiles of `tile` consecutive
/// vectors, the last one short when the group's count is not a multiple of `tile`, each tile
/// `height x width` row-major from slot `first vector * height` on. So slot (row `r`, vector `v`
/// of a tile starting at vector `s` and `w` vectors wide) is `s*height + r*w + (v - s)`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VectorTiles {
    /// Rows per group, and so per vector.
    pub height: usize,
    /// Vectors per full tile.
    pub tile: usize,
}

impl VectorTiles {
    /// Vector `v` of the tile starting at vector `tile_start`, `width` vectors wide.
    #[inline(always)]
    fn slots(
        self,
        col: usize,
        mask: u16,
        v: usize,
        tile_start: usize,
        width: usize,
    ) -> VectorSlots {
        VectorSlots {
            col,
            mask,
            first: tile_start * self.height + (v - tile_start),
            row_step: width,
        }
    }

    /// Visits the stored vectors `vectors` of one group in storage order, with the column and
    /// the mask `col` and `mask` give for each.
    #[inline(always)]
    pub(crate) fn for_each_vector(
        self,
        vectors: Range<usize>,
        col: impl Fn(usize) -> usize,
        mask: impl Fn(usize) -> u16,
        mut visit: impl FnMut(VectorSlots),
    ) {
        for tile_start in vectors.clone().step_by(self.tile) {
            let width = self.tile.min(vectors.end - tile_start);
            for v in tile_start..tile_start + width {
                visit(self.slots(col(v), mask(v), v, tile_start, width));
            }
        }
    }

    /// The counting pass of a conversion from CSR: the column vectors of each group of `a`, in
    /// parallel over groups.
    pub(crate) fn count_csr_vectors<T: Scalar, I: SpIndex>(
        self,
        a: CsrRef<'_, T, I>,
    ) -> Vec<usize> {
        (0..a.rows().div_ceil(self.height))
            .into_par_iter()
            .map(|g| {
                let mut n = 0;
                for_each_csr_vector(a, group_rows(g, self.height, a.rows()), |_, _, _| n += 1);
                n
            })
            .collect()
    }

    /// The fill pass of a conversion from CSR, in parallel over groups: group `g` owns the next
    /// `stored[g]` vectors of `vec_col` (`mask_bytes` little-endian bytes each of `vec_mask`,
    /// `height` slots each of `values`), its real vectors first, in column order; what follows
    /// them (padding) is left as the caller preset it. The caller has run
    /// [`crate::checks::check_source`] on `a`.
    pub(crate) fn fill_from_csr<T: Scalar, I: SpIndex>(
        self,
        a: CsrRef<'_, T, I>,
        stored: &[usize],
        mask_bytes: usize,
        vec_col: &mut [u32],
        vec_mask: &mut [u8],
        values: &mut [T],
    ) {
        let col_parts = split_lengths(vec_col, stored.iter().copied());
        let mask_parts = split_lengths(vec_mask, stored.iter().map(|&n| n * mask_bytes));
        let value_parts = split_lengths(values, stored.iter().map(|&n| n * self.height));
        let source = a.values();
        col_parts
            .into_par_iter()
            .zip(mask_parts)
            .zip(value_parts)
            .enumerate()
            .for_each(|(g, ((cols, masks), vals))| {
                let n = cols.len();
                let mut j = 0;
                let rows = group_rows(g, self.height, a.rows());
                for_each_csr_vector(a, rows, |col, mask, entries| {
                    // Fits: col < cols, which fits u32 (check_source).
                    cols[j] = col as u32;
                    masks[j * mask_bytes..(j + 1) * mask_bytes]
                        .copy_from_slice(&mask.to_le_bytes()[..mask_bytes]);
                    let tile_start = j - j % self.tile;
                    let v = self.slots(col, mask, j, tile_start, self.tile.min(n - tile_start));
                    for r in v.entry_rows() {
                        vals[v.slot(r)] = source[entries[r]];
                    }
                    j += 1;
                });
            });
    }
}

/// Walks the column vectors of `rows` (at most [`MAX_VECTOR_HEIGHT`] of them) of `a` in
/// increasing column order: for each column holding an entry in one of the rows,
/// `visit(col, mask, entries)` gets bit `r` of `mask` set and `entries[r]` = the CSR entry for
/// every row `rows.start + r` that has one.
fn for_each_csr_vector<T, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    rows: Range<usize>,
    mut visit: impl FnMut(usize, u16, &[usize; MAX_VECTOR_HEIGHT]),
) {
    let height = rows.len();
    let mut next = [0usize; MAX_VECTOR_HEIGHT];
    let mut end = [0usize; MAX_VECTOR_HEIGHT];
    for (r, i) in rows.enumerate() {
        let range = a.row_range(i);
        (next[r], end[r]) = (range.start, range.end);
    }
    let col_idx = a.col_idx();
    let mut entries = [0usize; MAX_VECTOR_HEIGHT];
    loop {
        let lowest = (0..height)
            .filter(|&r| next[r] < end[r])
            .map(|r| col_idx[next[r]].to_usize())
            .min();
        let Some(col) = lowest else { return };
        let mut mask = 0u16;
        for r in 0..height {
            if next[r] < end[r] && col_idx[next[r]].to_usize() == col {
                entries[r] = next[r];
                next[r] += 1;
                mask |= 1 << r;
            }
        }
        visit(col, mask, &entries);
    }
}

/// Real entries marked in a mask array.
pub(crate) fn count_entries(masks: &[u8]) -> usize {
    masks.iter().map(|m| m.count_ones() as usize).sum()
}

/// The real vectors `vectors` of group `group` (a `group_name`), with the column and the mask
/// `col` and `mask` give for each: columns in `0..cols` and strictly increasing, and at least
/// one entry in each vector.
pub(crate) fn check_vectors(
    group_name: &str,
    group: usize,
    vectors: Range<usize>,
    cols: usize,
    col: impl Fn(usize) -> usize,
    mask: impl Fn(usize) -> u16,
) -> Result<(), StructureError> {
    let mut previous = None;
    for v in vectors {
        let c = col(v);
        if c >= cols {
            return Err(StructureError::Other(format!(
                "{group_name} {group}: vector {v} has column {c}, outside 0..{cols}"
            )));
        }
        if let Some(p) = previous.filter(|&p| c <= p) {
            return Err(StructureError::Other(format!(
                "{group_name} {group}: vector {v} has column {c}, not above the previous \
                 vector's {p} (columns must increase within a {group_name})"
            )));
        }
        if mask(v) == 0 {
            return Err(StructureError::Other(format!(
                "{group_name} {group}: vector {v} (column {c}) has no entry"
            )));
        }
        previous = Some(c);
    }
    Ok(())
}

/// The checks that need the value layout: no mask bit past the group's last row, and zero in
/// every slot of a row without an entry (a tensor-core kernel multiplies them all).
pub(crate) fn check_slots<T: Scalar, F: ColumnVectors<T>>(f: &F) -> Result<(), StructureError> {
    let values = f.slot_values();
    for g in 0..f.groups() {
        let rows = f.group_rows(g).len();
        let mut first_error = None;
        let mut index = 0;
        f.for_each_vector(g, |v| {
            if first_error.is_some() {
                return;
            }
            if u32::from(v.mask) >> rows != 0 {
                first_error = Some(format!(
                    "{group} {g}: its vector {index} has mask {:#b}, which marks rows past the \
                     last of the {group}'s {rows} rows",
                    v.mask,
                    group = F::GROUP_NAME,
                ));
            } else if let Some(r) = (0..f.height())
                .find(|&r| (v.mask >> r) & 1 == 0 && values[v.slot(r)] != T::default())
            {
                first_error = Some(format!(
                    "{} {g}: its vector {index} holds a nonzero value in row {r}, which has no \
                     entry",
                    F::GROUP_NAME
                ));
            }
            index += 1;
        });
        if let Some(message) = first_error {
            return Err(StructureError::Other(message));
        }
    }
    Ok(())
}

/// Row pointers (rows + 1) of the CSR form, counted from the masks in parallel over groups.
fn row_starts<T: Scalar, F: ColumnVectors<T>>(f: &F) -> Vec<usize> {
    let counts: Vec<[usize; MAX_VECTOR_HEIGHT]> = (0..f.groups())
        .into_par_iter()
        .map(|g| {
            let mut counts = [0; MAX_VECTOR_HEIGHT];
            f.for_each_vector(g, |v| v.entry_rows().for_each(|r| counts[r] += 1));
            counts
        })
        .collect();
    let mut starts = Vec::with_capacity(f.rows() + 1);
    starts.push(0);
    let mut total = 0;
    for (g, counts) in counts.iter().enumerate() {
        for &n in &counts[..f.group_rows(g).len()] {
            total += n;
            starts.push(total);
        }
    }
    starts
}

/// The CSR form of a column-vector format, filled in parallel over groups.
pub(crate) fn to_csr<T: Scalar, F: ColumnVectors<T>>(f: &F) -> Csr<T, u32> {
    let starts = row_starts(f);
    let nnz = starts[f.rows()];
    let group_entries = |g: usize| {
        let rows = f.group_rows(g);
        starts[rows.end] - starts[rows.start]
    };
    let mut col_idx = vec![0u32; nnz];
    let mut values = vec![T::default(); nnz];
    let col_parts = split_lengths(&mut col_idx, (0..f.groups()).map(group_entries));
    let value_parts = split_lengths(&mut values, (0..f.groups()).map(group_entries));
    let slots = f.slot_values();
    col_parts
        .into_par_iter()
        .zip(value_parts)
        .enumerate()
        .for_each(|(g, (cols, vals))| {
            let rows = f.group_rows(g);
            let mut next = [0usize; MAX_VECTOR_HEIGHT];
            for (r, i) in rows.clone().enumerate() {
                next[r] = starts[i] - starts[rows.start];
            }
            f.for_each_vector(g, |v| {
                for r in v.entry_rows() {
                    // Fits: a validated structure has cols <= u32::MAX.
                    cols[next[r]] = v.col as u32;
                    vals[next[r]] = slots[v.slot(r)];
                    next[r] += 1;
                }
            });
        });
    // Fits: a validated structure has at most u32::MAX entries.
    let row_ptr = starts.iter().map(|&s| s as u32).collect();
    // SAFETY: each row receives its entries in the order the vectors are listed, which is
    // strictly increasing in column (validated), with columns < cols; row_ptr counts them.
    unsafe { Csr::new_unchecked(f.rows(), f.cols(), row_ptr, col_idx, values) }
}

/// For each slot, the CSR entry it holds, in parallel over groups.
pub(crate) fn value_order<T: Scalar, F: ColumnVectors<T>>(f: &F) -> ValueOrder {
    let starts = row_starts(f);
    let mut slots = vec![ValueOrder::PADDING; f.stored_slots()];
    let parts = split_lengths(&mut slots, (0..f.groups()).map(|g| f.group_slots(g).len()));
    parts.into_par_iter().enumerate().for_each(|(g, part)| {
        let base = f.group_slots(g).start;
        let mut next = [0usize; MAX_VECTOR_HEIGHT];
        for (r, i) in f.group_rows(g).enumerate() {
            next[r] = starts[i];
        }
        f.for_each_vector(g, |v| {
            for r in v.entry_rows() {
                part[v.slot(r) - base] = next[r];
                next[r] += 1;
            }
        });
    });
    ValueOrder::new(slots, starts[f.rows()])
        .expect("a validated structure holds each entry in exactly one slot")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csr_vectors_merge_rows_by_column() {
        let entries = [(0, 1, 1.0), (0, 4, 2.0), (2, 1, 3.0), (2, 5, 4.0)];
        let a = Csr::<f64>::from_triplets(3, 6, &entries).unwrap();
        let mut seen = Vec::new();
        for_each_csr_vector(a.as_ref(), 0..3, |col, mask, entries| {
            let rows: Vec<usize> = (0..3).filter(|r| mask >> r & 1 == 1).collect();
            seen.push((
                col,
                mask,
                rows.iter().map(|&r| entries[r]).collect::<Vec<_>>(),
            ));
        });
        assert_eq!(
            seen,
            vec![
                (1, 0b101, vec![0, 2]),
                (4, 0b001, vec![1]),
                (5, 0b100, vec![3])
            ]
        );
    }
}
