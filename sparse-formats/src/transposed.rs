//! A CSR pattern read by columns, with each entry's place in the CSR order: what a kernel needs
//! to gather over columns (the gradients of attention with respect to K and V) without atomics.

use sparse_core::{CsrRef, SpIndex};

/// Column j's entries are `col_ptr[j] .. col_ptr[j + 1]`, each with its row and its position in
/// the CSR entry order; rows ascend within a column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transposed {
    pub col_ptr: Vec<usize>,
    pub row: Vec<usize>,
    pub entry: Vec<usize>,
}

impl Transposed {
    pub fn of<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> Self {
        let mut col_ptr = vec![0usize; a.cols() + 1];
        for &c in a.col_idx() {
            col_ptr[c.to_usize() + 1] += 1;
        }
        for j in 0..a.cols() {
            col_ptr[j + 1] += col_ptr[j];
        }
        let mut next = col_ptr.clone();
        let (mut row, mut entry) = (vec![0usize; a.nnz()], vec![0usize; a.nnz()]);
        for i in 0..a.rows() {
            for e in a.row_range(i) {
                let slot = &mut next[a.col_idx()[e].to_usize()];
                row[*slot] = i;
                entry[*slot] = e;
                *slot += 1;
            }
        }
        Transposed {
            col_ptr,
            row,
            entry,
        }
    }

    pub fn bytes(&self) -> usize {
        (self.col_ptr.len() + self.row.len() + self.entry.len()) * size_of::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_list_their_rows_and_entries() {
        // [1 0 2]
        // [0 0 3]
        // [4 5 0]
        let (row_ptr, col_idx, values) = (
            [0u32, 2, 3, 5],
            [0u32, 2, 2, 0, 1],
            [1.0, 2.0, 3.0, 4.0, 5.0],
        );
        let a = CsrRef::try_new(3, 3, &row_ptr, &col_idx, &values).unwrap();
        let t = Transposed::of(a);
        assert_eq!(t.col_ptr, [0, 2, 3, 5]);
        assert_eq!(t.row, [0, 2, 2, 0, 1]);
        assert_eq!(t.entry, [0, 3, 4, 1, 2]);
    }
}
