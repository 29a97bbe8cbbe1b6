//! The scaffold every CUDA plan is built on. A kernel family writes its analysis (the
//! constructor of its kernels' state), its launches, and where its values live; this module
//! does the rest the same way for all of them:
//! - operands bound and checked ([`crate::operand`]) before anything is launched;
//! - `alpha == 0`: the output becomes `beta * out` without reading A or the inputs;
//! - empty shapes: nothing to do;
//! - widths past the reservation refused, and `reserve` growing the family's workspace;
//! - value updates: new CSR-ordered values uploaded and, where the family stores them in its own
//!   order, scattered there on the device;
//! - [`PlanInfo`] with the time planning spent in each phase ([`PlanClock`]).

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{
    check_offered, Accumulator, Algorithm, AlgorithmTable, AttentionBackward, AttentionDesc,
    AttentionPlan, AttentionShape, BackendKind, CsrRef, DenseMut, DenseRef, DeviceMemory, Error,
    Format, Memory, OpKind, PlanInfo, PlanTime, Precision, Result, Scalar, SddmmDesc, SddmmPlan,
    SpIndex, SpmmDesc, SpmmPlan, SpmvDesc, SpmvPlan, ValueOrder,
};

use crate::device::{CudaBuffer, Device};
use crate::kernel::{kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, Ptr};
use crate::operand::{
    bind_attention, bind_attention_backward, bind_input, bind_sddmm, bind_spmm, bind_spmv,
    AttentionGradOperands, AttentionOperands, Bound, Run, SddmmOperands, SpmmOperands,
    SpmvOperands,
};

/// Threads per block of the shared kernels (`PLAN_BLOCK`).
const BLOCK: u32 = 256;
/// Blocks of their grid-stride loops at most: several waves on the largest devices.
const MAX_BLOCKS: u64 = 4096;

kernel_params! {
    /// `scale_dense`: `out = beta*out` over `outer` runs of `inner` elements, `ld` apart.
    pub(crate) struct ScaleDense<T> {
        inner: u32,
        outer: u32,
        out: out(Out),
        ld: u32,
        beta: acc,
    }
}

kernel_params! {
    /// `scatter_values`: `dst[slots[e]] = src[e * inc]` (`dst[e]` when `slots` is null).
    pub(crate) struct ScatterValues<T> {
        n: u32,
        src: ptr(T),
        inc: u32,
        slots: ptr(u32),
        dst: out(T),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "plan",
    code: include_str!("../kernels/plan.cu"),
    params: &[
        <ScaleDense<f32> as KernelParams>::C_DECL,
        <ScatterValues<f32> as KernelParams>::C_DECL,
    ],
    defines: &[("PLAN_BLOCK", BLOCK)],
};

/// The shared kernels of storage type `T`.
struct Shared<T: Scalar> {
    scale: Entry<ScaleDense<T>>,
    scatter: Entry<ScatterValues<T>>,
}

impl<T: Scalar> Shared<T> {
    fn new() -> Result<Self> {
        let t = crate::kernel::c_type(T::DTYPE)?;
        Ok(Shared {
            scale: Entry::new(&SOURCE, "scale_dense", &[&t])?,
            scatter: Entry::new(&SOURCE, "scatter_values", &[&t])?,
        })
    }

    fn specs(&self) -> [&KernelSpec; 2] {
        [self.scale.spec(), self.scatter.spec()]
    }
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    Ok(Shared::<T>::new()?.specs().map(Clone::clone).to_vec())
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = specs_of::<f64>()?;
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    specs.extend(specs_of::<i8>()?);
    specs.extend(specs_of::<i16>()?);
    Ok(specs)
}

/// A grid-stride launch over `items`.
fn stride_config(items: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            items.div_ceil(u64::from(BLOCK)).clamp(1, MAX_BLOCKS) as u32,
            1,
            1,
        ),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A phase of planning.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Phase {
    Host,
    Transfer,
    Device,
    Kernels,
}

/// Attributes the time since the last lap to a phase; device phases wait for the stream first,
/// so that their work, not its enqueueing, is what is timed.
pub(crate) struct PlanClock {
    last: Instant,
    time: PlanTime,
}

impl PlanClock {
    pub fn start() -> Self {
        PlanClock {
            last: Instant::now(),
            time: PlanTime::default(),
        }
    }

    /// The time attributed so far.
    pub fn time(&self) -> PlanTime {
        self.time
    }

    pub fn lap(&mut self, device: &Device, phase: Phase) -> Result<()> {
        if matches!(phase, Phase::Transfer | Phase::Device) {
            device.synchronize()?;
        }
        let now = Instant::now();
        let elapsed = now - self.last;
        self.last = now;
        let slot = match phase {
            Phase::Host => &mut self.time.host,
            Phase::Transfer => &mut self.time.transfer,
            Phase::Device => &mut self.time.device,
            Phase::Kernels => &mut self.time.kernels,
        };
        *slot += elapsed;
        Ok(())
    }
}

/// Where a plan's values live: `buffer` in the plan's order, and for each CSR entry its slot
/// there (`None` when the order is the CSR order).
pub(crate) struct Values<'a, T> {
    pub buffer: &'a CudaBuffer<T>,
    pub slots: Option<&'a CudaSlice<u32>>,
}

impl<'a, T> Values<'a, T> {
    /// Values kept in CSR entry order.
    pub fn csr_order(buffer: &'a CudaBuffer<T>) -> Self {
        Values {
            buffer,
            slots: None,
        }
    }
}

/// What a descriptor asks for: the operation, format, precision and algorithm.
pub(crate) type Request = (OpKind, Format, Precision, Algorithm);

/// Descriptors as both GPU backends read them.
pub(crate) trait Desc {
    fn request(&self) -> Request;
}

/// SpMM and SDDMM descriptors, which reserve a width.
pub(crate) trait WidthDesc: Desc {
    /// The width the plan reserves for: N of SpMM, K of SDDMM.
    fn width(&self) -> usize;

    /// What a plan of the `cuda` backend running `algorithm` says of itself before planning;
    /// deterministic unless the family finds otherwise.
    fn info(&self, algorithm: Algorithm) -> PlanInfo {
        let (op, format, precision, _) = self.request();
        PlanInfo {
            reserved_width: self.width(),
            ..PlanInfo::new(BackendKind::Cuda, op, format, precision, algorithm, true)
        }
    }
}

macro_rules! desc {
    ($desc:ident: $op:ident) => {
        impl Desc for $desc {
            fn request(&self) -> Request {
                (OpKind::$op, self.format, self.precision, self.algorithm)
            }
        }
    };
    ($desc:ident: $op:ident, reserving) => {
        desc!($desc: $op);

        impl WidthDesc for $desc {
            fn width(&self) -> usize {
                self.reserved_width()
            }
        }
    };
}
desc!(SpmvDesc: Spmv);
desc!(AttentionDesc: Attention);
desc!(SpmmDesc: Spmm, reserving);
desc!(SddmmDesc: Sddmm, reserving);

/// Refuses a request for storage type `T` that `backend`'s `table` does not offer, or whose
/// precision stores another type.
pub(crate) fn check_request<T: Scalar>(
    backend: BackendKind,
    table: impl AlgorithmTable,
    (op, format, precision, algorithm): Request,
) -> Result<()> {
    if precision.storage != T::DTYPE {
        return Err(Error::invalid(format!(
            "{op}: the descriptor asks for {precision} but the matrix holds {}",
            T::DTYPE
        )));
    }
    check_offered(backend, table, op, format, precision, algorithm).map(drop)
}

/// What every plan holds beside its family's state.
pub(crate) struct PlanBase<T: Scalar> {
    pub device: Arc<Device>,
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    pub info: PlanInfo,
    scale: Kernel<ScaleDense<T>>,
    scatter: Kernel<ScatterValues<T>>,
}

impl<T: Scalar> PlanBase<T> {
    /// The plan of `a`: compiles or loads the family's kernels (`family`) with the shared ones,
    /// in parallel; the plan's `clock` (started when planning began) counts what came before as
    /// host work.
    pub fn new<I: SpIndex>(
        device: &Arc<Device>,
        a: CsrRef<'_, T, I>,
        info: PlanInfo,
        family: &[&KernelSpec],
        mut clock: PlanClock,
    ) -> Result<(Self, PlanClock)> {
        clock.lap(device, Phase::Host)?;
        let shared = Shared::<T>::new()?;
        let mut specs = shared.specs().to_vec();
        specs.extend_from_slice(family);
        device.prepare(&specs)?;
        let base = PlanBase {
            device: device.clone(),
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            info,
            scale: device.kernel(&shared.scale)?,
            scatter: device.kernel(&shared.scatter)?,
        };
        clock.lap(device, Phase::Kernels)?;
        Ok((base, clock))
    }

    /// Raises the reservation to `width` (never lowers it), growing the family's workspace by
    /// `grow`, which the family may also size for what a refused run needed.
    fn reserve(&mut self, width: usize, grow: impl FnOnce(&Self) -> Result<usize>) -> Result<()> {
        let width = width.max(self.info.reserved_width);
        self.info.bytes += grow(self)?;
        self.info.reserved_width = width;
        Ok(())
    }

    /// The plan of this base and the family's `kernels`, holding `bytes`, its planning timed by
    /// `clock`.
    pub fn into_plan<K>(mut self, clock: PlanClock, bytes: usize, kernels: K) -> CudaPlan<T, K> {
        self.info.bytes = bytes;
        self.info.plan_time = clock.time;
        CudaPlan {
            base: self,
            kernels,
        }
    }

    /// `out = beta*out` (zeros when beta == 0, never reading out): what `alpha == 0` leaves.
    pub fn scale(&self, out: &Bound, beta: T::Acc) -> Result<()> {
        launch_scale(&self.scale, out, beta)
    }

    /// Overwrites the plan's values with `new` (nnz x 1, in CSR entry order).
    pub fn update(&self, target: Values<'_, T>, new: DenseRef<'_, T>) -> Result<()> {
        new.expect_shape("update_values", (self.nnz, 1))?;
        if self.nnz == 0 {
            return Ok(());
        }
        let scatter = |src: Ptr<T>, inc: u32| self.scatter(&target, src, inc);
        match new.memory() {
            Memory::Host(_) => {
                let contiguous;
                let contiguous_rows =
                    new.layout() == sparse_core::Layout::ColMajor || new.ld() == 1;
                let host: &[T] = if contiguous_rows {
                    &new.host("update_values")?[..self.nnz]
                } else {
                    contiguous = (0..self.nnz).map(|e| new.at(e, 0)).collect::<Vec<T>>();
                    &contiguous
                };
                match target.slots {
                    None => self.device.stage(
                        target.buffer.address(),
                        self.nnz,
                        |start, out: &mut [T]| {
                            out.copy_from_slice(&host[start..start + out.len()]);
                        },
                    ),
                    Some(_) => {
                        let staged = self.device.upload(host)?;
                        scatter(Ptr::of_buffer(&staged), 1)
                    }
                }
            }
            Memory::Device(_) => {
                let src = bind_input(&new, &self.device, "update_values")?;
                scatter(src.input(), src.increment())
            }
        }
    }

    /// `target` takes the nnz values `inc` apart at `src`, given in CSR entry order, through its
    /// slots (in order when it has none).
    fn scatter(&self, target: &Values<'_, T>, src: Ptr<T>, inc: u32) -> Result<()> {
        let n = crate::operand::to_u32("number of entries", self.nnz)?;
        let params = ScatterValues {
            n,
            src,
            inc,
            slots: target.slots.map_or(Ptr::NULL, |s| Ptr::of(s, &self.device)),
            dst: crate::kernel::MutPtr::of_buffer(target.buffer),
        };
        // SAFETY: `src` holds nnz elements `inc` apart (the callers' operand or buffer);
        // `slots`, when present, holds a slot below the buffer's length for each of the nnz
        // entries (the family's invariant), and without it the buffer holds nnz values in CSR
        // order.
        unsafe { self.scatter.launch(stride_config(u64::from(n)), &params) }
    }

    /// `target` takes the nnz values of `src`, a device buffer in CSR entry order: values one
    /// step of a pipeline computed, moved into the order of another plan over the same entries.
    pub fn update_from(&self, target: Values<'_, T>, src: &CudaBuffer<T>) -> Result<()> {
        let held = DeviceMemory::len(src);
        if held < self.nnz {
            return Err(Error::internal(format!(
                "{held} values to move into a plan of {} entries",
                self.nnz
            )));
        }
        if self.nnz == 0 {
            return Ok(());
        }
        self.scatter(&target, Ptr::of_buffer(src), 1)
    }
}

/// `out = beta*out` (zeros when beta == 0, never reading out) outside a plan, for work that
/// short-circuits `alpha == 0` as plans do (cuBLAS GEMM).
pub(crate) fn scale_dense<T: Scalar>(
    device: &Arc<Device>,
    out: &Bound,
    beta: T::Acc,
) -> Result<()> {
    launch_scale(&device.kernel(&Shared::<T>::new()?.scale)?, out, beta)
}

fn launch_scale<T: Scalar>(
    kernel: &Kernel<ScaleDense<T>>,
    out: &Bound,
    beta: T::Acc,
) -> Result<()> {
    let (inner, outer) = match out.layout {
        sparse_core::Layout::RowMajor => (out.cols, out.rows),
        sparse_core::Layout::ColMajor => (out.rows, out.cols),
    };
    let (inner, outer) = (
        crate::operand::to_u32("output rows", inner)?,
        crate::operand::to_u32("output columns", outer)?,
    );
    let params = ScaleDense {
        inner,
        outer,
        out: out.output(),
        ld: out.ld,
        beta,
    };
    // SAFETY: `out` is a bound operand: `outer` runs of `inner` elements, `ld` apart, in its
    // allocation (checked by its Dense view).
    unsafe { kernel.launch(stride_config(u64::from(inner) * u64::from(outer)), &params) }
}

/// A plan: the shared part and a family's kernels.
pub(crate) struct CudaPlan<T: Scalar, K> {
    base: PlanBase<T>,
    kernels: K,
}

/// What every family supplies: where its values live, and its width-dependent workspace.
pub(crate) trait Kernels<T: Scalar>: Send {
    fn values(&self) -> Values<'_, T>;
    /// Called after new values were written where [`Self::values`] points: for state derived
    /// from the values (none of sparse-blas's own kernels keeps any).
    fn values_updated(&mut self) {}
    /// Sizes the workspace for widths (N of SpMM, K of SDDMM) up to `width`; returns the bytes
    /// it grew by.
    fn reserve(&mut self, _base: &PlanBase<T>, _width: usize) -> Result<usize> {
        Ok(0)
    }
}

/// What an SpMV family supplies.
pub(crate) trait SpmvKernels<T: Scalar>: Kernels<T> {
    /// `y = alpha*A*x + beta*y` with `alpha != 0`, A with at least one row.
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmvOperands, T::Acc>) -> Result<()>;
}

/// What an SpMM family supplies.
pub(crate) trait SpmmKernels<T: Scalar>: Kernels<T> {
    /// `C = alpha*A*B + beta*C` with `alpha != 0`, rows and N at least one, N within the
    /// reservation.
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmmOperands, T::Acc>) -> Result<()>;
}

/// What an SDDMM family supplies.
pub(crate) trait SddmmKernels<T: Scalar>: Kernels<T> {
    /// `C = alpha*(X*Y^T) ∘ spy(S) + beta*C` with `alpha != 0` and at least one output slot.
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()>;
    /// The order C is written in, when it is not S's CSR entry order.
    fn value_order(&self) -> Option<&ValueOrder> {
        None
    }
    /// `C = beta*C` for `alpha == 0` (`run.alpha`), never reading X or Y. A blocked order's
    /// padding slots must become 0, which only the family knows: the default scales C as a
    /// dense vector.
    fn scale(&mut self, base: &PlanBase<T>, run: &Run<SddmmOperands, T::Acc>) -> Result<()> {
        base.scale(&run.ops.c, run.beta)
    }
}

/// What an attention family supplies.
pub(crate) trait AttentionKernels<T: Scalar>: Send {
    /// The descriptor planned from (heads, scale, bias).
    fn desc(&self) -> &AttentionDesc;
    /// O from Q, K and V, bound and checked against `shape`, with at least one row and one
    /// column of O.
    fn run(
        &mut self,
        base: &PlanBase<T>,
        shape: &AttentionShape,
        ops: &AttentionOperands,
    ) -> Result<()>;
    /// The gradients, bound and checked against `shape` (dbias present when it has a bias),
    /// A with at least one row; the family's error when it has no backward.
    fn backward(
        &mut self,
        base: &PlanBase<T>,
        shape: &AttentionShape,
        ops: &AttentionGradOperands,
    ) -> Result<()>;
}

impl<T: Scalar, K> CudaPlan<T, K> {
    /// The shared part and the family's kernels, for a plan that runs this one as a step of
    /// its own.
    pub fn into_parts(self) -> (PlanBase<T>, K) {
        (self.base, self.kernels)
    }
}

impl<T: Scalar, K: Kernels<T>> CudaPlan<T, K> {
    fn write_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.base.update(self.kernels.values(), values)?;
        self.kernels.values_updated();
        Ok(())
    }

    fn reserve_width(&mut self, width: usize) -> Result<()> {
        let kernels = &mut self.kernels;
        let width = width.max(self.base.info.reserved_width);
        self.base
            .reserve(width, |base| kernels.reserve(base, width))
    }
}

impl<T: Scalar, K: SpmvKernels<T>> SpmvPlan<T> for CudaPlan<T, K> {
    fn info(&self) -> &PlanInfo {
        &self.base.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        mut y: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let base = &self.base;
        let ops = bind_spmv(&base.device, (base.rows, base.cols), &x, &mut y)?;
        if base.rows == 0 {
            return Ok(());
        }
        if alpha == T::Acc::ZERO {
            return base.scale(&ops.y, beta);
        }
        self.kernels.run(base, &Run { ops, alpha, beta })
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.write_values(values)
    }
}

impl<T: Scalar, K: SpmmKernels<T>> SpmmPlan<T> for CudaPlan<T, K> {
    fn info(&self) -> &PlanInfo {
        &self.base.info
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let base = &self.base;
        let ops = bind_spmm(&base.device, (base.rows, base.cols), &b, &mut c)?;
        base.info.check_width(ops.n as usize)?;
        if base.rows == 0 || ops.n == 0 {
            return Ok(());
        }
        if alpha == T::Acc::ZERO {
            return base.scale(&ops.c, beta);
        }
        self.kernels.run(base, &Run { ops, alpha, beta })
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.write_values(values)
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.reserve_width(width)
    }
}

impl<T: Scalar, K: AttentionKernels<T>> AttentionPlan<T> for CudaPlan<T, K> {
    fn info(&self) -> &PlanInfo {
        &self.base.info
    }

    fn run(
        &mut self,
        q: DenseRef<'_, T>,
        k: DenseRef<'_, T>,
        v: DenseRef<'_, T>,
        mut o: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let base = &self.base;
        let shape = self.kernels.desc().shape(q.cols(), v.cols())?;
        let ops = bind_attention(&base.device, (base.rows, base.cols), &q, &k, &v, &mut o)?;
        if base.rows == 0 || v.cols() == 0 {
            return Ok(());
        }
        self.kernels.run(base, &shape, &ops)
    }

    fn backward(&mut self, mut grads: AttentionBackward<'_, T>) -> Result<()> {
        let base = &self.base;
        let shape = self.kernels.desc().shape(grads.q.cols(), grads.v.cols())?;
        let ops =
            bind_attention_backward(&base.device, (base.rows, base.cols, base.nnz), &mut grads)?;
        if shape.bias && ops.dbias.is_none() {
            return Err(Error::invalid(
                "an attention backward with a bias needs dbias for the bias gradient",
            ));
        }
        if base.rows == 0 {
            // No row attends to any column: the gradients of K and V are zero.
            base.scale(&ops.dk, T::Acc::ZERO)?;
            return base.scale(&ops.dv, T::Acc::ZERO);
        }
        self.kernels.backward(base, &shape, &ops)
    }
}

impl<T: Scalar, K: SddmmKernels<T>> SddmmPlan<T> for CudaPlan<T, K> {
    fn info(&self) -> &PlanInfo {
        &self.base.info
    }

    fn value_order(&self) -> Option<&ValueOrder> {
        self.kernels.value_order()
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let base = &self.base;
        let slots = self.kernels.value_order().map_or(base.nnz, ValueOrder::len);
        let ops = bind_sddmm(&base.device, (base.rows, base.cols, slots), &x, &y, &mut c)?;
        base.info.check_width(ops.k as usize)?;
        if slots == 0 {
            return Ok(());
        }
        let run = Run { ops, alpha, beta };
        if alpha == T::Acc::ZERO {
            return self.kernels.scale(base, &run);
        }
        self.kernels.run(base, &run)
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.write_values(values)
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.reserve_width(width)
    }
}
