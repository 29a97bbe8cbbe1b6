//! Sparse matrices resident on the device.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use sparse_core::{CsrRef, Result, Scalar, SpIndex};

use crate::device::{driver_error, CudaBuffer, Device};
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

fn indices<I: SpIndex>(what: &str, v: &[I]) -> Result<Vec<u32>> {
    v.iter().map(|&i| to_u32(what, i.to_usize())).collect()
}

/// Bytes after the column indices and values of a [`DeviceCsr`]: the RoDe kernels copy tiles of
/// them to shared memory in aligned 16-byte vectors, each starting at an entry but possibly
/// ending past the last one (the copy reads only the entries, but the whole vector must lie in
/// the allocation).
const VECTOR_SLACK: usize = 16;

/// `host` and [`VECTOR_SLACK`] zero bytes (which also keep an empty array's allocation valid:
/// the driver refuses zero-length ones).
fn upload_indices(device: &Device, host: &[u32]) -> Result<CudaSlice<u32>> {
    let mut padded = Vec::with_capacity(host.len() + VECTOR_SLACK / 4);
    padded.extend_from_slice(host);
    padded.resize(host.len() + VECTOR_SLACK / 4, 0);
    device
        .stream
        .clone_htod(&padded)
        .map_err(|e| driver_error("copying indices to the device", e))
}

impl<T: Scalar> DeviceCsr<T> {
    pub fn upload<I: SpIndex>(device: &Arc<Device>, a: CsrRef<'_, T, I>) -> Result<Self> {
        Ok(DeviceCsr {
            rows: to_u32("number of rows", a.rows())?,
            cols: to_u32("number of columns", a.cols())?,
            nnz: to_u32("number of entries", a.nnz())?,
            row_ptr: upload_indices(device, &indices("row pointer", a.row_ptr())?)?,
            col_idx: upload_indices(device, &indices("column index", a.col_idx())?)?,
            values: device.upload_with_slack(a.values(), VECTOR_SLACK)?,
        })
    }

    /// Row index of every entry (the COO view of the same matrix).
    pub fn upload_row_indices<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
    ) -> Result<CudaSlice<u32>> {
        let mut rows = Vec::with_capacity(a.nnz());
        for i in 0..a.rows() {
            rows.extend(std::iter::repeat_n(to_u32("row index", i)?, a.row_len(i)));
        }
        upload_indices(device, &rows)
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        (self.rows as usize + 1 + self.nnz as usize) * 4 + self.nnz as usize * size_of::<T>()
    }
}
