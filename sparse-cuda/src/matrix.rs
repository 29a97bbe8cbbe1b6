//! Sparse matrices resident on the device.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use cudarc::driver::CudaSlice;
use rayon::prelude::*;
use sparse_core::{CsrRef, Result, Scalar, SpIndex, ValueOrder};

use crate::device::{CudaBuffer, Device};
use crate::kernel::Ptr;
use crate::operand::to_u32;
use crate::plan::Values;

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

/// The slot of each CSR entry in `order`, or `None` when every entry is in its own slot. In
/// parallel: plans of tens of millions of entries wait on this.
fn entry_slots(order: &ValueOrder) -> Result<Option<Vec<u32>>> {
    to_u32("number of stored slots", order.len())?;
    if order.len() == order.nnz()
        && (0..order.len())
            .into_par_iter()
            .all(|s| order.entry(s) == Some(s))
    {
        return Ok(None);
    }
    let slots: Vec<AtomicU32> = (0..order.nnz())
        .into_par_iter()
        .map(|_| AtomicU32::new(0))
        .collect();
    (0..order.len()).into_par_iter().for_each(|s| {
        if let Some(e) = order.entry(s) {
            // Fits: below the slot count, checked above.
            slots[e].store(s as u32, Ordering::Relaxed);
        }
    });
    Ok(Some(
        slots.into_par_iter().map(AtomicU32::into_inner).collect(),
    ))
}

/// The values of a format that stores them in its own order (padding included), with the slot
/// of each CSR entry there, through which value updates scatter new CSR-ordered values.
pub struct FormatValues<T> {
    pub values: CudaBuffer<T>,
    /// `None` when the order is the CSR entry order.
    slots: Option<CudaSlice<u32>>,
}

impl<T: Scalar> FormatValues<T> {
    /// `parts` one after the other, holding the entries `order` places in their slots.
    pub fn upload(device: &Arc<Device>, parts: &[&[T]], order: &ValueOrder) -> Result<Self> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let values = device.zeros::<T>(len)?;
        device.stage(values.address(), len, |start, out: &mut [T]| {
            let mut skip = start;
            let mut filled = 0;
            for part in parts {
                if filled == out.len() {
                    break;
                }
                if skip >= part.len() {
                    skip -= part.len();
                    continue;
                }
                let n = (part.len() - skip).min(out.len() - filled);
                out[filled..filled + n].copy_from_slice(&part[skip..skip + n]);
                (skip, filled) = (0, filled + n);
            }
        })?;
        let slots = match entry_slots(order)? {
            Some(slots) => Some(device.upload_converted(&slots, 0, |&s| s)?),
            None => None,
        };
        Ok(FormatValues { values, slots })
    }

    /// Where value updates write.
    pub fn target(&self) -> Values<'_, T> {
        Values {
            buffer: &self.values,
            slots: self.slots.as_ref(),
        }
    }

    pub fn pointer(&self) -> Ptr<T> {
        Ptr::of_buffer(&self.values)
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        use sparse_core::DeviceMemory;
        self.values.len() * size_of::<T>() + self.slots.as_ref().map_or(0, |s| s.len() * 4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_slots_invert_the_value_order() {
        let pad = ValueOrder::PADDING;
        let order = ValueOrder::new(vec![1, pad, 0, 2, pad], 3).unwrap();
        assert_eq!(entry_slots(&order).unwrap(), Some(vec![2, 0, 3]));
        let identity = ValueOrder::new(vec![0, 1, 2], 3).unwrap();
        assert_eq!(entry_slots(&identity).unwrap(), None);
        assert_eq!(
            entry_slots(&ValueOrder::new(vec![], 0).unwrap()).unwrap(),
            None
        );
    }
}
