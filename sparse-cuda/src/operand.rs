//! Dense operands of a CUDA plan: device buffers with their strides, and scalar arguments.

use std::sync::Arc;

use cudarc::driver::{LaunchArgs, PushKernelArg};
use sparse_core::{DType, DenseMut, DenseRef, Error, Layout, Memory, MemoryMut, Result, Scalar};

use crate::device::{CudaBuffer, Device};

/// Kernel-name suffix of a storage type, or `None` when no kernel takes it.
pub fn suffix(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => Some("f32"),
        DType::F64 => Some("f64"),
        DType::F16 => Some("f16"),
        _ => None,
    }
}

/// (row stride, column stride) in elements.
pub fn strides(layout: Layout, ld: usize) -> (u32, u32) {
    let ld = ld as u32;
    match layout {
        Layout::RowMajor => (ld, 1),
        Layout::ColMajor => (1, ld),
    }
}

/// Checks the operands of an SpMM by a `rows x cols` matrix: B is cols x N, C rows x N, and N
/// and B's leading dimension fit the kernels' u32 arguments. Returns N.
pub fn spmm_width<T: Scalar, O: Scalar>(
    (rows, cols): (usize, usize),
    b: &DenseRef<'_, T>,
    c: &DenseMut<'_, O>,
) -> Result<u32> {
    let width = b.cols();
    b.expect_shape("spmm B", (cols, width))?;
    c.expect_shape("spmm C", (rows, width))?;
    to_u32("spmm B leading dimension", b.ld())?;
    to_u32("spmm width (columns of B)", width)
}

/// Checks the operands of an SDDMM over a `rows x cols` pattern whose output has `slots` values:
/// X is rows x K, Y cols x K, C slots x 1, and K and the leading dimensions of X and Y fit the
/// kernels' u32 arguments. Returns K.
pub fn sddmm_inner<T: Scalar, O: Scalar>(
    (rows, cols, slots): (usize, usize, usize),
    x: &DenseRef<'_, T>,
    y: &DenseRef<'_, T>,
    c: &DenseMut<'_, O>,
) -> Result<u32> {
    let width = x.cols();
    x.expect_shape("sddmm X", (rows, width))?;
    y.expect_shape("sddmm Y", (cols, width))?;
    c.expect_shape("sddmm C", (slots, 1))?;
    to_u32("sddmm X leading dimension", x.ld())?;
    to_u32("sddmm Y leading dimension", y.ld())?;
    to_u32("sddmm inner dimension (columns of X)", width)
}

fn wrong_memory(context: &str, device: &Device, found: String) -> Error {
    Error::WrongMemory {
        context: context.to_string(),
        expected: device.location(),
        found,
    }
}

/// The buffer behind a read-only operand, which must live on `device`.
pub fn input<'a, T: Scalar>(
    d: &DenseRef<'a, T>,
    device: &Arc<Device>,
    context: &str,
) -> Result<&'a CudaBuffer<T>> {
    match d.memory() {
        Memory::Device(m) => match m.as_any().downcast_ref::<CudaBuffer<T>>() {
            Some(buf) if Arc::ptr_eq(buf.device(), device) => Ok(buf),
            _ => Err(wrong_memory(context, device, m.location())),
        },
        Memory::Host(_) => Err(wrong_memory(
            context,
            device,
            "host (upload it with the backend first)".into(),
        )),
    }
}

/// The buffer behind a writable operand, which must live on `device`.
pub fn output<'a, 'b, T: Scalar>(
    d: &'b mut DenseMut<'a, T>,
    device: &Arc<Device>,
    context: &str,
) -> Result<&'b mut CudaBuffer<T>> {
    let location = d.location();
    match d.memory() {
        MemoryMut::Device(m) => match m.as_any_mut().downcast_mut::<CudaBuffer<T>>() {
            Some(buf) if Arc::ptr_eq(buf.device(), device) => Ok(buf),
            _ => Err(wrong_memory(context, device, location)),
        },
        MemoryMut::Host(_) => Err(wrong_memory(
            context,
            device,
            "host (allocate it with the backend's zeros)".into(),
        )),
    }
}

/// A value of the accumulation type, passed to kernels by value.
#[derive(Clone, Copy, Debug)]
pub enum AccArg {
    F32(f32),
    F64(f64),
}

impl AccArg {
    /// `v` in the accumulation type of `T` (f64 for f64 storage, f32 otherwise).
    pub fn of<T: Scalar>(v: f64) -> Self {
        if T::DTYPE == DType::F64 {
            AccArg::F64(v)
        } else {
            AccArg::F32(v as f32)
        }
    }

    pub fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        match self {
            AccArg::F32(v) => args.arg(v),
            AccArg::F64(v) => args.arg(v),
        };
    }
}

/// A dimension or index as the kernels' `u32`, or an overflow error with the numbers.
pub fn to_u32(what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::overflow::<u32>(what, v))
}
