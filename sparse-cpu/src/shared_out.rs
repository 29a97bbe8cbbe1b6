//! A dense output that parallel tasks write at disjoint positions.

use std::marker::PhantomData;

use sparse_core::{DenseMut, Layout, Result};

/// Raw access to a host output so that rayon tasks can each write their own rows.
///
/// Invariant: the pointer spans every element of a `rows x cols` matrix with this `ld` and
/// layout (checked when the `DenseMut` was made), and the caller of [`SharedOut::write`] and
/// [`SharedOut::read`] guarantees no two tasks touch the same element.
pub struct SharedOut<'a, T> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: tasks write disjoint elements (the invariant above), so sharing the pointer across
// threads is as safe as handing each task its own `&mut` slice.
unsafe impl<T: Send> Send for SharedOut<'_, T> {}
unsafe impl<T: Send> Sync for SharedOut<'_, T> {}

impl<'a, T: Copy> SharedOut<'a, T> {
    pub fn new(out: &'a mut DenseMut<'_, T>, context: &str) -> Result<Self> {
        let (rows, cols, ld, layout) = (out.rows(), out.cols(), out.ld(), out.layout());
        let (row_stride, col_stride) = match layout {
            Layout::RowMajor => (ld, 1),
            Layout::ColMajor => (1, ld),
        };
        let ptr = out.host(context)?.as_mut_ptr();
        Ok(SharedOut {
            ptr,
            rows,
            cols,
            row_stride,
            col_stride,
            _borrow: PhantomData,
        })
    }

    /// # Safety
    /// `i < rows`, `j < cols`, and no other task accesses (i, j) concurrently.
    #[inline(always)]
    pub unsafe fn read(&self, i: usize, j: usize) -> T {
        debug_assert!(i < self.rows && j < self.cols);
        *self.ptr.add(i * self.row_stride + j * self.col_stride)
    }

    /// # Safety
    /// `i < rows`, `j < cols`, and no other task accesses (i, j) concurrently.
    #[inline(always)]
    pub unsafe fn write(&self, i: usize, j: usize, v: T) {
        debug_assert!(i < self.rows && j < self.cols);
        *self.ptr.add(i * self.row_stride + j * self.col_stride) = v;
    }
}
