//! Magicube from planes, exact: operands cut into parts that the integer tensor cores take.
//!
//! - 16-bit storage ([`Compute::IntBits`] modes `l12-r4 l16-r4 l16-r8 l16-r16`) as 8-bit
//!   planes on the s8/u8 MMAs (`magicube`).
//! - i8 storage (`i4`, `l8-r4`) as 4-bit planes packed two to a byte on the s4/u4 MMAs
//!   (`magicube-s4`, mma.m16n8k64), in groups of 64 vectors whose column indices are shuffled
//!   in blocks of 8 so that the nibble transpose of B in registers ends in k order (the
//!   paper's column-index shuffle). `magicube` multiplies these operands whole, on the i8
//!   kernels.
//!
//! A value is a signed high part and an unsigned low part, `v = hi * 2^bits + lo`. A's values
//! are cut at plan time into one plane when every value fits the width (its low part read as
//! signed is the value) and two otherwise; B (X and Y of SDDMM) at each run on the device
//! (`mc_split_dense`), which also notes whether any value needs its high part. The kernel runs
//! one MMA per pair of planes into its own sums and adds them shifted by the planes' weights,
//! in wrapping i32 arithmetic, so the result is the i32 sum of the whole products modulo 2^32,
//! bit for bit what the oracle computes. Operands within the width their mode names take one
//! MMA a step; wider ones take more. So a value past its width is slower, never wrong.
//!
//! On sm_90 (no 4-bit tensor cores, docs/integer.md) 12- and 4-bit values of 16-bit storage
//! take the 8-bit planes of 16- and 8-bit ones: `l12-r4` and `l16-r4` run as `l16-r8` does.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use sparse_core::{
    Accumulator, Algorithm, Compute, CsrRef, DType, DenseMut, DenseRef, Error, PlanInfo, Result,
    Scalar, SpIndex, SpmmDesc, SpmmPlan,
};
use sparse_formats::{FillLimit, SrBcrs, SrBcrsShape};

use super::{
    padded_b_row, spmm_operands, spmm_run_bytes, stride_grid, warp_grid, Columns, SpmmUnits,
    SrBcrsPattern, RUN_BYTES, SOURCE, STRIDE, STRIDE_S4, THREADS, VECTORS,
};
use crate::device::Device;
use crate::kernel::{c_type, kernel_params, Entry, Kernel, KernelParams, KernelSpec, MutPtr, Ptr};
use crate::operand::{host_column, to_u32, Bound, Run, SddmmDense, SddmmOperands};
use crate::plan::{Phase, PlanBase, PlanClock, WidthDesc};

/// The lane runs of the kernel on 8-bit planes ([`PlaneWidth::runs`]).
const RUNS: [u32; 2] = [RUN_BYTES[0], RUN_BYTES[1]];

kernel_params! {
    /// `mc_spmm_planes<V, W, BITS, LP>`: C (i32) = alpha*A*B + beta*C from LP planes of A's
    /// values in SR-BCRS slot order (two: hi * 2^BITS + lo; one: `values_lo`) and the two of
    /// B, row-major with `b_ld` bytes a row (`b_hi` read only when `*b_wide`). `alpha`, `beta`
    /// and C are i32, as bits.
    pub(crate) struct McSpmmPlanes {
        chunks: u32,
        rows: u32,
        n: u32,
        split: u32,
        b_ld: u32,
        c_rs: u32,
        c_cs: u32,
        chunk_vrow: ptr(u32),
        chunk_start: ptr(u32),
        chunk_end: ptr(u32),
        vec_col: ptr(u32),
        values_hi: ptr(u8),
        values_lo: ptr(u8),
        b_hi: ptr(u8),
        b_lo: ptr(u8),
        b_wide: ptr(u32),
        c: out(u32),
        alpha: u32,
        beta: u32,
    }
}

kernel_params! {
    /// `mc_split_dense<P, BITS>`: B (`rows x n` at its strides) as its high and low parts of
    /// BITS bits `hi` and `lo` (row-major, `ld` bytes a row); `wide` set when a value does not
    /// fit BITS bits.
    pub(crate) struct McSplit<T> {
        rows: u32,
        n: u32,
        b_rs: u32,
        b_cs: u32,
        ld: u32,
        b: ptr(T),
        hi: out(u8),
        lo: out(u8),
        wide: out(u32),
    }
}

kernel_params! {
    /// `mc_sddmm_planes<V, BITS, T>`: the tiles of `McSddmm` with X and Y as their planes
    /// (row-major, `x_ld` and `y_ld` bytes a row); `wide[0]` and `wide[1]` set when X or Y
    /// needs its high part. `dense` supplies C, K and the scalars (its X and Y are not read).
    pub(crate) struct McSddmmPlanes<T> {
        tile_vrow: ptr(u32),
        tile_start: ptr(u32),
        vec_col: ptr(u32),
        vec_mask: ptr(u8),
        values: ptr(T),
        x_hi: ptr(u8),
        x_lo: ptr(u8),
        y_hi: ptr(u8),
        y_lo: ptr(u8),
        wide: ptr(u32),
        tiles: u32,
        rows: u32,
        scale_by_values: u32,
        x_ld: u32,
        y_ld: u32,
        dense: sub(SddmmDense),
    }
}

/// Bits of a plane: the 8-bit planes of 16-bit storage, and the nibble planes of the 4-bit path.
pub(super) const BYTE: u32 = 8;
pub(super) const NIBBLE: u32 = 4;

/// The SpMM kernel of `sparse_planes` planes of A of `bits` bits each.
fn planes_entry(
    vector: usize,
    run: u32,
    bits: u32,
    sparse_planes: u32,
) -> Result<Entry<McSpmmPlanes>> {
    Entry::new(
        &SOURCE,
        "mc_spmm_planes",
        &[&vector, &run, &bits, &sparse_planes],
    )
}

fn split_entry<T: Scalar>(bits: u32) -> Result<Entry<McSplit<T>>> {
    Entry::new(
        &SOURCE,
        "mc_split_dense",
        &[&McSplit::<T>::c_type()?, &bits],
    )
}

fn sddmm_entry<T: Scalar>(vector: usize, bits: u32) -> Result<Entry<McSddmmPlanes<T>>> {
    Entry::new(
        &SOURCE,
        "mc_sddmm_planes",
        &[&vector, &bits, &c_type(T::DTYPE)?],
    )
}

/// Every kernel of the plane paths Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = vec![
        split_entry::<i16>(BYTE)?.spec().clone(),
        split_entry::<i8>(NIBBLE)?.spec().clone(),
    ];
    for v in VECTORS {
        specs.push(sddmm_entry::<i16>(v, BYTE)?.spec().clone());
        specs.push(sddmm_entry::<i8>(v, NIBBLE)?.spec().clone());
        for width in [PlaneWidth::Byte, PlaneWidth::Nibble] {
            for planes in [1, 2] {
                specs.extend(
                    spmm_entries(width, v, planes)?
                        .iter()
                        .map(|e| e.spec().clone()),
                );
            }
        }
    }
    Ok(specs)
}

/// The width of a plan's planes, and what follows from it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum PlaneWidth {
    /// 8-bit planes of 16-bit storage, on the s8/u8 MMAs, in groups of 32 vectors.
    Byte,
    /// 4-bit planes of i8 storage packed two to a byte (`magicube-s4`), on the s4/u4 MMAs, in
    /// groups of 64 vectors whose column indices are shuffled.
    Nibble,
}

impl PlaneWidth {
    fn bits(self) -> u32 {
        match self {
            PlaneWidth::Byte => BYTE,
            PlaneWidth::Nibble => NIBBLE,
        }
    }

    fn stride(self) -> usize {
        match self {
            PlaneWidth::Byte => STRIDE,
            PlaneWidth::Nibble => STRIDE_S4,
        }
    }

    fn columns(self) -> Columns {
        match self {
            PlaneWidth::Byte => Columns::InOrder,
            PlaneWidth::Nibble => Columns::Shuffled,
        }
    }

    /// The lane runs of the SpMM kernel, narrowest first: each pair of planes keeps its own
    /// sums, and wider runs would spill registers. A nibble run of 8 columns is one word of
    /// each of a lane's 16 B rows.
    fn runs(self) -> &'static [u32] {
        match self {
            PlaneWidth::Byte => &RUNS,
            PlaneWidth::Nibble => &[8],
        }
    }

    fn algorithm(self) -> Algorithm {
        match self {
            PlaneWidth::Byte => Algorithm::Magicube,
            PlaneWidth::Nibble => Algorithm::MagicubeS4,
        }
    }

    /// Planes the sparse values need: one when every value fits the width (its low part read
    /// as signed is the value), else two.
    fn planes_for<T: Scalar>(self, values: &[T]) -> u32 {
        let half = 1i32 << (self.bits() - 1);
        let fits = values
            .iter()
            .all(|v| (-half..half).contains(&(v.to_f64() as i32)));
        if fits {
            1
        } else {
            2
        }
    }

    /// Values in slot order as `planes` planes, packed (two nibbles to a byte, the lower slot
    /// first): the low part (unsigned), then the high one (signed, v >> bits) when there are
    /// two.
    fn pack<T: Scalar>(self, slots: &[T], planes: u32) -> Vec<u8> {
        let bits = self.bits();
        let per_byte = (8 / bits) as usize;
        let mask = (1u32 << bits) - 1;
        let plane = |shift: u32| -> Vec<u8> {
            slots
                .chunks(per_byte)
                .map(|part| {
                    part.iter().enumerate().fold(0u32, |byte, (s, v)| {
                        let v = v.to_f64() as i32;
                        byte | (((v >> shift) as u32 & mask) << (s as u32 * bits))
                    }) as u8
                })
                .collect()
        };
        let mut out = plane(0);
        if planes == 2 {
            out.extend(plane(bits));
        }
        out
    }
}

/// A planned SpMM from planes: 16-bit storage as 8-bit planes (the modes `l12-r4 .. l16-r16`),
/// or i8 storage as 4-bit planes (`magicube-s4`).
pub(crate) struct PlanesSpmm<T: Scalar> {
    base: PlanBase<T>,
    width: PlaneWidth,
    a: SrBcrsPattern,
    /// A's planes in slot order: the low one, then the high one when A has two.
    values: CudaSlice<u8>,
    /// Planes of A: 1 or 2.
    planes: u32,
    units: SpmmUnits,
    /// One per lane run of [`PlaneWidth::runs`], for A's planes.
    kernels: Vec<Kernel<McSpmmPlanes>>,
    split: Kernel<McSplit<T>>,
    /// B's two planes (each cols x the reserved N, row-major, rows padded to [`super::B_ALIGN`]).
    b: DensePlanes,
    /// Set by the split when a value of B does not fit the width.
    b_wide: CudaSlice<u32>,
}

/// The SpMM kernels of a plan of `planes` planes of A, one per lane run.
fn spmm_entries(width: PlaneWidth, vector: usize, planes: u32) -> Result<Vec<Entry<McSpmmPlanes>>> {
    width
        .runs()
        .iter()
        .map(|&w| planes_entry(vector, w, width.bits(), planes))
        .collect()
}

/// The plan of an SpMM in `desc.precision` ([`Compute::IntBits`]) from planes of `width`,
/// vectors of `vector` rows.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmmDesc,
    vector: usize,
    width: PlaneWidth,
    clock: PlanClock,
) -> Result<PlanesSpmm<T>> {
    let storage = match width {
        PlaneWidth::Byte => DType::I16,
        PlaneWidth::Nibble => DType::I8,
    };
    if T::DTYPE != storage || !matches!(desc.precision.compute, Compute::IntBits { .. }) {
        return Err(Error::internal(format!(
            "no Magicube plane kernel of {} bits takes {}",
            width.bits(),
            desc.precision
        )));
    }
    let planes = width.planes_for(a.values());
    let entries = spmm_entries(width, vector, planes)?;
    let split = split_entry::<T>(width.bits())?;
    let mut specs: Vec<&KernelSpec> = entries.iter().map(Entry::spec).collect();
    specs.push(split.spec());
    let (base, mut clock) = PlanBase::new(device, a, desc.info(width.algorithm()), &specs, clock)?;
    let kernels = entries
        .iter()
        .map(|e| device.kernel(e))
        .collect::<Result<Vec<_>>>()?;
    let split = device.kernel(&split)?;
    clock.lap(device, Phase::Kernels)?;
    let m = SrBcrs::from_csr(
        a,
        SrBcrsShape::new(vector, width.stride())?,
        FillLimit::default(),
    )?;
    let packed = width.pack(m.values(), planes);
    clock.lap(device, Phase::Host)?;
    let pattern = SrBcrsPattern::upload(device, &m, width.columns())?;
    let values = device.upload_converted(&packed, 0, |&b| b)?;
    let b_wide = device.alloc_zeros(1, "allocating B's width flag")?;
    clock.lap(device, Phase::Transfer)?;
    let units = SpmmUnits::build(device, &pattern, &mut clock)?;
    let base_cols = base.cols;
    let mut plan = PlanesSpmm {
        base,
        width,
        a: pattern,
        values,
        planes,
        units,
        kernels,
        split,
        b: DensePlanes::new(base_cols, width.bits()),
        b_wide,
    };
    let workspace = plan.b.grow(device, desc.reserved_width())?;
    clock.lap(device, Phase::Device)?;
    plan.base.info.bytes = plan.matrix_bytes() + workspace;
    plan.base.info.plan_time = clock.time();
    Ok(plan)
}

impl<T: Scalar> PlanesSpmm<T> {
    fn matrix_bytes(&self) -> usize {
        self.a.bytes() + self.values.len() + self.units.bytes()
    }

    /// The addresses of A's high and low planes (the high one is the low one when A has one,
    /// and then never read).
    fn value_planes(&self) -> (Ptr<u8>, Ptr<u8>) {
        let lo = Ptr::of(&self.values, &self.base.device);
        let hi = if self.planes == 2 {
            lo.offset(self.values.len() / 2)
        } else {
            lo
        };
        (hi, lo)
    }
}

impl<T: Scalar> SpmmPlan<T> for PlanesSpmm<T> {
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
        let Some(ops) = spmm_operands(&self.base, alpha, &b, beta, &mut c)? else {
            return Ok(());
        };
        let device = self.base.device.clone();
        let n = ops.n;
        let (b_hi, b_lo, b_ld) =
            self.b
                .split_with_flag(&device, &self.split, &ops.b, n, &mut self.b_wide)?;
        let a = &self.a;
        let chunks = self.units.pick(n, device.info.multiprocessors);
        if chunks.split {
            // The chunks of a vector-row add into its rows of C.
            self.base.scale(&ops.c, beta)?;
        }
        let runs = self.width.runs();
        let widest = spmm_run_bytes(chunks.count, n, device.info.multiprocessors);
        let pick = runs.iter().rposition(|&w| w <= widest).unwrap_or(0);
        let w = runs[pick];
        let (chunk_vrow, chunk_start, chunk_end) = chunks.pointers(&device);
        let (c_rs, c_cs) = ops.c.strides();
        let (values_hi, values_lo) = self.value_planes();
        let bits = |v: T::Acc| v.to_f64() as i32 as u32;
        let params = McSpmmPlanes {
            chunks: chunks.count,
            rows: a.rows,
            n,
            split: u32::from(chunks.split),
            b_ld,
            c_rs,
            c_cs,
            chunk_vrow,
            chunk_start,
            chunk_end,
            vec_col: Ptr::of(&a.vec_col, &device),
            values_hi,
            values_lo,
            b_hi,
            b_lo,
            b_wide: Ptr::of(&self.b_wide, &device),
            c: ops.c.output(),
            alpha: bits(alpha),
            beta: bits(beta),
        };
        let config = warp_grid(u64::from(chunks.count) * u64::from(n.div_ceil(8 * w)))?;
        // SAFETY: every chunk is whole groups (of the width's stride) of one vector-row below
        // the stored count, so its column loads and tile rows (32 bytes each, the groups' at
        // multiples of 32 bytes) are inside vec_col and each plane of A's values; columns are
        // < cols = B's rows (padding maps to 0); B's planes hold cols rows of b_ld bytes, b_ld
        // a multiple of 16 so lane runs are aligned, read below the n * bits / 8 bytes
        // (rounded up) the split wrote before on this stream; C spans rows x n i32 at its
        // strides, columns past n and rows past M never written.
        unsafe { self.kernels[pick].launch(config, &params) }
    }

    /// A's planes made again on the host; a plan whose values now need another number of
    /// planes takes the kernels for it.
    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        let device = self.base.device.clone();
        let host = host_column(&values, self.base.nnz, &device, "update_values")?;
        let planes = self.width.planes_for(&host);
        if planes != self.planes {
            self.kernels = spmm_entries(self.width, self.a.shape.vector(), planes)?
                .iter()
                .map(|e| device.kernel(e))
                .collect::<Result<Vec<_>>>()?;
        }
        let packed = self.width.pack(&self.a.order.to_slot_order(&host), planes);
        let old = self.matrix_bytes();
        self.values = device.upload_converted(&packed, 0, |&b| b)?;
        self.planes = planes;
        self.base.info.bytes = self.base.info.bytes - old + self.matrix_bytes();
        Ok(())
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        let width = width.max(self.base.info.reserved_width);
        self.base.info.bytes += self.b.grow(&self.base.device, width)?;
        self.base.info.reserved_width = width;
        Ok(())
    }
}

/// A dense operand split into its two planes on the device at each run (a workspace grown
/// with the reserved width).
struct DensePlanes {
    /// Rows of the operand.
    rows: usize,
    /// Bits of a plane's values.
    bits: u32,
    planes: Option<CudaSlice<u8>>,
}

impl DensePlanes {
    fn new(rows: usize, bits: u32) -> Self {
        DensePlanes {
            rows,
            bits,
            planes: None,
        }
    }

    /// Bytes of a plane's row for `width` columns, padded ([`super::B_ALIGN`]).
    fn row_len(&self, width: usize) -> Result<usize> {
        let bytes = width
            .checked_mul(self.bits as usize)
            .ok_or_else(|| Error::overflow::<usize>("a row of a dense plane", width))?
            .div_ceil(8);
        padded_b_row(bytes)
    }

    /// Bytes of one plane for `width` columns.
    fn plane_len(&self, width: usize) -> Result<usize> {
        self.row_len(width)?
            .checked_mul(self.rows.max(1))
            .ok_or_else(|| Error::overflow::<usize>("a dense plane", width))
    }

    fn grow(&mut self, device: &Device, width: usize) -> Result<usize> {
        let len = self
            .plane_len(width)?
            .checked_mul(2)
            .ok_or_else(|| Error::overflow::<usize>("dense planes", width))?;
        device.grow_zeroed(&mut self.planes, len, "allocating a dense operand's planes")
    }

    /// The planes for `n` columns: their addresses and row length.
    fn addresses(&self, device: &Device, n: u32) -> Result<(MutPtr<u8>, MutPtr<u8>, u32)> {
        let planes = self
            .planes
            .as_ref()
            .ok_or_else(|| Error::internal("a dense operand's planes were never allocated"))?;
        let hi = MutPtr::<u8>::of(planes, device);
        let lo = hi.offset(self.plane_len(n as usize)?);
        Ok((
            hi,
            lo,
            to_u32("a dense plane's row", self.row_len(n as usize)?)?,
        ))
    }

    /// [`DensePlanes::split`] with its own width flag, cleared first.
    fn split_with_flag<T: Scalar>(
        &self,
        device: &Device,
        kernel: &Kernel<McSplit<T>>,
        d: &Bound,
        n: u32,
        wide: &mut CudaSlice<u32>,
    ) -> Result<(Ptr<u8>, Ptr<u8>, u32)> {
        device
            .stream
            .memset_zeros(wide)
            .map_err(|e| device.error("clearing a dense operand's width flag", e))?;
        self.split(device, kernel, d, n, MutPtr::of(wide, device))
    }

    /// Splits `d` (`rows x n`, a bound operand) on the device, setting `*wide` when a value
    /// needs its high byte: the planes' addresses and row length.
    fn split<T: Scalar>(
        &self,
        device: &Device,
        kernel: &Kernel<McSplit<T>>,
        d: &Bound,
        n: u32,
        wide: MutPtr<u32>,
    ) -> Result<(Ptr<u8>, Ptr<u8>, u32)> {
        let (hi, lo, ld) = self.addresses(device, n)?;
        let (b_rs, b_cs) = d.strides();
        let params = McSplit {
            rows: to_u32("rows of a dense operand", self.rows)?,
            n,
            b_rs,
            b_cs,
            ld,
            b: d.input(),
            hi,
            lo,
            wide,
        };
        let per_byte = u64::from(8 / self.bits);
        let bytes = u64::from(params.rows) * u64::from(n).div_ceil(per_byte);
        // SAFETY: the operand spans rows x n at its strides (a bound operand); each plane holds
        // rows rows of ld bytes, at least the n * bits / 8 (rounded up) written (grown for the
        // reserved width, which n is within); `wide` addresses one u32.
        unsafe { kernel.launch(stride_grid(bytes.div_ceil(u64::from(THREADS))), &params) }?;
        Ok((hi.read_only(), lo.read_only(), ld))
    }
}

/// The SDDMM kernel from planes and its workspace: X and Y split into planes at each run, of
/// 8 bits for 16-bit storage, of 4 on the 4-bit path.
pub(crate) struct SddmmPlanes<T: Scalar> {
    kernel: Kernel<McSddmmPlanes<T>>,
    split: Kernel<McSplit<T>>,
    x: DensePlanes,
    y: DensePlanes,
    /// Whether X, Y needs its high byte.
    wide: CudaSlice<u32>,
}

/// The two kernels of [`SddmmPlanes`], named before they are compiled.
pub(crate) type SddmmPlanesEntries<T> = (Entry<McSddmmPlanes<T>>, Entry<McSplit<T>>);

impl<T: Scalar> SddmmPlanes<T> {
    /// The kernels of an SDDMM at vector length `vector` from planes of `bits` bits, for the
    /// plan to compile alongside its own.
    pub(crate) fn entries(vector: usize, bits: u32) -> Result<SddmmPlanesEntries<T>> {
        Ok((sddmm_entry::<T>(vector, bits)?, split_entry::<T>(bits)?))
    }

    pub(crate) fn new(
        device: &Arc<Device>,
        (kernel, split): &SddmmPlanesEntries<T>,
        bits: u32,
        (rows, cols): (usize, usize),
    ) -> Result<Self> {
        Ok(SddmmPlanes {
            kernel: device.kernel(kernel)?,
            split: device.kernel(split)?,
            x: DensePlanes::new(rows, bits),
            y: DensePlanes::new(cols, bits),
            wide: device.alloc_zeros(2, "allocating the planes' width flags")?,
        })
    }

    /// Sizes the planes for K up to `width`; the bytes grown.
    pub(crate) fn reserve(&mut self, device: &Device, width: usize) -> Result<usize> {
        Ok(self.x.grow(device, width)? + self.y.grow(device, width)?)
    }

    /// Splits X and Y (unless alpha is 0: the kernel then reads neither) and launches the
    /// kernel with `tiles` (the i8 kernel's parameters).
    pub(crate) fn run(
        &mut self,
        device: &Device,
        run: &Run<SddmmOperands, T::Acc>,
        tiles: &super::McSddmm<T>,
        config: cudarc::driver::LaunchConfig,
    ) -> Result<()> {
        device
            .stream
            .memset_zeros(&mut self.wide)
            .map_err(|e| device.error("clearing the planes' width flags", e))?;
        let wide = MutPtr::<u32>::of(&self.wide, device);
        let k = run.ops.k;
        let ((x_hi, x_lo, x_ld), (y_hi, y_lo, y_ld)) = if run.alpha == T::Acc::ZERO {
            let unread =
                |(hi, lo, ld): (MutPtr<u8>, MutPtr<u8>, u32)| (hi.read_only(), lo.read_only(), ld);
            (
                unread(self.x.addresses(device, k)?),
                unread(self.y.addresses(device, k)?),
            )
        } else {
            (
                self.x.split(device, &self.split, &run.ops.x, k, wide)?,
                self.y
                    .split(device, &self.split, &run.ops.y, k, wide.offset(1))?,
            )
        };
        let params = McSddmmPlanes {
            tile_vrow: tiles.tile_vrow,
            tile_start: tiles.tile_start,
            vec_col: tiles.vec_col,
            vec_mask: tiles.vec_mask,
            values: tiles.values,
            x_hi,
            x_lo,
            y_hi,
            y_lo,
            wide: wide.read_only(),
            tiles: tiles.tiles,
            rows: tiles.rows,
            scale_by_values: tiles.scale_by_values,
            x_ld,
            y_ld,
            dense: tiles.dense,
        };
        // SAFETY: the tiles as in the i8 SDDMM; X's planes hold rows rows and Y's cols rows of
        // their ld bytes, multiples of 16 so the 16-byte runs are aligned, read below the
        // K * bits / 8 bytes (rounded up) written by the splits before on this stream; C as in
        // the i8 SDDMM.
        unsafe { self.kernel.launch(config, &params) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of slot `s` from packed planes of `width`.
    fn unpack(width: PlaneWidth, packed: &[u8], planes: u32, slots: usize, s: usize) -> i32 {
        let bits = width.bits();
        let per_byte = 8 / bits as usize;
        let part = |plane: usize| {
            let byte = u32::from(packed[plane * slots / per_byte + s / per_byte]);
            (byte >> ((s % per_byte) as u32 * bits)) & ((1 << bits) - 1)
        };
        let signed = |p: u32| ((p << (32 - bits)) as i32) >> (32 - bits);
        if planes == 1 {
            signed(part(0))
        } else {
            signed(part(1)) * (1 << bits) + part(0) as i32
        }
    }

    #[test]
    fn planes_hold_every_value_of_the_storage_type() {
        let bytes: Vec<i16> = vec![
            i16::MIN,
            -300,
            -129,
            -128,
            -1,
            0,
            1,
            127,
            128,
            255,
            256,
            i16::MAX,
        ];
        let nibbles: Vec<i8> = vec![i8::MIN, -100, -9, -8, -1, 0, 1, 7, 8, 15, 16, i8::MAX];
        let cases: [(PlaneWidth, Vec<i32>, u32); 2] = [
            (
                PlaneWidth::Byte,
                bytes.iter().map(|&v| i32::from(v)).collect(),
                PlaneWidth::Byte.planes_for(&bytes),
            ),
            (
                PlaneWidth::Nibble,
                nibbles.iter().map(|&v| i32::from(v)).collect(),
                PlaneWidth::Nibble.planes_for(&nibbles),
            ),
        ];
        for (width, values, planes) in cases {
            assert_eq!(planes, 2, "{width:?}");
            let packed = match width {
                PlaneWidth::Byte => width.pack(&bytes, planes),
                PlaneWidth::Nibble => width.pack(&nibbles, planes),
            };
            for (s, &v) in values.iter().enumerate() {
                assert_eq!(
                    unpack(width, &packed, planes, values.len(), s),
                    v,
                    "{width:?} slot {s}"
                );
            }
        }
    }

    #[test]
    fn values_within_the_width_take_one_plane_read_as_signed() {
        let small: Vec<i8> = vec![-8, -3, 0, 7, 5, -1];
        assert_eq!(PlaneWidth::Nibble.planes_for(&small), 1);
        let packed = PlaneWidth::Nibble.pack(&small, 1);
        assert_eq!(packed.len(), 3);
        for (s, &v) in small.iter().enumerate() {
            assert_eq!(
                unpack(PlaneWidth::Nibble, &packed, 1, small.len(), s),
                i32::from(v)
            );
        }
        assert_eq!(PlaneWidth::Byte.planes_for(&[-128i16, 127]), 1);
        assert_eq!(PlaneWidth::Byte.planes_for(&[128i16]), 2);
    }
}
