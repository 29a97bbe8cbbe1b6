//! The three plans: one generic plan per operation, its cuSPARSE algorithm taken from the table.
//!
//! SpMV knows its vector lengths at plan time, so its workspace is sized (`_bufferSize`) then;
//! `_preprocess` runs once, on the first run, with that run's operands. SpMM and SDDMM learn
//! their dense shapes (N, K, layouts, leading dimensions) only at run time: the first run with a
//! new shape queries the workspace size for it, grows the workspace only when the new size is
//! larger, and preprocesses again (a grown workspace no longer holds the earlier analysis).

use std::sync::Arc;

use cudarc::cusparse::sys;
use sparse_core::{
    Accumulator, BackendKind, CsrRef, DenseMut, DenseRef, Error, Layout, PlanInfo, Precision,
    Result, Scalar, SddmmPlan, SpIndex, SpmmPlan, SpmvPlan,
};

use super::library::{call, DnShape, DnSlot, DnVec, Handle};
use super::plan::{ptr, scalar_ptr, stride, Common, Contiguous, Runs, Scratch, SparseOnDevice};
use super::table::{describe, Entry, VendorAlg};
use crate::device::Device;
use crate::operand::{input, output, AccArg};

const NON_TRANSPOSE: sys::cusparseOperation_t =
    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;

fn wrong_algorithm(entry: &Entry) -> Error {
    Error::invalid(format!(
        "{} is not an algorithm of {}",
        entry.vendor.name(),
        entry.op
    ))
}

/// alpha and beta in the compute type, and whether each is zero.
fn scalars<T: Scalar>(alpha: T::Acc, beta: T::Acc) -> (AccArg, AccArg, bool, bool) {
    let (alpha, beta) = (Accumulator::to_f64(alpha), Accumulator::to_f64(beta));
    (
        AccArg::of::<T>(alpha),
        AccArg::of::<T>(beta),
        alpha == 0.0,
        beta == 0.0,
    )
}

struct SpmvOp<T> {
    a: SparseOnDevice<T>,
    x: DnVec,
    y: DnVec,
    alg: sys::cusparseSpMVAlg_t,
    preprocessed: bool,
}

/// `y = alpha*A*x + beta*y` through `cusparseSpMV`.
pub struct CusparseSpmvPlan<T> {
    common: Common,
    /// `None` when A holds no entry: a run only scales y.
    op: Option<SpmvOp<T>>,
    x_staging: Scratch,
    y_staging: Scratch,
    shape: (usize, usize),
}

impl<T: Scalar> CusparseSpmvPlan<T> {
    pub(super) fn new<I: SpIndex>(
        device: &Arc<Device>,
        handle: &Arc<Handle>,
        a: CsrRef<'_, T, I>,
        entry: &'static Entry,
        precision: Precision,
    ) -> Result<Self> {
        let VendorAlg::Spmv(alg) = entry.vendor else {
            return Err(wrong_algorithm(entry));
        };
        let sparse = (a.nnz() > 0)
            .then(|| SparseOnDevice::upload(device, a, entry.format))
            .transpose()?;
        let mut common = Common::new::<T>(
            device,
            handle,
            entry,
            precision,
            sparse.as_ref().map_or(0, |s| s.bytes()),
        )?;
        let op = match sparse {
            None => None,
            Some(a) => {
                // The vectors' lengths are known now, so the descriptors (and the workspace size)
                // are too; until the first run points them at its operands they point at A's
                // values, a live device address that _bufferSize never dereferences.
                let placeholder = a.values(device);
                let (one, zero) = (AccArg::of::<T>(1.0), AccArg::of::<T>(0.0));
                let mut bytes = 0;
                // SAFETY: the placeholder is live device memory; the descriptors are only
                // measured here, and every run re-points them before cuSPARSE touches a vector.
                let (x, y) = unsafe {
                    let x = DnVec::new(device, a.shape.1, placeholder, common.values)?;
                    let y = DnVec::new(device, a.shape.0, placeholder, common.values)?;
                    handle.with(|h| {
                        call!(
                            device,
                            cusparseSpMV_bufferSize(
                                h,
                                NON_TRANSPOSE,
                                scalar_ptr(&one),
                                a.mat.raw().cast_const(),
                                x.raw().cast_const(),
                                scalar_ptr(&zero),
                                y.raw(),
                                common.compute,
                                alg,
                                &mut bytes,
                            )
                        )
                    })?;
                    (x, y)
                };
                common.workspace(bytes)?;
                Some(SpmvOp {
                    a,
                    x,
                    y,
                    alg,
                    preprocessed: false,
                })
            }
        };
        common.account(0);
        Ok(CusparseSpmvPlan {
            common,
            op,
            x_staging: Scratch::default(),
            y_staging: Scratch::default(),
            shape: (a.rows(), a.cols()),
        })
    }
}

impl<T: Scalar> SpmvPlan<T> for CusparseSpmvPlan<T> {
    fn info(&self) -> &PlanInfo {
        &self.common.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        mut y: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let (rows, cols) = self.shape;
        x.expect_shape("spmv x", (cols, 1))?;
        y.expect_shape("spmv y", (rows, 1))?;
        let device = self.common.device.clone();
        let x_ptr = ptr(&input(&x, &device, "spmv x")?.bytes, &device);
        let (y_runs, y_stride) = (
            Runs::of(rows, 1, y.ld(), y.layout())?,
            stride(rows, y.ld(), y.layout()),
        );
        let y_ptr = ptr(&output(&mut y, &device, "spmv y")?.bytes, &device);
        let (alpha, beta, alpha_zero, beta_zero) = scalars::<T>(alpha, beta);
        let Some(op) = self.op.as_mut().filter(|_| !alpha_zero) else {
            return self.common.scale(y_ptr, y_runs, beta);
        };
        let elem = size_of::<T>();
        let x = Contiguous::new(
            &device,
            &mut self.x_staging,
            (x_ptr, stride(cols, x.ld(), x.layout())),
            cols,
            elem,
            true,
        )?;
        let y = Contiguous::new(
            &device,
            &mut self.y_staging,
            (y_ptr, y_stride),
            rows,
            elem,
            !beta_zero,
        )?;
        if beta_zero {
            self.common.scale(y.ptr, Runs::contiguous(rows)?, beta)?;
        }
        let (compute, workspace) = (
            self.common.compute,
            self.common.workspace.ptr(&device) as *mut _,
        );
        self.common.handle.with(|h| {
            // SAFETY: x and y address cols and rows contiguous elements on this device (the
            // operands or their staging) and stay live through the calls, which are ordered on
            // the handle's stream; the workspace was sized by _bufferSize for these descriptors.
            unsafe {
                op.x.point(&device, x.ptr)?;
                op.y.point(&device, y.ptr)?;
                let (a, xd, yd) = (
                    op.a.mat.raw().cast_const(),
                    op.x.raw().cast_const(),
                    op.y.raw(),
                );
                let (alpha, beta) = (scalar_ptr(&alpha), scalar_ptr(&beta));
                if !op.preprocessed {
                    call!(
                        &device,
                        cusparseSpMV_preprocess(
                            h,
                            NON_TRANSPOSE,
                            alpha,
                            a,
                            xd,
                            beta,
                            yd,
                            compute,
                            op.alg,
                            workspace
                        )
                    )?;
                    op.preprocessed = true;
                }
                call!(
                    &device,
                    cusparseSpMV(
                        h,
                        NON_TRANSPOSE,
                        alpha,
                        a,
                        xd,
                        beta,
                        yd,
                        compute,
                        op.alg,
                        workspace
                    )
                )
            }
        })?;
        y.write_back(&device, rows, elem)?;
        self.common
            .account(self.x_staging.bytes() + self.y_staging.bytes());
        Ok(())
    }
}

struct DenseOp<T> {
    a: SparseOnDevice<T>,
    first: DnSlot,
    second: DnSlot,
    /// The dense shapes the workspace was sized and preprocessed for.
    prepared: Option<(DnShape, DnShape)>,
}

impl<T: Scalar> DenseOp<T> {
    fn new(a: SparseOnDevice<T>) -> Self {
        DenseOp {
            a,
            first: DnSlot::default(),
            second: DnSlot::default(),
            prepared: None,
        }
    }
}

/// `C = alpha*A*B + beta*C` through `cusparseSpMM`; B and C in either layout, as the algorithm
/// admits.
pub struct CusparseSpmmPlan<T> {
    common: Common,
    op: Option<DenseOp<T>>,
    alg: sys::cusparseSpMMAlg_t,
    shape: (usize, usize),
}

impl<T: Scalar> CusparseSpmmPlan<T> {
    pub(super) fn new<I: SpIndex>(
        device: &Arc<Device>,
        handle: &Arc<Handle>,
        a: CsrRef<'_, T, I>,
        entry: &'static Entry,
        precision: Precision,
    ) -> Result<Self> {
        let VendorAlg::Spmm(alg) = entry.vendor else {
            return Err(wrong_algorithm(entry));
        };
        let op = (a.nnz() > 0)
            .then(|| SparseOnDevice::upload(device, a, entry.format).map(DenseOp::new))
            .transpose()?;
        let common = Common::new::<T>(
            device,
            handle,
            entry,
            precision,
            op.as_ref().map_or(0, |o| o.a.bytes()),
        )?;
        Ok(CusparseSpmmPlan {
            common,
            op,
            alg,
            shape: (a.rows(), a.cols()),
        })
    }
}

impl<T: Scalar> SpmmPlan<T> for CusparseSpmmPlan<T> {
    fn info(&self) -> &PlanInfo {
        &self.common.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let ((rows, cols), n) = (self.shape, b.cols());
        b.expect_shape("spmm B", (cols, n))?;
        c.expect_shape("spmm C", (rows, n))?;
        let device = self.common.device.clone();
        let b_ptr = ptr(&input(&b, &device, "spmm B")?.bytes, &device);
        let c_shape = DnShape::of(&c.as_ref(), "C")?;
        let c_runs = Runs::of(rows, n, c.ld(), c.layout())?;
        let c_ptr = ptr(&output(&mut c, &device, "spmm C")?.bytes, &device);
        let (alpha, beta, alpha_zero, beta_zero) = scalars::<T>(alpha, beta);
        let Some(op) = self.op.as_mut().filter(|_| !alpha_zero && n > 0) else {
            return self.common.scale(c_ptr, c_runs, beta);
        };
        let entry = self.common.entry;
        let odd_rows = |layout: Layout, ld: usize| layout == Layout::RowMajor && ld % 2 == 1;
        if entry.even_ld.contains(&T::DTYPE)
            && n > 1
            && odd_rows(b.layout(), b.ld())
            && odd_rows(c_shape.layout, c.ld())
        {
            return Err(Error::Unsupported {
                op: entry.op,
                format: entry.format,
                precision: self.common.info.precision,
                backend: BackendKind::Cusparse,
                supported: format!(
                    "row-major B and C with leading dimensions {} and {}: {}",
                    b.ld(),
                    c.ld(),
                    describe(entry)
                ),
            });
        }
        if beta_zero {
            self.common.scale(c_ptr, c_runs, beta)?;
        }
        let shapes = (DnShape::of(&b, "B")?, c_shape);
        let (common, alg) = (&mut self.common, self.alg);
        let handle = common.handle.clone();
        handle.with(|h| {
            // SAFETY: B and C are this device's buffers with the shapes described (checked by
            // their geometry); they, A and the workspace (sized by _bufferSize for these shapes)
            // stay live through the calls, which are ordered on the handle's stream.
            unsafe {
                let bd = op
                    .first
                    .point(&device, shapes.0, b_ptr, common.values)?
                    .cast_const();
                let cd = op.second.point(&device, shapes.1, c_ptr, common.values)?;
                let a = op.a.mat.raw().cast_const();
                let (alpha, beta) = (scalar_ptr(&alpha), scalar_ptr(&beta));
                if op.prepared != Some(shapes) {
                    op.prepared = None;
                    let mut bytes = 0;
                    call!(
                        &device,
                        cusparseSpMM_bufferSize(
                            h,
                            NON_TRANSPOSE,
                            NON_TRANSPOSE,
                            alpha,
                            a,
                            bd,
                            beta,
                            cd,
                            common.compute,
                            alg,
                            &mut bytes
                        )
                    )?;
                    let workspace = common.workspace(bytes)?;
                    call!(
                        &device,
                        cusparseSpMM_preprocess(
                            h,
                            NON_TRANSPOSE,
                            NON_TRANSPOSE,
                            alpha,
                            a,
                            bd,
                            beta,
                            cd,
                            common.compute,
                            alg,
                            workspace
                        )
                    )?;
                    op.prepared = Some(shapes);
                }
                let workspace = common.workspace.ptr(&device) as *mut _;
                call!(
                    &device,
                    cusparseSpMM(
                        h,
                        NON_TRANSPOSE,
                        NON_TRANSPOSE,
                        alpha,
                        a,
                        bd,
                        beta,
                        cd,
                        common.compute,
                        alg,
                        workspace
                    )
                )
            }
        })?;
        self.common.account(0);
        Ok(())
    }
}

/// `C = alpha*(X*Y^T) ∘ spy(S) + beta*C` through `cusparseSDDMM`, C being S's values.
///
/// Y^T is handed to cuSPARSE as Y's memory read in the other order, so both dense operands are
/// non-transposed whatever their layouts.
pub struct CusparseSddmmPlan<T> {
    common: Common,
    op: Option<DenseOp<T>>,
    alg: sys::cusparseSDDMMAlg_t,
    c_staging: Scratch,
    shape: (usize, usize, usize),
}

impl<T: Scalar> CusparseSddmmPlan<T> {
    pub(super) fn new<I: SpIndex>(
        device: &Arc<Device>,
        handle: &Arc<Handle>,
        s: CsrRef<'_, T, I>,
        entry: &'static Entry,
        precision: Precision,
    ) -> Result<Self> {
        let VendorAlg::Sddmm(alg) = entry.vendor else {
            return Err(wrong_algorithm(entry));
        };
        // S's own values are uploaded only for the descriptor to have an address until the
        // first run points it at C.
        let op = (s.nnz() > 0)
            .then(|| SparseOnDevice::upload(device, s, entry.format).map(DenseOp::new))
            .transpose()?;
        let common = Common::new::<T>(
            device,
            handle,
            entry,
            precision,
            op.as_ref().map_or(0, |o| o.a.bytes()),
        )?;
        Ok(CusparseSddmmPlan {
            common,
            op,
            alg,
            c_staging: Scratch::default(),
            shape: (s.rows(), s.cols(), s.nnz()),
        })
    }
}

impl<T: Scalar> SddmmPlan<T> for CusparseSddmmPlan<T> {
    fn info(&self) -> &PlanInfo {
        &self.common.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let ((rows, cols, nnz), k) = (self.shape, x.cols());
        x.expect_shape("sddmm X", (rows, k))?;
        y.expect_shape("sddmm Y", (cols, k))?;
        c.expect_shape("sddmm C", (nnz, 1))?;
        let device = self.common.device.clone();
        let x_ptr = ptr(&input(&x, &device, "sddmm X")?.bytes, &device);
        let y_ptr = ptr(&input(&y, &device, "sddmm Y")?.bytes, &device);
        let (c_runs, c_stride) = (
            Runs::of(nnz, 1, c.ld(), c.layout())?,
            stride(nnz, c.ld(), c.layout()),
        );
        let c_ptr = ptr(&output(&mut c, &device, "sddmm C")?.bytes, &device);
        let (alpha, beta, alpha_zero, beta_zero) = scalars::<T>(alpha, beta);
        let Some(op) = self.op.as_mut().filter(|_| !alpha_zero && k > 0) else {
            return self.common.scale(c_ptr, c_runs, beta);
        };
        let elem = size_of::<T>();
        let c = Contiguous::new(
            &device,
            &mut self.c_staging,
            (c_ptr, c_stride),
            nnz,
            elem,
            !beta_zero,
        )?;
        if beta_zero {
            self.common.scale(c.ptr, Runs::contiguous(nnz)?, beta)?;
        }
        let shapes = (DnShape::of(&x, "X")?, DnShape::of(&y, "Y")?.transposed());
        let (common, alg) = (&mut self.common, self.alg);
        let handle = common.handle.clone();
        handle.with(|h| {
            // SAFETY: X and Y are this device's buffers with the shapes described, C's values
            // (the operand or its staging) hold nnz contiguous elements; all stay live through the
            // calls, ordered on the handle's stream, with a workspace sized for these shapes.
            unsafe {
                op.a.mat.set_values(&device, c.ptr)?;
                let xd = op
                    .first
                    .point(&device, shapes.0, x_ptr, common.values)?
                    .cast_const();
                let yd = op
                    .second
                    .point(&device, shapes.1, y_ptr, common.values)?
                    .cast_const();
                let s = op.a.mat.raw();
                let (alpha, beta) = (scalar_ptr(&alpha), scalar_ptr(&beta));
                if op.prepared != Some(shapes) {
                    op.prepared = None;
                    let mut bytes = 0;
                    call!(
                        &device,
                        cusparseSDDMM_bufferSize(
                            h,
                            NON_TRANSPOSE,
                            NON_TRANSPOSE,
                            alpha,
                            xd,
                            yd,
                            beta,
                            s,
                            common.compute,
                            alg,
                            &mut bytes
                        )
                    )?;
                    let workspace = common.workspace(bytes)?;
                    call!(
                        &device,
                        cusparseSDDMM_preprocess(
                            h,
                            NON_TRANSPOSE,
                            NON_TRANSPOSE,
                            alpha,
                            xd,
                            yd,
                            beta,
                            s,
                            common.compute,
                            alg,
                            workspace
                        )
                    )?;
                    op.prepared = Some(shapes);
                }
                let workspace = common.workspace.ptr(&device) as *mut _;
                call!(
                    &device,
                    cusparseSDDMM(
                        h,
                        NON_TRANSPOSE,
                        NON_TRANSPOSE,
                        alpha,
                        xd,
                        yd,
                        beta,
                        s,
                        common.compute,
                        alg,
                        workspace
                    )
                )
            }
        })?;
        c.write_back(&device, nnz, elem)?;
        self.common.account(self.c_staging.bytes());
        Ok(())
    }
}
