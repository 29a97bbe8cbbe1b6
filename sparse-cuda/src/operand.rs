//! Dense operands bound for a launch: shapes checked against the plan, the buffer behind each
//! found on the plan's device, and leading dimensions converted to the kernels' `u32` without
//! truncation. Kernels index with 64-bit offsets, so only the strides themselves must fit.

use std::sync::Arc;

use sparse_core::{DenseMut, DenseRef, Error, Layout, Memory, MemoryMut, Result, Scalar};

use crate::device::{CudaBuffer, Device};
use crate::kernel::{kernel_params, MutPtr, Ptr};

/// A dense operand as a kernel sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bound {
    pub address: u64,
    pub rows: usize,
    pub cols: usize,
    pub layout: Layout,
    /// The leading dimension, or the contiguous extent when there is one row (row-major) or
    /// one column (column-major), whose leading dimension nothing reads.
    pub ld: u32,
}

impl Bound {
    fn new(
        address: u64,
        rows: usize,
        cols: usize,
        ld: usize,
        layout: Layout,
        context: &str,
    ) -> Result<Self> {
        let (outer, inner) = match layout {
            Layout::RowMajor => (rows, cols),
            Layout::ColMajor => (cols, rows),
        };
        let ld = if outer <= 1 { inner.max(1) } else { ld };
        Ok(Bound {
            address,
            rows,
            cols,
            layout,
            ld: to_u32(&format!("{context} leading dimension"), ld)?,
        })
    }

    /// (row stride, column stride) in elements.
    pub fn strides(&self) -> (u32, u32) {
        match self.layout {
            Layout::RowMajor => (self.ld, 1),
            Layout::ColMajor => (1, self.ld),
        }
    }

    /// The stride between consecutive elements of an n x 1 vector.
    pub fn increment(&self) -> u32 {
        self.strides().0
    }

    /// Rows are contiguous and their leading dimension a multiple of `run`, so `run`
    /// consecutive elements of a row starting at a multiple of `run` are one aligned vector
    /// (allocations are 256-byte aligned).
    pub fn rows_in_runs(&self, run: usize) -> bool {
        self.layout == Layout::RowMajor && self.ld as usize % run == 0
    }

    pub fn input<T>(&self) -> Ptr<T> {
        Ptr::at(self.address)
    }

    pub fn output<T>(&self) -> MutPtr<T> {
        MutPtr::at(self.address)
    }
}

fn wrong_memory(context: &str, device: &Device, found: String) -> Error {
    Error::WrongMemory {
        context: context.to_string(),
        expected: device.location(),
        found,
    }
}

/// A read-only operand, which must live on `device`.
pub(crate) fn bind_input<T: Scalar>(
    d: &DenseRef<'_, T>,
    device: &Arc<Device>,
    context: &str,
) -> Result<Bound> {
    let buffer = input_buffer(d, device, context)?;
    Bound::new(
        buffer.address(),
        d.rows(),
        d.cols(),
        d.ld(),
        d.layout(),
        context,
    )
}

/// A writable operand, which must live on `device`.
pub(crate) fn bind_output<T: Scalar>(
    d: &mut DenseMut<'_, T>,
    device: &Arc<Device>,
    context: &str,
) -> Result<Bound> {
    let (rows, cols, ld, layout) = (d.rows(), d.cols(), d.ld(), d.layout());
    let location = d.location();
    let address = match d.memory() {
        MemoryMut::Device(m) => match m.as_any_mut().downcast_mut::<CudaBuffer<T>>() {
            Some(buf) if Arc::ptr_eq(buf.device(), device) => buf.address(),
            _ => return Err(wrong_memory(context, device, location)),
        },
        MemoryMut::Host(_) => {
            return Err(wrong_memory(
                context,
                device,
                "host (allocate it with the backend's zeros)".into(),
            ))
        }
    };
    Bound::new(address, rows, cols, ld, layout, context)
}

/// The buffer behind a read-only operand on `device`.
pub(crate) fn input_buffer<'a, T: Scalar>(
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

/// The `len` elements of an `len x 1` operand on the host, copied from `device` when it lives
/// there: for plans that rework new values on the host before they go up.
pub(crate) fn host_column<T: Scalar>(
    d: &DenseRef<'_, T>,
    len: usize,
    device: &Arc<Device>,
    context: &str,
) -> Result<Vec<T>> {
    d.expect_shape(context, (len, 1))?;
    match d.memory() {
        Memory::Host(_) => Ok((0..len).map(|e| d.at(e, 0)).collect()),
        Memory::Device(_) => {
            let all = input_buffer(d, device, context)?.to_host()?;
            let copy = sparse_core::Dense::from_vec(all, len, 1, d.ld(), d.layout())?;
            Ok((0..len).map(|e| copy.as_ref().at(e, 0)).collect())
        }
    }
}

/// A run's bound operands with its scalars.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run<O, A> {
    pub ops: O,
    pub alpha: A,
    pub beta: A,
}

/// The operands of `y = alpha*A*x + beta*y` for a `rows x cols` A: x and y.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpmvOperands {
    pub x: Bound,
    pub y: Bound,
}

kernel_params! {
    /// An SpMV run's vectors as every SpMV kernel reads them: x (cols elements, `incx` apart)
    /// and y (rows, `incy` apart), and the scalars.
    pub(crate) struct SpmvDense<T> {
        x: ptr(T),
        incx: u32,
        y: out(T),
        incy: u32,
        alpha: acc,
        beta: acc,
    }
}

impl<T: Scalar> SpmvDense<T> {
    pub fn new(run: &Run<SpmvOperands, T::Acc>) -> Self {
        let Run { ops, alpha, beta } = *run;
        SpmvDense {
            x: ops.x.input(),
            incx: ops.x.increment(),
            y: ops.y.output(),
            incy: ops.y.increment(),
            alpha,
            beta,
        }
    }
}

pub(crate) fn bind_spmv<T: Scalar, O: Scalar>(
    device: &Arc<Device>,
    (rows, cols): (usize, usize),
    x: &DenseRef<'_, T>,
    y: &mut DenseMut<'_, O>,
) -> Result<SpmvOperands> {
    x.expect_shape("spmv x", (cols, 1))?;
    y.expect_shape("spmv y", (rows, 1))?;
    Ok(SpmvOperands {
        x: bind_input(x, device, "spmv x")?,
        y: bind_output(y, device, "spmv y")?,
    })
}

/// The operands of `C = alpha*A*B + beta*C` for a `rows x cols` A: N, B and C.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SpmmOperands {
    pub n: u32,
    pub b: Bound,
    pub c: Bound,
}

kernel_params! {
    /// An SpMM run's dense operands as every SpMM kernel reads them: B (cols x n) and C
    /// (rows x n) at their strides, and the scalars.
    pub(crate) struct SpmmDense<T> {
        n: u32,
        b: ptr(T),
        b_rs: u32,
        b_cs: u32,
        c: out(Out),
        c_rs: u32,
        c_cs: u32,
        alpha: acc,
        beta: acc,
    }
}

impl<T: Scalar> SpmmDense<T> {
    pub fn new(run: &Run<SpmmOperands, T::Acc>) -> Self {
        let Run { ops, alpha, beta } = *run;
        let ((b_rs, b_cs), (c_rs, c_cs)) = (ops.b.strides(), ops.c.strides());
        SpmmDense {
            n: ops.n,
            b: ops.b.input(),
            b_rs,
            b_cs,
            c: ops.c.output(),
            c_rs,
            c_cs,
            alpha,
            beta,
        }
    }
}

pub(crate) fn bind_spmm<T: Scalar, O: Scalar>(
    device: &Arc<Device>,
    (rows, cols): (usize, usize),
    b: &DenseRef<'_, T>,
    c: &mut DenseMut<'_, O>,
) -> Result<SpmmOperands> {
    let width = b.cols();
    b.expect_shape("spmm B", (cols, width))?;
    c.expect_shape("spmm C", (rows, width))?;
    Ok(SpmmOperands {
        n: to_u32("spmm width (columns of B)", width)?,
        b: bind_input(b, device, "spmm B")?,
        c: bind_output(c, device, "spmm C")?,
    })
}

/// The operands of `C = alpha*(X*Y^T) ∘ spy(S) + beta*C` over a `rows x cols` pattern whose
/// output has `slots` values: K, X, Y and C.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SddmmOperands {
    pub k: u32,
    pub x: Bound,
    pub y: Bound,
    pub c: Bound,
}

kernel_params! {
    /// An SDDMM run's dense operands as every SDDMM kernel reads them: X (rows x k) and Y
    /// (cols x k) at their strides, C (one value per output slot, `c_inc` apart), and the
    /// scalars. The pointers come first, so that the struct holds no padding.
    pub(crate) struct SddmmDense<T> {
        x: ptr(T),
        y: ptr(T),
        c: out(Out),
        k: u32,
        x_rs: u32,
        x_cs: u32,
        y_rs: u32,
        y_cs: u32,
        c_inc: u32,
        alpha: acc,
        beta: acc,
    }
}

impl<T: Scalar> SddmmDense<T> {
    pub fn new(run: &Run<SddmmOperands, T::Acc>) -> Self {
        let Run { ops, alpha, beta } = *run;
        let ((x_rs, x_cs), (y_rs, y_cs)) = (ops.x.strides(), ops.y.strides());
        SddmmDense {
            x: ops.x.input(),
            y: ops.y.input(),
            c: ops.c.output(),
            k: ops.k,
            x_rs,
            x_cs,
            y_rs,
            y_cs,
            c_inc: ops.c.increment(),
            alpha,
            beta,
        }
    }
}

pub(crate) fn bind_sddmm<T: Scalar, O: Scalar>(
    device: &Arc<Device>,
    (rows, cols, slots): (usize, usize, usize),
    x: &DenseRef<'_, T>,
    y: &DenseRef<'_, T>,
    c: &mut DenseMut<'_, O>,
) -> Result<SddmmOperands> {
    let width = x.cols();
    x.expect_shape("sddmm X", (rows, width))?;
    y.expect_shape("sddmm Y", (cols, width))?;
    c.expect_shape("sddmm C", (slots, 1))?;
    Ok(SddmmOperands {
        k: to_u32("sddmm inner dimension (columns of X)", width)?,
        x: bind_input(x, device, "sddmm X")?,
        y: bind_input(y, device, "sddmm Y")?,
        c: bind_output(c, device, "sddmm C")?,
    })
}

/// Attention's operands, bound for a launch.
pub(crate) struct AttentionOperands {
    pub q: Bound,
    pub k: Bound,
    pub v: Bound,
    pub o: Bound,
}

/// Q (rows x w), K (cols x w), V (cols x wv) and O (rows x wv); the heads are the caller's.
pub(crate) fn bind_attention<T: Scalar, O: Scalar>(
    device: &Arc<Device>,
    (rows, cols): (usize, usize),
    q: &DenseRef<'_, T>,
    k: &DenseRef<'_, T>,
    v: &DenseRef<'_, T>,
    o: &mut DenseMut<'_, O>,
) -> Result<AttentionOperands> {
    let (w, wv) = (q.cols(), v.cols());
    q.expect_shape("attention Q", (rows, w))?;
    k.expect_shape("attention K", (cols, w))?;
    v.expect_shape("attention V", (cols, wv))?;
    o.expect_shape("attention O", (rows, wv))?;
    to_u32("attention width (columns of Q)", w)?;
    to_u32("attention width (columns of V)", wv)?;
    Ok(AttentionOperands {
        q: bind_input(q, device, "attention Q")?,
        k: bind_input(k, device, "attention K")?,
        v: bind_input(v, device, "attention V")?,
        o: bind_output(o, device, "attention O")?,
    })
}

/// The attention backward's operands, bound: the forward's inputs and output, dL/dO, and the
/// gradients (dbias only when given).
pub(crate) struct AttentionGradOperands {
    pub q: Bound,
    pub k: Bound,
    pub v: Bound,
    pub o: Bound,
    pub d_o: Bound,
    pub dq: Bound,
    pub dk: Bound,
    pub dv: Bound,
    pub dbias: Option<Bound>,
}

/// The backward's operands for an A of `rows x cols` with `nnz` entries, shapes checked as the
/// forward's (Q, dQ: rows x w; K, dK: cols x w; V, dV: cols x wv; O, dO: rows x wv; dbias:
/// nnz x 1).
pub(crate) fn bind_attention_backward<T: Scalar>(
    device: &Arc<Device>,
    (rows, cols, nnz): (usize, usize, usize),
    g: &mut sparse_core::AttentionBackward<'_, T>,
) -> Result<AttentionGradOperands> {
    let (w, wv) = (g.q.cols(), g.v.cols());
    g.q.expect_shape("attention Q", (rows, w))?;
    g.k.expect_shape("attention K", (cols, w))?;
    g.v.expect_shape("attention V", (cols, wv))?;
    g.o.expect_shape("attention O", (rows, wv))?;
    g.d_o.expect_shape("attention dO", (rows, wv))?;
    g.dq.expect_shape("attention dQ", (rows, w))?;
    g.dk.expect_shape("attention dK", (cols, w))?;
    g.dv.expect_shape("attention dV", (cols, wv))?;
    to_u32("attention width (columns of Q)", w)?;
    to_u32("attention width (columns of V)", wv)?;
    let dbias = match &mut g.dbias {
        Some(db) => {
            db.expect_shape("attention dbias", (nnz, 1))?;
            Some(bind_output(db, device, "attention dbias")?)
        }
        None => None,
    };
    Ok(AttentionGradOperands {
        q: bind_input(&g.q, device, "attention Q")?,
        k: bind_input(&g.k, device, "attention K")?,
        v: bind_input(&g.v, device, "attention V")?,
        o: bind_input(&g.o, device, "attention O")?,
        d_o: bind_input(&g.d_o, device, "attention dO")?,
        dq: bind_output(&mut g.dq, device, "attention dQ")?,
        dk: bind_output(&mut g.dk, device, "attention dK")?,
        dv: bind_output(&mut g.dv, device, "attention dV")?,
        dbias,
    })
}

/// A dimension or index as the kernels' `u32`, or an overflow error with the numbers.
pub(crate) fn to_u32(what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::overflow::<u32>(what, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_dimensions_are_checked_not_truncated() {
        let ld = u32::MAX as usize + 8;
        let bound = |rows, cols, layout| Bound::new(0, rows, cols, ld, layout, "B");
        assert!(matches!(
            bound(2, 3, Layout::RowMajor),
            Err(Error::IndexOverflow { .. })
        ));
        assert!(matches!(
            bound(3, 2, Layout::ColMajor),
            Err(Error::IndexOverflow { .. })
        ));
        // One row (row-major) or one column (column-major): the leading dimension is never read.
        assert_eq!(bound(1, 3, Layout::RowMajor).unwrap().strides(), (3, 1));
        assert_eq!(bound(5, 1, Layout::ColMajor).unwrap().increment(), 1);
        let strided = Bound::new(0, 5, 1, 3, Layout::RowMajor, "x").unwrap();
        assert_eq!(strided.increment(), 3);
        assert!(!strided.rows_in_runs(2) && strided.rows_in_runs(1));
    }
}
