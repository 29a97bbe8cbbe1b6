//! The Magicube SpMM on 16-bit storage ([`Compute::IntBits`] modes `l12-r4 l16-r4 l16-r8
//! l16-r16`), exact. (`i4` and `l8-r4` hold their operands in i8, which the i8 kernels multiply
//! whole.)
//!
//! Operands run as 8-bit planes, all multiplied by the s8/u8 tensor cores: a 16-bit value is a
//! signed high part and an unsigned low part, `v = hi * 2^8 + lo`. A's values are split at plan
//! time; B is split at each run on the device (`mc_split_dense`), which also notes whether any
//! value of B needs its high part. The kernel runs one MMA per pair of planes into its own sums
//! and adds them shifted by the planes' weights, in wrapping i32 arithmetic, so the result is
//! the i32 sum of the whole products modulo 2^32, bit for bit what the oracle computes. Where B
//! fits 8 bits, as the modes with R <= 8 promise, its low plane read as signed is B itself and a
//! step takes 2 MMAs; otherwise 4. So a B past its width is slower, never wrong.
//!
//! On sm_90 (no 4-bit tensor cores, docs/integer.md) 12- and 4-bit values take the 8-bit
//! planes of 16- and 8-bit ones: `l12-r4` and `l16-r4` run as `l16-r8` does.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use sparse_core::{
    Accumulator, Algorithm, Compute, CsrRef, DType, DenseMut, DenseRef, Error, PlanInfo, Result,
    Scalar, SpIndex, SpmmDesc, SpmmPlan,
};
use sparse_formats::{Csr, SrBcrsShape};

use super::{
    padded_b_row, spmm_operands, spmm_run_bytes, stride_grid, warp_grid, DeviceSrBcrs, SpmmUnits,
    RUN_BYTES, SOURCE, THREADS, VECTORS,
};
use crate::device::Device;
use crate::kernel::{kernel_params, Entry, Kernel, KernelSpec, MutPtr, Ptr};
use crate::operand::{host_column, to_u32, Bound, Run, SddmmDense, SddmmOperands};
use crate::plan::{Phase, PlanBase, PlanClock, WidthDesc};

/// The lane runs of the kernel, narrowest first: each pair of planes keeps its own sums, and
/// wider runs would spill registers.
const RUNS: [u32; 2] = [RUN_BYTES[0], RUN_BYTES[1]];

kernel_params! {
    /// `mc_spmm_planes<V, W>`: C (i32) = alpha*A*B + beta*C from the two planes of A's values
    /// in SR-BCRS slot order (hi * 2^8 + lo) and the two of B, row-major with `b_ld` bytes a
    /// row (`b_hi` read only when `*b_wide`). `alpha`, `beta` and C are i32, as bits.
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
    /// `mc_split_dense`: B (`rows x n` at its strides) as its high and low bytes `hi` and `lo`
    /// (row-major, `ld` bytes a row); `wide` set when a value does not fit 8 bits.
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
    /// `mc_sddmm_planes<V>`: the tiles of `McSddmm` with X and Y as their planes (row-major,
    /// `x_ld` and `y_ld` bytes a row); `wide[0]` and `wide[1]` set when X or Y needs its high
    /// byte. `dense` supplies C, K and the scalars (its X and Y are not read).
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

fn planes_entry(vector: usize, run: u32) -> Result<Entry<McSpmmPlanes>> {
    Entry::new(&SOURCE, "mc_spmm_planes", &[&vector, &run])
}

fn split_entry<T: Scalar>() -> Result<Entry<McSplit<T>>> {
    Entry::over_params(&SOURCE, "mc_split_dense")
}

fn sddmm_entry<T: Scalar>(vector: usize) -> Result<Entry<McSddmmPlanes<T>>> {
    Entry::new(&SOURCE, "mc_sddmm_planes", &[&vector])
}

/// Every kernel of the plane path Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = vec![split_entry::<i16>()?.spec().clone()];
    for v in VECTORS {
        specs.push(sddmm_entry::<i16>(v)?.spec().clone());
        for run in RUNS {
            specs.push(planes_entry(v, run)?.spec().clone());
        }
    }
    Ok(specs)
}

/// 16-bit values as the bytes of their high (signed) and low (unsigned) planes.
fn split_values<T: Scalar>(values: &[T]) -> (Vec<i8>, Vec<i8>) {
    values
        .iter()
        .map(|v| {
            let v = v.to_f64() as i32;
            ((v >> 8) as i8, v as u8 as i8)
        })
        .unzip()
}

/// A planned SpMM on 16-bit storage.
pub(crate) struct MixedSpmm<T: Scalar> {
    base: PlanBase<T>,
    /// The structure and A's high plane.
    a: DeviceSrBcrs<i8>,
    /// A's low plane in slot order.
    a_lo: CudaSlice<u8>,
    units: SpmmUnits,
    /// One per lane run of [`RUNS`].
    kernels: Vec<Kernel<McSpmmPlanes>>,
    split: Kernel<McSplit<T>>,
    /// B's two planes (each cols x the reserved N, row-major, rows padded to [`super::B_ALIGN`]).
    b: DensePlanes,
    /// Set by the split when a value of B does not fit 8 bits.
    b_wide: CudaSlice<u32>,
}

/// The plan of an SpMM in `desc.precision`, one of [`Compute::IntBits`] on i16.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmmDesc,
    shape: SrBcrsShape,
    clock: PlanClock,
) -> Result<MixedSpmm<T>> {
    if T::DTYPE != DType::I16 || !matches!(desc.precision.compute, Compute::IntBits { .. }) {
        return Err(Error::internal(format!(
            "no Magicube plane kernel takes {}",
            desc.precision
        )));
    }
    let entries = RUNS
        .iter()
        .map(|&w| planes_entry(shape.vector(), w))
        .collect::<Result<Vec<_>>>()?;
    let split = split_entry::<T>()?;
    let mut specs: Vec<&KernelSpec> = entries.iter().map(Entry::spec).collect();
    specs.push(split.spec());
    let (base, mut clock) =
        PlanBase::new(device, a, desc.info(Algorithm::Magicube), &specs, clock)?;
    let kernels = entries
        .iter()
        .map(|e| device.kernel(e))
        .collect::<Result<Vec<_>>>()?;
    let split = device.kernel(&split)?;
    clock.lap(device, Phase::Kernels)?;
    let (hi, lo) = split_values(a.values());
    let row_ptr = a.row_ptr().iter().map(|p| p.to_usize()).collect();
    let col_idx = a.col_idx().iter().map(|c| c.to_usize()).collect();
    let a_hi = Csr::try_new(a.rows(), a.cols(), row_ptr, col_idx, hi).map_err(|r| r.error)?;
    let m = DeviceSrBcrs::build(device, a_hi.as_ref(), shape, &mut clock)?;
    let units = SpmmUnits::build(device, &m, &mut clock)?;
    let a_lo = device.upload_converted(&m.order.to_slot_order(&lo), 0, |&v| v as u8)?;
    let b_wide = device.alloc_zeros(1, "allocating B's width flag")?;
    clock.lap(device, Phase::Transfer)?;
    let base_cols = base.cols;
    let mut plan = MixedSpmm {
        base,
        a: m,
        a_lo,
        units,
        kernels,
        split,
        b: DensePlanes {
            rows: base_cols,
            planes: None,
        },
        b_wide,
    };
    let workspace = plan.grow(desc.reserved_width())?;
    clock.lap(device, Phase::Device)?;
    let a_bytes = plan.a.bytes() + plan.a_lo.len();
    plan.base.info.bytes = a_bytes + plan.units.bytes() + workspace;
    plan.base.info.plan_time = clock.time();
    Ok(plan)
}

impl<T: Scalar> MixedSpmm<T> {
    /// Sizes B's planes for N up to `width`; the bytes grown.
    fn grow(&mut self, width: usize) -> Result<usize> {
        self.b.grow(&self.base.device, width)
    }

    /// B of `cols x n` (a bound operand) split into its planes: their addresses and row length.
    fn split_b(&mut self, b: &Bound, n: u32) -> Result<(Ptr<u8>, Ptr<u8>, u32)> {
        let device = &self.base.device;
        device
            .stream
            .memset_zeros(&mut self.b_wide)
            .map_err(|e| device.error("clearing B's width flag", e))?;
        let wide = MutPtr::of(&self.b_wide, device);
        self.b.split(device, &self.split, b, n, wide)
    }
}

impl<T: Scalar> SpmmPlan<T> for MixedSpmm<T> {
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
        let (b_hi, b_lo, b_ld) = self.split_b(&ops.b, n)?;
        let a = &self.a;
        let chunks = self.units.pick(n, device.info.multiprocessors);
        if chunks.split {
            // The chunks of a vector-row add into its rows of C.
            self.base.scale(&ops.c, beta)?;
        }
        let widest = spmm_run_bytes(chunks.count, n, device.info.multiprocessors);
        let pick = RUNS.iter().rposition(|&w| w <= widest).unwrap_or(0);
        let w = RUNS[pick];
        let (chunk_vrow, chunk_start, chunk_end) = chunks.pointers(&device);
        let (c_rs, c_cs) = ops.c.strides();
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
            values_hi: Ptr::at(a.values.values.address()),
            values_lo: Ptr::of(&self.a_lo, &device),
            b_hi,
            b_lo,
            b_wide: Ptr::of(&self.b_wide, &device),
            c: ops.c.output(),
            alpha: bits(alpha),
            beta: bits(beta),
        };
        let config = warp_grid(u64::from(chunks.count) * u64::from(n.div_ceil(8 * w)))?;
        // SAFETY: the SR-BCRS as in the i8 SpMM, its low plane of the same slots; B's planes
        // hold cols rows of b_ld bytes, b_ld a multiple of 16 so lane runs are aligned, read
        // below n only, written by the split before on this stream; C spans rows x n i32 at
        // its strides.
        unsafe { self.kernels[pick].launch(config, &params) }
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        let device = &self.base.device;
        let host = host_column(&values, self.base.nnz, device, "update_values")?;
        let (hi, lo) = split_values(&host);
        let at = self.a_lo.device_ptr(&device.stream).0;
        for (plane, address) in [(hi, self.a.values.values.address()), (lo, at)] {
            let slots = self.a.order.to_slot_order(&plane);
            device.stage(address, slots.len(), |start, out: &mut [i8]| {
                out.copy_from_slice(&slots[start..start + out.len()])
            })?;
        }
        Ok(())
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        let width = width.max(self.base.info.reserved_width);
        self.base.info.bytes += self.grow(width)?;
        self.base.info.reserved_width = width;
        Ok(())
    }
}

/// A dense operand split into its two planes on the device at each run (a workspace grown
/// with the reserved width).
struct DensePlanes {
    /// Rows of the operand.
    rows: usize,
    planes: Option<CudaSlice<u8>>,
}

impl DensePlanes {
    /// Bytes of one plane for `width` columns.
    fn plane_len(&self, width: usize) -> Result<usize> {
        padded_b_row(width)?
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
            to_u32("a dense plane's row", padded_b_row(n as usize)?)?,
        ))
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
        let elements = u64::from(params.rows) * u64::from(n);
        // SAFETY: the operand spans rows x n at its strides (a bound operand); each plane holds
        // rows rows of ld >= n bytes (grown for the reserved width, which n is within); `wide`
        // addresses one u32.
        unsafe { kernel.launch(stride_grid(elements.div_ceil(u64::from(THREADS))), &params) }?;
        Ok((hi.read_only(), lo.read_only(), ld))
    }
}

/// The SDDMM kernel of 16-bit storage and its workspace: X and Y split into planes at each run.
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
    /// The kernels of an SDDMM at vector length `vector`, for the plan to compile alongside
    /// its own.
    pub(crate) fn entries(vector: usize) -> Result<SddmmPlanesEntries<T>> {
        Ok((sddmm_entry::<T>(vector)?, split_entry::<T>()?))
    }

    pub(crate) fn new(
        device: &Arc<Device>,
        (kernel, split): &SddmmPlanesEntries<T>,
        (rows, cols): (usize, usize),
    ) -> Result<Self> {
        Ok(SddmmPlanes {
            kernel: device.kernel(kernel)?,
            split: device.kernel(split)?,
            x: DensePlanes { rows, planes: None },
            y: DensePlanes {
                rows: cols,
                planes: None,
            },
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
        // their ld bytes, multiples of 16 so the 16-byte runs are aligned, read below K only,
        // written by the splits before on this stream; C as in the i8 SDDMM.
        unsafe { self.kernel.launch(config, &params) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_values_split_into_a_signed_high_and_an_unsigned_low_byte() {
        let values: Vec<i16> = vec![
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
        let (hi, lo) = split_values(&values);
        for ((&v, &h), &l) in values.iter().zip(&hi).zip(&lo) {
            assert_eq!(i32::from(h) * 256 + i32::from(l as u8), i32::from(v));
            if (-128..=127).contains(&v) {
                assert_eq!(
                    l, v as i8,
                    "a value of 8 bits is its low byte read as signed"
                );
            }
        }
    }
}
