//! The three families, one per operation, each running the cuSPARSE algorithm of its table row
//! on the scaffold of `crate::plan` (which binds the operands, answers `alpha == 0`, checks
//! widths, writes value updates and keeps the [`sparse_core::PlanInfo`]).
//!
//! - SpMV knows its vector lengths at plan time: the workspace (`_bufferSize`) and the staging
//!   of strided vectors are sized then.
//! - SpMM and SDDMM size their workspace at plan time for the reserved width (N or K): the
//!   largest cuSPARSE asks for with the two dense operands in every pair of layouts and the
//!   smallest leading dimensions. `reserve` grows it. A run asks cuSPARSE again only when its
//!   dense shapes change; one that needs more workspace than the plan holds (larger leading
//!   dimensions) is refused with `Error::Unsupported`, and the next `reserve` (of any width)
//!   grows the workspace to what it needed too.
//! - `_preprocess` runs on the first run, again when the dense shapes change, and after
//!   `update_values` (except in SDDMM, which reads only S's pattern).

use std::ffi::c_void;

use cudarc::cusparse::sys;
use sparse_core::{Accumulator, BackendKind, Error, Layout, Result, Scalar};

use super::library::{call, check, index, DnShape, DnSlot, DnVec};
use super::plan::{scalar_ptr, unit_stride, write_back, Matrix, Started, Vendor, NON_TRANSPOSE};
use super::table::{Entry, VendorAlg};
use crate::device::{CudaBuffer, Device};
use crate::operand::{Bound, Run, SddmmOperands, SpmmOperands, SpmvOperands};
use crate::plan::{
    CudaPlan, Kernels, Phase, PlanBase, SddmmKernels, SpmmKernels, SpmvKernels, Values,
};

fn wrong_algorithm(entry: &Entry) -> Error {
    Error::internal(format!(
        "the cusparse table maps {} {} {} to {}",
        entry.op,
        entry.format,
        entry.algorithm,
        entry.vendor.name()
    ))
}

/// `y = alpha*A*x + beta*y` through `cusparseSpMV`.
pub(super) struct SpmvFamily<T: Scalar> {
    /// Declared before `a`, whose arrays its descriptor points at.
    call: Option<SpmvCall<T>>,
    a: Matrix<T>,
}

struct SpmvCall<T: Scalar> {
    vendor: Vendor,
    alg: sys::cusparseSpMVAlg_t,
    /// Descriptors of x (cols) and y (rows), pointed at each run's vectors.
    x: DnVec,
    y: DnVec,
    /// Unit-stride copies of a strided x and y, as long as cuSPARSE's (padded) columns and
    /// rows.
    x_staging: CudaBuffer<T>,
    y_staging: CudaBuffer<T>,
    preprocessed: bool,
}

impl<T: Scalar> SpmvCall<T> {
    fn bytes(&self) -> usize {
        use sparse_core::DeviceMemory;
        self.vendor.workspace_bytes()
            + (self.x_staging.len() + self.y_staging.len()) * size_of::<T>()
    }
}

/// The SpMV plan started as `started`.
pub(super) fn plan_spmv<T: Scalar>(started: Started<T>) -> Result<CudaPlan<T, SpmvFamily<T>>> {
    let VendorAlg::Spmv(alg) = started.entry.vendor else {
        return Err(wrong_algorithm(started.entry));
    };
    let Started {
        base,
        mut clock,
        a,
        vendor,
        ..
    } = started;
    let device = &base.device;
    let call = match vendor {
        None => None,
        Some(mut vendor) => {
            let (rows, cols) = a.vendor_shape();
            // Until a run points them at its vectors the descriptors point at A's values, a
            // live device address that _bufferSize never dereferences.
            let placeholder = a.value_buffer().address();
            // SAFETY: as above; every run points both descriptors at its vectors before
            // cuSPARSE reads or writes one.
            let (x, y) = unsafe {
                (
                    DnVec::new(device, index("columns", cols)?, placeholder, vendor.values)?,
                    DnVec::new(device, index("rows", rows)?, placeholder, vendor.values)?,
                )
            };
            let (one, zero) = (T::Acc::ONE, T::Acc::ZERO);
            let mut bytes = 0;
            vendor.handle.with(|h| {
                // SAFETY: the descriptors are live; _bufferSize reads no element.
                unsafe {
                    call!(
                        device,
                        cusparseSpMV_bufferSize(
                            h,
                            NON_TRANSPOSE,
                            scalar_ptr(&one),
                            vendor.mat.raw().cast_const(),
                            x.raw().cast_const(),
                            scalar_ptr(&zero),
                            y.raw(),
                            vendor.compute,
                            alg,
                            &mut bytes,
                        )
                    )
                }
            })?;
            vendor.grow(device, bytes)?;
            Some(SpmvCall {
                vendor,
                alg,
                x,
                y,
                x_staging: device.zeros(cols)?,
                y_staging: device.zeros(rows)?,
                preprocessed: false,
            })
        }
    };
    clock.lap(device, Phase::Device)?;
    let bytes = a.bytes() + call.as_ref().map_or(0, SpmvCall::bytes);
    Ok(base.into_plan(clock, bytes, SpmvFamily { call, a }))
}

impl<T: Scalar> Kernels<T> for SpmvFamily<T> {
    fn values(&self) -> Values<'_, T> {
        self.a.values()
    }

    fn values_updated(&mut self) {
        if let Some(call) = &mut self.call {
            call.preprocessed = false;
        }
    }
}

impl<T: Scalar> SpmvKernels<T> for SpmvFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmvOperands, T::Acc>) -> Result<()> {
        let (x, y, alpha, beta) = (run.ops.x, run.ops.y, run.alpha, run.beta);
        let Some(call) = self.call.as_mut() else {
            return base.scale(&y, beta);
        };
        let device = &base.device;
        let zero_beta = beta == T::Acc::ZERO;
        let (rows, cols) = self.a.vendor_shape();
        let x_unit = unit_stride(device, &x, &call.x_staging, (cols, true))?;
        let y_unit = unit_stride(device, &y, &call.y_staging, (rows, !zero_beta))?;
        let handle = call.vendor.handle.clone();
        handle.with(|h| {
            // SAFETY: x_unit and y_unit address cols and rows contiguous elements on this
            // device (the operands or the plan's staging), live through the calls, which are
            // ordered on the handle's stream; the workspace was sized by _bufferSize for these
            // descriptors.
            unsafe {
                call.x.set_values(device, x_unit.address)?;
                call.y.set_values(device, y_unit.address)?;
                let (a, xd, yd) = (
                    call.vendor.mat.raw().cast_const(),
                    call.x.raw().cast_const(),
                    call.y.raw(),
                );
                let (alpha, beta_ptr) = (scalar_ptr(&alpha), scalar_ptr(&beta));
                let (compute, workspace) = (call.vendor.compute, call.vendor.workspace(device));
                let alg = call.alg;
                // The analysis and the product take the same arguments.
                let spmv = |name, f: unsafe fn(_, _, _, _, _, _, _, _, _, _) -> _| {
                    let status = f(
                        h,
                        NON_TRANSPOSE,
                        alpha,
                        a,
                        xd,
                        beta_ptr,
                        yd,
                        compute,
                        alg,
                        workspace,
                    );
                    check(name, status, device)
                };
                if !call.preprocessed {
                    spmv("cusparseSpMV_preprocess", sys::cusparseSpMV_preprocess)?;
                    call.preprocessed = true;
                }
                if zero_beta {
                    base.scale(&y_unit, beta)?;
                }
                spmv("cusparseSpMV", sys::cusparseSpMV)
            }
        })?;
        write_back::<T>(device, &y_unit, &y)
    }
}

/// The two dense descriptors of an SpMM (B, C) or an SDDMM (X, Y^T).
type Descriptors = (sys::cusparseDnMatDescr_t, sys::cusparseDnMatDescr_t);

/// alpha and beta, host pointers of the compute type.
type Scalars = (*const c_void, *const c_void);

/// cuSPARSE's SpMM or SDDMM: a sparse matrix and two dense ones, through `_bufferSize`,
/// `_preprocess` and the operation.
///
/// The `unsafe` methods take descriptors of dense matrices that lie on the device, live
/// through the call, and a workspace sized by `buffer_size` for them (which reads no element).
pub(super) trait DenseOp: Send + Sized {
    /// The names of the dense operands, for errors.
    const OPERANDS: (&'static str, &'static str);

    /// Whether `_preprocess` reads A's values, so that a value update must run it again (SDDMM
    /// reads only S's pattern).
    const ANALYSES_VALUES: bool;

    /// The operation running the algorithm of a table row, or `None` for another operation's.
    fn of(vendor: VendorAlg) -> Option<Self>;

    /// The dense operands' shapes, in `layouts` with the smallest leading dimensions, for a
    /// sparse matrix of `rows x cols` at `width` (N or K).
    fn tight(
        rows: usize,
        cols: usize,
        width: usize,
        layouts: (Layout, Layout),
    ) -> Result<(DnShape, DnShape)>;

    /// # Safety
    /// As the trait says.
    unsafe fn buffer_size(
        &self,
        h: sys::cusparseHandle_t,
        device: &Device,
        vendor: &Vendor,
        d: Descriptors,
        scalars: Scalars,
    ) -> Result<usize>;

    /// `_preprocess` (the analysis runs use) or the operation itself.
    ///
    /// # Safety
    /// As the trait says.
    unsafe fn enqueue(
        &self,
        step: Step,
        h: sys::cusparseHandle_t,
        device: &Device,
        vendor: &Vendor,
        d: Descriptors,
        scalars: Scalars,
    ) -> Result<()>;
}

/// What [`DenseOp::enqueue`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Preprocess,
    Compute,
}

/// A [`DenseOp`]: the struct holding its cuSPARSE algorithm and the table's variant of it, the
/// names of its dense operands, whether its analysis reads A's values, its dense shapes
/// (`tight`), and its calls of its three entry points, which take the same arguments but the
/// last: the three matrices are given as `|vendor, descriptors| (first, second, third)`, in the
/// order of cuSPARSE's signature.
macro_rules! dense_op {
    (
        $(#[$meta:meta])*
        $name:ident($alg:ty) from $variant:ident, operands $operands:expr, analyses values $analyses:expr,
        tight |$rows:ident, $cols:ident, $width:ident, ($l1:ident, $l2:ident)| $tight:expr,
        entry points $buffer_size:ident, $preprocess:ident, $compute:ident,
        |$v:ident, $d:ident| ($first:expr, $second:expr, $third:expr)
    ) => {
        $(#[$meta])*
        pub(super) struct $name($alg);

        impl DenseOp for $name {
            const OPERANDS: (&'static str, &'static str) = $operands;
            const ANALYSES_VALUES: bool = $analyses;

            fn of(vendor: VendorAlg) -> Option<Self> {
                match vendor {
                    VendorAlg::$variant(alg) => Some($name(alg)),
                    _ => None,
                }
            }

            fn tight(
                $rows: usize,
                $cols: usize,
                $width: usize,
                ($l1, $l2): (Layout, Layout),
            ) -> Result<(DnShape, DnShape)> {
                Ok($tight)
            }

            unsafe fn buffer_size(
                &self,
                h: sys::cusparseHandle_t,
                device: &Device,
                $v: &Vendor,
                $d: Descriptors,
                (alpha, beta): Scalars,
            ) -> Result<usize> {
                let ((a, b, c), n, mut bytes) = (($first, $second, $third), NON_TRANSPOSE, 0);
                call!(
                    device,
                    $buffer_size(h, n, n, alpha, a, b, beta, c, $v.compute, self.0, &mut bytes)
                )?;
                Ok(bytes)
            }

            unsafe fn enqueue(
                &self,
                step: Step,
                h: sys::cusparseHandle_t,
                device: &Device,
                $v: &Vendor,
                $d: Descriptors,
                (alpha, beta): Scalars,
            ) -> Result<()> {
                // The two take the same arguments, so one fn pointer type holds either.
                let (name, f): (&str, unsafe fn(_, _, _, _, _, _, _, _, _, _, _) -> _) = match step {
                    Step::Preprocess => (stringify!($preprocess), sys::$preprocess),
                    Step::Compute => (stringify!($compute), sys::$compute),
                };
                let ((a, b, c), n, w) = (
                    ($first, $second, $third),
                    NON_TRANSPOSE,
                    $v.workspace(device),
                );
                check(
                    name,
                    f(h, n, n, alpha, a, b, beta, c, $v.compute, self.0, w),
                    device,
                )
            }
        }
    };
}

dense_op!(
    /// `C = alpha*A*B + beta*C`: B and C as they are, in either layout.
    Spmm(sys::cusparseSpMMAlg_t) from Spmm, operands ("B", "C"), analyses values true,
    tight |rows, cols, width, (b, c)| (DnShape::tight((cols, width), b, "B")?, DnShape::tight((rows, width), c, "C")?),
    entry points cusparseSpMM_bufferSize, cusparseSpMM_preprocess, cusparseSpMM,
    |v, d| (v.mat.raw().cast_const(), d.0.cast_const(), d.1)
);

dense_op!(
    /// `C = alpha*(X*Y^T) ∘ spy(S) + beta*C`, C being the values of S's descriptor. Y^T is
    /// handed to cuSPARSE as Y's memory read in the other order, so both dense operands are
    /// non-transposed whatever their layouts. Its analysis reads only S's pattern.
    Sddmm(sys::cusparseSDDMMAlg_t) from Sddmm, operands ("X", "Y^T"), analyses values false,
    tight |rows, cols, width, (x, y)| (DnShape::tight((rows, width), x, "X")?, DnShape::tight((cols, width), y, "Y")?.transposed()),
    entry points cusparseSDDMM_bufferSize, cusparseSDDMM_preprocess, cusparseSDDMM,
    |v, d| (d.0.cast_const(), d.1.cast_const(), v.mat.raw())
);

/// The cuSPARSE state of an SpMM or SDDMM plan whose matrix has entries.
struct DenseCall<O> {
    op: O,
    vendor: Vendor,
    /// The dense descriptors, kept across runs: re-pointed while the shapes stay.
    first: DnSlot,
    second: DnSlot,
    /// The dense shapes of the last `_preprocess`; `None` when an analysis is due.
    prepared: Option<(DnShape, DnShape)>,
    /// The largest workspace a run was refused for: the next `reserve` grows to it.
    refused: usize,
}

const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];

impl<O: DenseOp> DenseCall<O> {
    /// The largest workspace cuSPARSE asks for at any width up to `width` with the dense
    /// operands in every pair of layouts, for a sparse matrix of `rows x cols`: the widths
    /// asked are the powers of two below `width` and `width` itself, since the size is not
    /// monotonic in the width (CSR_ALG3 asks more at N = 1 than at N = 256, cuSPARSE 12.6.3).
    /// The descriptors measured point at `placeholder`, any live device address: _bufferSize
    /// reads no element.
    fn widest<T: Scalar>(
        &self,
        device: &Device,
        placeholder: u64,
        (rows, cols): (usize, usize),
        width: usize,
    ) -> Result<usize> {
        let (one, zero) = (T::Acc::ONE, T::Acc::ZERO);
        let widths = std::iter::successors(Some(1usize), |w| w.checked_mul(2))
            .take_while(|&w| w < width)
            .chain((width > 0).then_some(width));
        let mut widest = 0;
        for width in widths {
            for first in LAYOUTS {
                for second in LAYOUTS {
                    let shapes = O::tight(rows, cols, width, (first, second))?;
                    let (mut d1, mut d2) = (DnSlot::default(), DnSlot::default());
                    let bytes = self.vendor.handle.with(|h| {
                        // SAFETY: the descriptors point at live device memory and are only
                        // measured.
                        unsafe {
                            let d = (
                                d1.point(device, shapes.0, placeholder, self.vendor.values)?,
                                d2.point(device, shapes.1, placeholder, self.vendor.values)?,
                            );
                            self.op.buffer_size(
                                h,
                                device,
                                &self.vendor,
                                d,
                                (scalar_ptr(&one), scalar_ptr(&zero)),
                            )
                        }
                    })?;
                    widest = widest.max(bytes);
                }
            }
        }
        Ok(widest)
    }

    /// Runs the operation with the dense operands at `addresses` in `shapes`, writing `out`;
    /// analyses first when the shapes changed. `beta == 0` zeroes `out` first.
    ///
    /// # Safety
    /// `addresses` hold matrices of `shapes` on the device (bound operands), and the sparse
    /// descriptor's values address `out`'s elements when the output is sparse (SDDMM).
    unsafe fn run<T: Scalar>(
        &mut self,
        base: &PlanBase<T>,
        shapes: (DnShape, DnShape),
        addresses: (u64, u64),
        out: &Bound,
        alpha: T::Acc,
        beta: T::Acc,
    ) -> Result<()> {
        let device = &base.device;
        let handle = self.vendor.handle.clone();
        handle.with(|h| {
            // SAFETY: the caller's operands, live through the calls, which are ordered on the
            // handle's stream; the workspace is what _bufferSize asked for these shapes or more.
            unsafe {
                let d = (
                    self.first
                        .point(device, shapes.0, addresses.0, self.vendor.values)?,
                    self.second
                        .point(device, shapes.1, addresses.1, self.vendor.values)?,
                );
                let scalars = (scalar_ptr(&alpha), scalar_ptr(&beta));
                if self.prepared != Some(shapes) {
                    self.prepared = None;
                    let need = self.op.buffer_size(h, device, &self.vendor, d, scalars)?;
                    let held = self.vendor.workspace_bytes();
                    if need > held {
                        self.refused = self.refused.max(need);
                        return Err(short_workspace::<O>(base, shapes, need, held));
                    }
                    self.op
                        .enqueue(Step::Preprocess, h, device, &self.vendor, d, scalars)?;
                    self.prepared = Some(shapes);
                }
                if beta == T::Acc::ZERO {
                    base.scale(out, beta)?;
                }
                self.op
                    .enqueue(Step::Compute, h, device, &self.vendor, d, scalars)
            }
        })
    }
}

/// A run refused because cuSPARSE asks for more workspace than the plan holds: a typed
/// refusal of this operand layout (the vendor's workspace depends on the leading dimensions,
/// which the plan could not know), which `reserve` lifts.
fn short_workspace<O: DenseOp>(
    base: &PlanBase<impl Scalar>,
    shapes: (DnShape, DnShape),
    need: usize,
    held: usize,
) -> Error {
    let (info, (first, second)) = (&base.info, O::OPERANDS);
    Error::Unsupported {
        op: info.op,
        format: info.format,
        precision: info.precision,
        algorithm: Some(info.algorithm),
        backend: BackendKind::Cusparse,
        supported: format!(
            "these operands only after the plan's reserve({}): cuSPARSE asks for {need} bytes \
             of workspace for {first} ({}) and {second} ({}), past the {held} bytes planned for \
             the smallest leading dimensions",
            info.reserved_width, shapes.0, shapes.1
        ),
    }
}

/// An SpMM (`O` = [`Spmm`]) or SDDMM ([`Sddmm`]) through cuSPARSE.
pub(super) struct DenseFamily<T: Scalar, O> {
    /// Declared before `a`, whose arrays its descriptor points at. `None` when A holds no
    /// entry: runs then only scale the output.
    call: Option<DenseCall<O>>,
    a: Matrix<T>,
    entry: &'static Entry,
}

/// S's values are never read by SDDMM (cuSPARSE's multiplies by S's pattern), so there the
/// plan's value buffer, which `update_values` writes, also serves as the staging of a strided C.
impl<T: Scalar, O: DenseOp> Kernels<T> for DenseFamily<T, O> {
    fn values(&self) -> Values<'_, T> {
        self.a.values()
    }

    fn values_updated(&mut self) {
        if let Some(call) = self.call.as_mut().filter(|_| O::ANALYSES_VALUES) {
            call.prepared = None;
        }
    }

    /// Grows the workspace for `width`, and to what a refused run asked for.
    fn reserve(&mut self, base: &PlanBase<T>, width: usize) -> Result<usize> {
        let Some(call) = &mut self.call else {
            return Ok(0);
        };
        let device = &base.device;
        let placeholder = self.a.value_buffer().address();
        let widest = call.widest::<T>(device, placeholder, (base.rows, base.cols), width)?;
        let grown = call.vendor.grow(device, widest.max(call.refused))?;
        if grown > 0 {
            // The analysis lived in the workspace that was replaced.
            call.prepared = None;
        }
        Ok(grown)
    }
}

/// The SpMM or SDDMM plan (`O` says which) started as `started`.
pub(super) fn plan_dense<T: Scalar, O: DenseOp>(
    started: Started<T>,
) -> Result<CudaPlan<T, DenseFamily<T, O>>> {
    let op = O::of(started.entry.vendor).ok_or_else(|| wrong_algorithm(started.entry))?;
    let Started {
        entry,
        base,
        mut clock,
        a,
        vendor,
    } = started;
    let device = &base.device;
    let mut family = DenseFamily {
        call: vendor.map(|vendor| DenseCall {
            op,
            vendor,
            first: DnSlot::default(),
            second: DnSlot::default(),
            prepared: None,
            refused: 0,
        }),
        a,
        entry,
    };
    let workspace = family.reserve(&base, base.info.reserved_width)?;
    clock.lap(device, Phase::Device)?;
    let bytes = family.a.bytes() + workspace;
    Ok(base.into_plan(clock, bytes, family))
}

pub(super) type SpmmFamily<T> = DenseFamily<T, Spmm>;
pub(super) type SddmmFamily<T> = DenseFamily<T, Sddmm>;

impl<T: Scalar> SpmmKernels<T> for SpmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmmOperands, T::Acc>) -> Result<()> {
        let Run { ops, alpha, beta } = *run;
        let Some(call) = self.call.as_mut() else {
            return base.scale(&ops.c, beta);
        };
        let entry = self.entry;
        if entry.refuses_odd_ld(T::DTYPE, &ops) {
            return Err(Error::Unsupported {
                op: entry.op,
                format: entry.format,
                precision: base.info.precision,
                algorithm: Some(entry.algorithm),
                backend: BackendKind::Cusparse,
                supported: format!(
                    "it with row-major B and C only at even leading dimensions ({} faults on \
                     odd ones), not at {} and {}",
                    entry.vendor.name(),
                    ops.b.ld,
                    ops.c.ld
                ),
            });
        }
        let shapes = (DnShape::of(&ops.b, "B")?, DnShape::of(&ops.c, "C")?);
        // SAFETY: B and C are bound operands of this device with these shapes.
        unsafe {
            call.run(
                base,
                shapes,
                (ops.b.address, ops.c.address),
                &ops.c,
                alpha,
                beta,
            )
        }
    }
}

impl<T: Scalar> SddmmKernels<T> for SddmmFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        let Run { ops, alpha, beta } = *run;
        let Some(call) = self.call.as_mut().filter(|_| ops.k > 0) else {
            return base.scale(&ops.c, beta);
        };
        let device = &base.device;
        let c = unit_stride(
            device,
            &ops.c,
            self.a.value_buffer(),
            (ops.c.rows, beta != T::Acc::ZERO),
        )?;
        let shapes = (
            DnShape::of(&ops.x, "X")?,
            DnShape::of(&ops.y, "Y")?.transposed(),
        );
        // SAFETY: X and Y are bound operands of this device with these shapes (Y^T being Y's
        // memory read in the other order); `c` holds nnz contiguous elements (C or the
        // staging), where S's descriptor points from here on.
        unsafe {
            call.vendor.mat.set_values(device, c.address)?;
            call.run(
                base,
                shapes,
                (ops.x.address, ops.y.address),
                &c,
                alpha,
                beta,
            )?;
        }
        write_back::<T>(device, &c, &ops.c)
    }
}
