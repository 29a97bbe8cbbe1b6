//! Work partitions computed once per plan, so every run splits the work the same way (which
//! keeps results deterministic for a given number of parts).

use sparse_core::{CsrRef, SpIndex};

/// Matrices with fewer stored entries than this run in one part: splitting costs more than it saves.
const MIN_ENTRIES_PER_PART: usize = 1 << 14;

/// The number of parts for `work` units on the current rayon pool.
pub fn part_count(work: usize) -> usize {
    let threads = rayon::current_num_threads().max(1);
    (work / MIN_ENTRIES_PER_PART).clamp(1, 4 * threads)
}

/// A point on the merge path of CSR SpMV: `row` rows finished and `entry` entries consumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathPoint {
    pub row: usize,
    pub entry: usize,
}

/// Splits the merge of row ends and entries (rows + nnz items) into `parts` equal pieces, so
/// every part gets the same share of rows plus entries however skewed the rows are; a row may
/// span several parts. Returns `parts + 1` points from (0, 0) to (rows, nnz).
pub fn merge_path<T, I: SpIndex>(a: CsrRef<'_, T, I>, parts: usize) -> Vec<PathPoint> {
    let (rows, nnz) = (a.rows(), a.nnz());
    let total = rows + nnz;
    let row_end = |i: usize| a.row_ptr()[i + 1].to_usize();
    (0..=parts)
        .map(|p| {
            let diagonal = (total * p).div_ceil(parts).min(total);
            // Smallest row count r on this diagonal whose row r still has entries past the
            // diagonal: the classic binary search of merge-based SpMV.
            let (mut lo, mut hi) = (diagonal.saturating_sub(nnz), diagonal.min(rows));
            while lo < hi {
                let mid = (lo + hi) / 2;
                if row_end(mid) < diagonal - mid {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            PathPoint {
                row: lo,
                entry: diagonal - lo,
            }
        })
        .collect()
}

/// Splits the rows into at most `parts` contiguous ranges of about equal `weight(entries, rows)`;
/// rows are never split. Returns the range boundaries, from 0 to rows.
pub fn balanced_rows<T, I: SpIndex>(a: CsrRef<'_, T, I>, parts: usize) -> Vec<usize> {
    // Weight of rows 0..r: entries plus one per row, so runs of empty rows still get split.
    balanced_ranges(a.rows(), parts, |r| a.row_ptr()[r].to_usize() + r)
}

/// Splits `0..n` into at most `parts` contiguous ranges of about equal weight, where `prefix(i)`
/// is the weight of `0..i` (non-decreasing, `prefix(0) == 0`). Returns the range boundaries,
/// increasing from 0 to n.
pub fn balanced_ranges(n: usize, parts: usize, prefix: impl Fn(usize) -> usize) -> Vec<usize> {
    let total = prefix(n);
    let mut bounds = vec![0];
    for p in 1..parts {
        let target = (total * p).div_ceil(parts);
        let (mut lo, mut hi) = (*bounds.last().unwrap_or(&0), n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if prefix(mid) < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo > *bounds.last().unwrap_or(&0) && lo < n {
            bounds.push(lo);
        }
    }
    bounds.push(n);
    bounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_formats::Csr;

    fn skewed() -> Csr<f64> {
        let mut t = vec![(0, 0, 1.0), (3, 3, 1.0)];
        t.extend((0..100).map(|j| (1, j, 1.0)));
        Csr::from_triplets(4, 100, &t).unwrap()
    }

    #[test]
    fn merge_path_splits_long_rows_evenly() {
        let a = skewed();
        let path = merge_path(a.as_ref(), 4);
        assert_eq!(path.first(), Some(&PathPoint { row: 0, entry: 0 }));
        assert_eq!(path.last(), Some(&PathPoint { row: 4, entry: 102 }));
        for w in path.windows(2) {
            let items = (w[1].row - w[0].row) + (w[1].entry - w[0].entry);
            assert!((26..=27).contains(&items), "{w:?}");
            assert!(w[1].row >= w[0].row && w[1].entry >= w[0].entry);
        }
        // The long row 1 is shared by several parts.
        assert!(path.iter().filter(|p| p.row == 1).count() >= 2);
    }

    #[test]
    fn balanced_rows_cover_all_rows_in_order() {
        let a = skewed();
        let b = balanced_rows(a.as_ref(), 3);
        assert_eq!(b.first(), Some(&0));
        assert_eq!(b.last(), Some(&4));
        assert!(b.windows(2).all(|w| w[0] < w[1]));
        let empty = Csr::<f64>::zeros(0, 0);
        assert_eq!(balanced_rows(empty.as_ref(), 4), vec![0, 0]);
    }
}
