//! Pieces of the parallel conversions: offsets from per-task counts, preallocated arrays cut
//! into one piece per task, and canonical CSR assembled from per-row entries.

use rayon::prelude::*;
use sparse_core::Scalar;

use crate::csr::Csr;

/// Offsets from 0 through the running sums of `counts` (`counts.len() + 1` of them). The caller
/// has checked that the total fits u32.
pub(crate) fn offsets(counts: impl IntoIterator<Item = usize>) -> Vec<u32> {
    let counts = counts.into_iter();
    let mut offsets = Vec::with_capacity(counts.size_hint().0 + 1);
    let mut end = 0usize;
    offsets.push(0u32);
    for n in counts {
        end += n;
        offsets.push(end as u32);
    }
    offsets
}

/// Cuts `data` into consecutive pieces of the given lengths (which sum to at most its length),
/// so that parallel tasks each own one.
pub(crate) fn split_lengths<X>(
    mut data: &mut [X],
    lengths: impl IntoIterator<Item = usize>,
) -> Vec<&mut [X]> {
    lengths
        .into_iter()
        .map(|n| {
            let (head, tail) = std::mem::take(&mut data).split_at_mut(n);
            data = tail;
            head
        })
        .collect()
}

/// Assembles canonical CSR from per-row entry lists, in parallel over rows: `row_len(i)` must
/// count what `row(i)` yields, in increasing column order. The padded formats are validated to
/// hold at most u32::MAX entries, so the row pointers fit.
pub(crate) fn csr_from_rows<T: Scalar, R>(
    rows: usize,
    cols: usize,
    row_len: impl Fn(usize) -> usize + Sync + Send,
    row: impl Fn(usize) -> R + Sync + Send,
) -> Csr<T, u32>
where
    R: Iterator<Item = (u32, T)>,
{
    let lengths: Vec<usize> = (0..rows).into_par_iter().map(row_len).collect();
    let row_ptr = offsets(lengths);
    let (col_idx, values): (Vec<u32>, Vec<T>) =
        (0..rows).into_par_iter().flat_map_iter(row).unzip();
    // SAFETY: every row yields its entries with strictly increasing columns below `cols` (the
    // invariant of the validated format it comes from), and row_ptr counts them.
    unsafe { Csr::new_unchecked(rows, cols, row_ptr, col_idx, values) }
}
