//! BLAS-1 on device vectors of the CUDA backend: `dot`, `nrm2`, `axpy`, `scal` (`blas1.cu`).
//!
//! Vectors are n x 1 [`DenseRef`] / [`DenseMut`] operands made by this backend, in either layout
//! (a row-major n x 1 vector is strided by its leading dimension). Reductions run in the
//! accumulation type of `T` (f32 for f16 and f32, f64 for f64) in two passes with a fixed
//! launch shape for a given n and no atomics, so they are deterministic; the result comes back
//! to the host as f64, which makes these calls synchronous. `axpy` and `scal` only enqueue work.

use std::sync::{Mutex, MutexGuard};

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{Accumulator, DenseMut, DenseRef, Result, Scalar};

use crate::device::Device;
use crate::executor::CudaBackend;
use crate::kernel::{c_type, kernel_params, Entry, KernelParams, KernelSource, KernelSpec, MutPtr};
use crate::operand::{bind_input, bind_output, to_u32, Bound};

/// Threads per block (`BLAS1_BLOCK`).
pub(crate) const BLOCK: u32 = 256;
/// Blocks of the first reduction pass (and of axpy/scal): enough to fill an H100 at 8 blocks
/// per SM, with each thread striding over the rest.
pub(crate) const MAX_BLOCKS: u32 = 1024;
/// Sets of partials the workspace holds: a pass of `vector_ops.rs` may form two sums at once.
pub(crate) const PARTIAL_SETS: usize = 2;

kernel_params! {
    /// `reduce_partial<SQUARE>`: each block's share of `sum x*y` (of `sum x*x` when SQUARE).
    pub(crate) struct Reduce<T> {
        n: u32,
        x: ptr(T),
        incx: u32,
        y: ptr(T),
        incy: u32,
        partial: out(acc),
    }
}

kernel_params! {
    /// `sum_partials`: `partial[0] = sum partial[0..count)`.
    pub(crate) struct SumPartials<T> {
        count: u32,
        partial: out(acc),
    }
}

kernel_params! {
    /// `axpy`: `y += a*x`.
    pub(crate) struct Axpy<T> {
        n: u32,
        a: acc,
        x: ptr(T),
        incx: u32,
        y: out(T),
        incy: u32,
    }
}

kernel_params! {
    /// `scal`: `x = a*x`.
    pub(crate) struct Scal<T> {
        n: u32,
        a: acc,
        x: out(T),
        incx: u32,
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "blas1",
    code: include_str!("../kernels/blas1.cu"),
    params: &[
        <Reduce<f32> as KernelParams>::C_DECL,
        <SumPartials<f32> as KernelParams>::C_DECL,
        <Axpy<f32> as KernelParams>::C_DECL,
        <Scal<f32> as KernelParams>::C_DECL,
    ],
    defines: &[("BLAS1_BLOCK", BLOCK)],
};

fn reduce<T: Scalar>(square: bool) -> Result<Entry<Reduce<T>>> {
    Entry::new(&SOURCE, "reduce_partial", &[&c_type(T::DTYPE)?, &square])
}
fn sum_partials<T: Scalar>() -> Result<Entry<SumPartials<T>>> {
    Entry::new(&SOURCE, "sum_partials", &[&c_type(T::DTYPE)?])
}
fn axpy<T: Scalar>() -> Result<Entry<Axpy<T>>> {
    Entry::new(&SOURCE, "axpy", &[&c_type(T::DTYPE)?])
}
fn scal<T: Scalar>() -> Result<Entry<Scal<T>>> {
    Entry::new(&SOURCE, "scal", &[&c_type(T::DTYPE)?])
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    Ok(vec![
        reduce::<T>(false)?.spec().clone(),
        reduce::<T>(true)?.spec().clone(),
        sum_partials::<T>()?.spec().clone(),
        axpy::<T>()?.spec().clone(),
        scal::<T>()?.spec().clone(),
    ])
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = specs_of::<f64>()?;
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    Ok(specs)
}

/// The partial sums of the reductions: one accumulation value per block of the first pass.
/// Allocated with the backend at its largest size (the grid is capped at [`MAX_BLOCKS`], so it
/// never has to grow), and locked from a reduction's first launch to its copy back, so
/// concurrent reductions on one backend cannot overwrite each other's partials. The reductions
/// of `vector_ops.rs` lock it while they enqueue: their work runs in stream order.
pub(crate) struct Blas1Workspace {
    partials: Mutex<CudaSlice<u8>>,
}

impl Blas1Workspace {
    pub(crate) fn new(device: &Device) -> Result<Self> {
        let partials = device.alloc_zeros::<u8>(
            PARTIAL_SETS * MAX_BLOCKS as usize * size_of::<f64>(),
            "allocating the BLAS-1 workspace",
        )?;
        Ok(Blas1Workspace {
            partials: Mutex::new(partials),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, CudaSlice<u8>> {
        self.partials
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// An n x 1 vector operand and its length.
pub(crate) fn vector<T: Scalar>(
    backend: &CudaBackend,
    v: &DenseRef<'_, T>,
    context: &str,
) -> Result<(u32, Bound)> {
    v.expect_shape(context, (v.rows(), 1))?;
    Ok((
        to_u32(&format!("{context} length"), v.rows())?,
        bind_input(v, backend.device(), context)?,
    ))
}

/// Blocks for n elements, one per BLOCK elements up to MAX_BLOCKS (at least one).
pub(crate) fn config(n: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(BLOCK).clamp(1, MAX_BLOCKS), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl CudaBackend {
    /// `sum_i x_i * y_i` of two n x 1 device vectors.
    pub fn dot<T: Scalar>(&self, x: DenseRef<'_, T>, y: DenseRef<'_, T>) -> Result<f64> {
        y.expect_shape("dot y", (x.rows(), 1))?;
        let (n, xb) = vector(self, &x, "dot x")?;
        let (_, yb) = vector(self, &y, "dot y")?;
        self.reduce::<T>(n, false, &xb, &yb)
    }

    /// `sqrt(sum_i x_i^2)` of an n x 1 device vector, without scaling against overflow (the sum
    /// of squares is formed in the accumulation type, the square root taken in f64).
    pub fn nrm2<T: Scalar>(&self, x: DenseRef<'_, T>) -> Result<f64> {
        let (n, xb) = vector(self, &x, "nrm2 x")?;
        Ok(self.reduce::<T>(n, true, &xb, &xb)?.sqrt())
    }

    /// `y += a*x` on n x 1 device vectors; nothing happens when `a == 0`.
    pub fn axpy<T: Scalar>(
        &self,
        a: T::Acc,
        x: DenseRef<'_, T>,
        mut y: DenseMut<'_, T>,
    ) -> Result<()> {
        y.expect_shape("axpy y", (x.rows(), 1))?;
        let (n, xb) = vector(self, &x, "axpy x")?;
        let yb = bind_output(&mut y, self.device(), "axpy y")?;
        if n == 0 || a == T::Acc::ZERO {
            return Ok(());
        }
        let params = Axpy {
            n,
            a,
            x: xb.input(),
            incx: xb.increment(),
            y: yb.output(),
            incy: yb.increment(),
        };
        // SAFETY: x and y hold n elements at their strides (bound operands) in distinct buffers
        // (y is borrowed mutably).
        unsafe {
            self.device()
                .kernel(&axpy::<T>()?)?
                .launch(config(n), &params)
        }
    }

    /// `x = a*x` on an n x 1 device vector; `a == 0` writes zeros without reading x (NaN does
    /// not survive), as `beta == 0` does throughout the library.
    pub fn scal<T: Scalar>(&self, a: T::Acc, mut x: DenseMut<'_, T>) -> Result<()> {
        x.expect_shape("scal x", (x.rows(), 1))?;
        let n = to_u32("scal x length", x.rows())?;
        let xb = bind_output(&mut x, self.device(), "scal x")?;
        if n == 0 {
            return Ok(());
        }
        let params = Scal {
            n,
            a,
            x: xb.output(),
            incx: xb.increment(),
        };
        // SAFETY: x holds n elements at its stride.
        unsafe {
            self.device()
                .kernel(&scal::<T>()?)?
                .launch(config(n), &params)
        }
    }

    /// Both passes of a reduction over n elements of x (and y unless `square`): one block sums
    /// the first pass's partials into the first slot, which is copied to the host (waiting for
    /// the stream).
    fn reduce<T: Scalar>(&self, n: u32, square: bool, x: &Bound, y: &Bound) -> Result<f64> {
        if n == 0 {
            return Ok(0.0);
        }
        let device = self.device();
        let (first, second) = (
            device.kernel(&reduce::<T>(square)?)?,
            device.kernel(&sum_partials::<T>()?)?,
        );
        let partials = self.blas1.lock();
        let config = config(n);
        let params = Reduce {
            n,
            x: x.input(),
            incx: x.increment(),
            y: y.input(),
            incy: y.increment(),
            partial: MutPtr::of_bytes(&partials, device),
        };
        // SAFETY: x and y hold n elements at their strides (bound operands); the partials hold
        // MAX_BLOCKS >= the grid's blocks values.
        unsafe { first.launch(config, &params)? };
        let params = SumPartials {
            count: config.grid_dim.0,
            partial: MutPtr::of_bytes(&partials, device),
        };
        // SAFETY: the first pass wrote `count` partials earlier on this stream.
        unsafe { second.launch(self::config(1), &params)? };
        let mut total = [0u8; 8];
        let bytes = size_of::<T::Acc>();
        device
            .stream
            .memcpy_dtoh(&partials.slice(..bytes), &mut total[..bytes])
            .map_err(|e| device.error("copying a reduction to the host", e))?;
        device.synchronize()?;
        let [b0, b1, b2, b3, ..] = total;
        Ok(if bytes == 8 {
            f64::from_ne_bytes(total)
        } else {
            f64::from(f32::from_ne_bytes([b0, b1, b2, b3]))
        })
    }
}
