//! Sparse matrices resident on the device.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use sparse_core::{CsrRef, Result, Scalar, SpIndex};

use crate::device::{CudaBuffer, Device};
use crate::kernel::Ptr;
use crate::operand::to_u32;

/// CSR on the device with u32 indices (the kernels' index type).
pub struct DeviceCsr<T> {
    pub rows: u32,
    pub cols: u32,
    pub nnz: u32,
    pub row_ptr: CudaSlice<u32>,
    pub col_idx: CudaSlice<u32>,
    pub values: CudaBuffer<T>,
}

/// Bytes after the column indices and values of a [`DeviceCsr`]: the RoDe kernels copy tiles of
/// them to shared memory in aligned 16-byte vectors, each starting at an entry but possibly
/// ending past the last one (the copy reads only the entries, but the whole vector must lie in
/// the allocation).
const VECTOR_SLACK: usize = 16;

impl<T: Scalar> DeviceCsr<T> {
    /// `a` on the device, through the pinned staging buffers, indices narrowed to u32 on the way.
    pub fn upload<I: SpIndex>(device: &Arc<Device>, a: CsrRef<'_, T, I>) -> Result<Self> {
        let (rows, cols, nnz) = (
            to_u32("number of rows", a.rows())?,
            to_u32("number of columns", a.cols())?,
            to_u32("number of entries", a.nnz())?,
        );
        // Every row pointer is at most nnz and every column below cols (the CsrRef is
        // canonical), and both fit u32 (checked above), so the narrowing keeps every index.
        let narrow = |i: &I| i.to_usize() as u32;
        let slack = VECTOR_SLACK / size_of::<u32>();
        Ok(DeviceCsr {
            rows,
            cols,
            nnz,
            row_ptr: device.upload_converted(a.row_ptr(), slack, narrow)?,
            col_idx: device.upload_converted(a.col_idx(), slack, narrow)?,
            values: device.upload_with_slack(a.values(), VECTOR_SLACK)?,
        })
    }

    /// The row pointers, column indices and values as kernel arguments.
    pub fn pointers(&self, device: &Device) -> (Ptr<u32>, Ptr<u32>, Ptr<T>) {
        (
            Ptr::of(&self.row_ptr, device),
            Ptr::of(&self.col_idx, device),
            Ptr::of_buffer(&self.values),
        )
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        (self.rows as usize + 1 + self.nnz as usize) * 4 + self.nnz as usize * size_of::<T>()
    }
}
