//! BLAS-1 on device vectors of the CUDA backend: `dot`, `nrm2`, `axpy`, `scal`.
//!
//! Vectors are n x 1 [`DenseRef`] / [`DenseMut`] operands made by this backend, in either layout
//! (a row-major n x 1 vector is strided by its leading dimension). Reductions run in the
//! accumulation type of `T` (f32 for f16 and f32, f64 for f64) in two passes with a fixed
//! launch shape for a given n and no atomics, so they are deterministic; the result comes back
//! to the host as f64, which makes these calls synchronous. `axpy` and `scal` only enqueue work.

use std::sync::{Mutex, MutexGuard};

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};
use sparse_core::{Accumulator, DenseMut, DenseRef, Error, Result, Scalar};

use crate::compile::sources;
use crate::device::{driver_error, Device};
use crate::executor::CudaBackend;
use crate::operand::{input, output, strides, suffix, to_u32, AccArg};

const BLOCK: u32 = 256;
/// Blocks of the first reduction pass (and of axpy/scal): enough to fill an H100 at 8 blocks
/// per SM, with each thread striding over the rest.
const MAX_BLOCKS: u32 = 1024;

/// The partial sums of the reductions: one accumulation value per block of the first pass.
/// Allocated with the backend at its largest size (the grid is capped at [`MAX_BLOCKS`], so it
/// never has to grow), and locked from a reduction's first launch to its copy back, so
/// concurrent reductions on one backend cannot overwrite each other's partials.
pub(crate) struct Blas1Workspace {
    partials: Mutex<CudaSlice<u8>>,
}

impl Blas1Workspace {
    pub(crate) fn new(device: &Device) -> Result<Self> {
        let partials = device
            .stream
            .alloc_zeros::<u8>(MAX_BLOCKS as usize * size_of::<f64>())
            .map_err(|e| driver_error("allocating the BLAS-1 workspace", e))?;
        Ok(Blas1Workspace {
            partials: Mutex::new(partials),
        })
    }

    fn lock(&self) -> MutexGuard<'_, CudaSlice<u8>> {
        self.partials
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Length and element stride of an n x 1 vector.
fn vector_shape<T>(v: &DenseRef<'_, T>, context: &str) -> Result<(u32, u32)> {
    v.expect_shape(context, (v.rows(), 1))?;
    let n = to_u32(&format!("{context} length"), v.rows())?;
    to_u32(&format!("{context} leading dimension"), v.ld())?;
    Ok((n, strides(v.layout(), v.ld()).0))
}

fn kernel_suffix<T: Scalar>() -> Result<&'static str> {
    suffix(T::DTYPE)
        .ok_or_else(|| Error::invalid(format!("no CUDA BLAS-1 kernel for {}", T::DTYPE)))
}

/// Blocks for n elements, one per BLOCK elements up to MAX_BLOCKS (at least one).
fn blocks(n: u32) -> u32 {
    n.div_ceil(BLOCK).clamp(1, MAX_BLOCKS)
}

fn config(blocks: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl CudaBackend {
    /// `sum_i x_i * y_i` of two n x 1 device vectors.
    pub fn dot<T: Scalar>(&self, x: DenseRef<'_, T>, y: DenseRef<'_, T>) -> Result<f64> {
        let (n, incx) = vector_shape(&x, "dot x")?;
        y.expect_shape("dot y", (x.rows(), 1))?;
        let (_, incy) = vector_shape(&y, "dot y")?;
        let sfx = kernel_suffix::<T>()?;
        let xb = input(&x, self.device(), "dot x")?;
        let yb = input(&y, self.device(), "dot y")?;
        if n == 0 {
            return Ok(0.0);
        }
        let function = self
            .device()
            .function(sources::BLAS1, &format!("dot_partial_{sfx}"))?;
        let mut partials = self.blas1.lock();
        let mut args = self.device().stream.launch_builder(&function);
        args.arg(&n)
            .arg(&xb.bytes)
            .arg(&incx)
            .arg(&yb.bytes)
            .arg(&incy)
            .arg(&mut *partials);
        // SAFETY: arguments match the kernel; x and y hold n elements at their strides (checked
        // by the Dense views); the partials hold MAX_BLOCKS >= blocks(n) values.
        unsafe { args.launch(config(blocks(n))) }.map_err(|e| driver_error("dot", e))?;
        self.sum_partials::<T>(&mut partials, blocks(n))
    }

    /// `sqrt(sum_i x_i^2)` of an n x 1 device vector, without scaling against overflow (the sum
    /// of squares is formed in the accumulation type, the square root taken in f64).
    pub fn nrm2<T: Scalar>(&self, x: DenseRef<'_, T>) -> Result<f64> {
        let (n, incx) = vector_shape(&x, "nrm2 x")?;
        let sfx = kernel_suffix::<T>()?;
        let xb = input(&x, self.device(), "nrm2 x")?;
        if n == 0 {
            return Ok(0.0);
        }
        let function = self
            .device()
            .function(sources::BLAS1, &format!("nrm2_partial_{sfx}"))?;
        let mut partials = self.blas1.lock();
        let mut args = self.device().stream.launch_builder(&function);
        args.arg(&n).arg(&xb.bytes).arg(&incx).arg(&mut *partials);
        // SAFETY: as in dot, for x alone.
        unsafe { args.launch(config(blocks(n))) }.map_err(|e| driver_error("nrm2", e))?;
        Ok(self.sum_partials::<T>(&mut partials, blocks(n))?.sqrt())
    }

    /// `y += a*x` on n x 1 device vectors; nothing happens when `a == 0`.
    pub fn axpy<T: Scalar>(
        &self,
        a: T::Acc,
        x: DenseRef<'_, T>,
        mut y: DenseMut<'_, T>,
    ) -> Result<()> {
        let (n, incx) = vector_shape(&x, "axpy x")?;
        y.expect_shape("axpy y", (x.rows(), 1))?;
        let (_, incy) = vector_shape(&y.as_ref(), "axpy y")?;
        let sfx = kernel_suffix::<T>()?;
        let xb = input(&x, self.device(), "axpy x")?;
        let yb = output(&mut y, self.device(), "axpy y")?;
        let a = Accumulator::to_f64(a);
        if n == 0 || a == 0.0 {
            return Ok(());
        }
        let function = self
            .device()
            .function(sources::BLAS1, &format!("axpy_{sfx}"))?;
        let a = AccArg::of::<T>(a);
        let mut args = self.device().stream.launch_builder(&function);
        args.arg(&n);
        a.push(&mut args);
        args.arg(&xb.bytes).arg(&incx).arg(&mut yb.bytes).arg(&incy);
        // SAFETY: arguments match the kernel; x and y hold n elements at their strides (checked
        // by the Dense views) in distinct buffers (y is borrowed mutably).
        unsafe { args.launch(config(blocks(n))) }.map_err(|e| driver_error("axpy", e))?;
        Ok(())
    }

    /// `x = a*x` on an n x 1 device vector; `a == 0` writes zeros without reading x (NaN does
    /// not survive), as `beta == 0` does throughout the library.
    pub fn scal<T: Scalar>(&self, a: T::Acc, mut x: DenseMut<'_, T>) -> Result<()> {
        let (n, incx) = vector_shape(&x.as_ref(), "scal x")?;
        let sfx = kernel_suffix::<T>()?;
        let xb = output(&mut x, self.device(), "scal x")?;
        if n == 0 {
            return Ok(());
        }
        let function = self
            .device()
            .function(sources::BLAS1, &format!("scal_{sfx}"))?;
        let a = AccArg::of::<T>(Accumulator::to_f64(a));
        let mut args = self.device().stream.launch_builder(&function);
        args.arg(&n);
        a.push(&mut args);
        args.arg(&mut xb.bytes).arg(&incx);
        // SAFETY: arguments match the kernel; x holds n elements at stride incx.
        unsafe { args.launch(config(blocks(n))) }.map_err(|e| driver_error("scal", e))?;
        Ok(())
    }

    /// The second pass: one block sums the `count` partials left by a first pass into the first
    /// slot, which is copied to the host (waiting for the stream).
    fn sum_partials<T: Scalar>(&self, partials: &mut CudaSlice<u8>, count: u32) -> Result<f64> {
        let sfx = kernel_suffix::<T>()?;
        let function = self
            .device()
            .function(sources::BLAS1, &format!("sum_partials_{sfx}"))?;
        let stream = &self.device().stream;
        let mut args = stream.launch_builder(&function);
        args.arg(&count).arg(&mut *partials);
        // SAFETY: the first pass wrote `count` partials earlier on this stream.
        unsafe { args.launch(config(1)) }.map_err(|e| driver_error("sum_partials", e))?;
        let mut total = [0u8; 8];
        let bytes = size_of::<T::Acc>();
        stream
            .memcpy_dtoh(&partials.slice(..bytes), &mut total[..bytes])
            .map_err(|e| driver_error("copying a reduction to the host", e))?;
        self.device().synchronize()?;
        let [b0, b1, b2, b3, ..] = total;
        Ok(if bytes == 8 {
            f64::from_ne_bytes(total)
        } else {
            f64::from(f32::from_ne_bytes([b0, b1, b2, b3]))
        })
    }
}
