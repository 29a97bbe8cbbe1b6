//! The Magicube SpMM with f32 at its edges ([`Precision::F32_VIA_I8`]): f32 in, f32 out, i8
//! inside. At plan time A is quantized on the host with one scale per row (sparse-formats'
//! `quantize`) and stored as i8 SR-BCRS; each run quantizes B on the device with one scale
//! per column (the same rules: f32 scales, ties to even, [-127, 127]), runs the i8 SpMM and
//! dequantizes in its epilogue: `C = alpha * s_row(i) * s_col(j) * sum_k A_q(i,k) B_q(k,j) +
//! beta * C`. The integer sums are exact, so the error is the quantization's alone.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use sparse_core::{
    Accumulator, Algorithm, CsrRef, DenseMut, DenseRef, Error, PlanInfo, Result, Scalar, SpIndex,
    SpmmDesc, SpmmPlan,
};
use sparse_formats::quantize::{quantize_value, scale_for, QuantBits};
use sparse_formats::{Csr, SrBcrsShape};

use super::{
    padded_b_row, spmm_operands, spmm_run_bytes, stride_grid, warp_grid, DeviceChunks,
    DeviceSrBcrs, McQuantize, McSpmmDequant, RUN_BYTES, SOURCE, THREADS,
};
use crate::device::Device;
use crate::kernel::{Entry, Kernel, KernelSpec, MutPtr, Ptr};
use crate::operand::{host_column, to_u32};
use crate::plan::{Phase, PlanBase, PlanClock, WidthDesc};

fn dequant_entry<T: Scalar>(vector: usize, run: u32) -> Result<Entry<McSpmmDequant<T>>> {
    Entry::new(&SOURCE, "mc_spmm_dequant", &[&vector, &run])
}

/// Every kernel of the quantized path Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = vec![
        Entry::<McQuantize<f32>>::over_params(&SOURCE, "mc_column_scales")?
            .spec()
            .clone(),
        Entry::<McQuantize<f32>>::over_params(&SOURCE, "mc_quantize")?
            .spec()
            .clone(),
    ];
    for v in super::VECTORS {
        for run in RUN_BYTES {
            specs.push(dequant_entry::<f32>(v, run)?.spec().clone());
        }
    }
    Ok(specs)
}

/// Values in CSR order (rows `row_ptr`) quantized with one scale per row: the i8 values and
/// the scales.
fn quantize_rows(row_ptr: &[usize], values: &[f64]) -> (Vec<i8>, Vec<f32>) {
    let bits = QuantBits::I8;
    let scales: Vec<f32> = row_ptr
        .windows(2)
        .map(|r| {
            scale_for(
                values[r[0]..r[1]].iter().fold(0.0, |m, x| x.abs().max(m)),
                bits,
            )
        })
        .collect();
    let q = row_ptr
        .windows(2)
        .zip(&scales)
        .flat_map(|(r, &s)| {
            values[r[0]..r[1]]
                .iter()
                .map(move |&x| quantize_value(x, s, bits))
        })
        .collect();
    (q, scales)
}

/// `values` as f64, refused when one is not finite.
fn finite_values<T: Scalar>(values: impl IntoIterator<Item = T>) -> Result<Vec<f64>> {
    values
        .into_iter()
        .map(|v| {
            let x = v.to_f64();
            if x.is_finite() {
                Ok(x)
            } else {
                Err(Error::invalid(format!(
                    "an f32-i8 SpMM quantizes A, whose entry {x} has no integer image"
                )))
            }
        })
        .collect()
}

/// A planned f32-i8 SpMM.
pub(crate) struct QuantizedSpmm<T: Scalar> {
    base: PlanBase<T>,
    a: DeviceSrBcrs<i8>,
    /// Whole vector-rows: f32 sums of a split row would depend on the order of their atomics.
    rows: DeviceChunks,
    /// A's CSR pattern, for requantizing new values row by row.
    row_ptr: Vec<usize>,
    row_scale: CudaSlice<f32>,
    kernels: Vec<Kernel<McSpmmDequant<T>>>,
    column_scales: Kernel<McQuantize<T>>,
    quantize: Kernel<McQuantize<T>>,
    /// B quantized (cols x the reserved N, row-major, rows padded to [`super::B_ALIGN`]) and its
    /// column scales.
    b_q: Option<CudaSlice<u8>>,
    col_scale: Option<CudaSlice<f32>>,
}

/// The plan of an f32-i8 SpMM.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &SpmmDesc,
    shape: SrBcrsShape,
    clock: PlanClock,
) -> Result<QuantizedSpmm<T>> {
    let dequant = RUN_BYTES
        .iter()
        .map(|&w| dequant_entry::<T>(shape.vector(), w))
        .collect::<Result<Vec<_>>>()?;
    let scales = Entry::<McQuantize<T>>::over_params(&SOURCE, "mc_column_scales")?;
    let quantize = Entry::<McQuantize<T>>::over_params(&SOURCE, "mc_quantize")?;
    let mut specs: Vec<&KernelSpec> = dequant.iter().map(Entry::spec).collect();
    specs.extend([scales.spec(), quantize.spec()]);
    let (base, mut clock) =
        PlanBase::new(device, a, desc.info(Algorithm::Magicube), &specs, clock)?;
    let kernels = dequant
        .iter()
        .map(|e| device.kernel(e))
        .collect::<Result<Vec<_>>>()?;
    let (column_scales, quantize) = (device.kernel(&scales)?, device.kernel(&quantize)?);
    clock.lap(device, Phase::Kernels)?;
    let row_ptr: Vec<usize> = a.row_ptr().iter().map(|p| p.to_usize()).collect();
    let (q, scales) = quantize_rows(&row_ptr, &finite_values(a.values().iter().copied())?);
    let col_idx = a.col_idx().iter().map(|c| c.to_usize()).collect();
    let a_q = Csr::try_new(a.rows(), a.cols(), row_ptr.clone(), col_idx, q).map_err(|r| r.error)?;
    let m = DeviceSrBcrs::build(device, a_q.as_ref(), shape, &mut clock)?;
    let rows = DeviceChunks::upload(device, &m.chunks(usize::MAX, true))?;
    let row_scale = device.upload_converted(&scales, 0, |&s| s)?;
    clock.lap(device, Phase::Transfer)?;
    let mut plan = QuantizedSpmm {
        base,
        a: m,
        rows,
        row_ptr,
        row_scale,
        kernels,
        column_scales,
        quantize,
        b_q: None,
        col_scale: None,
    };
    let workspace = plan.grow(desc.reserved_width())?;
    clock.lap(device, Phase::Device)?;
    let bytes = plan.a.bytes() + plan.rows.bytes() + plan.base.rows * 4 + workspace;
    plan.base.info.bytes = bytes;
    plan.base.info.plan_time = clock.time();
    Ok(plan)
}

impl<T: Scalar> QuantizedSpmm<T> {
    /// Sizes the quantized B and its scales for N up to `width`; the bytes grown.
    fn grow(&mut self, width: usize) -> Result<usize> {
        let device = &self.base.device;
        let len = padded_b_row(width)?
            .checked_mul(self.base.cols.max(1))
            .ok_or_else(|| Error::overflow::<usize>("quantized B", width))?;
        Ok(
            device.grow_zeroed(&mut self.b_q, len, "allocating the quantized B")?
                + device.grow_zeroed(&mut self.col_scale, width.max(1), "allocating B's scales")?,
        )
    }
}

impl<T: Scalar> SpmmPlan<T> for QuantizedSpmm<T> {
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
        let base = &self.base;
        let device = &base.device;
        let n = ops.n;
        let (b_q, col_scale) = match (&self.b_q, &self.col_scale) {
            (Some(q), Some(s)) => (q, s),
            _ => return Err(Error::internal("the quantized B was never allocated")),
        };
        let b_ld = to_u32("quantized B row", padded_b_row(n as usize)?)?;
        let (b_rs, b_cs) = ops.b.strides();
        let quantize = McQuantize {
            rows: to_u32("rows of B", base.cols)?,
            n,
            b: ops.b.input(),
            b_rs,
            b_cs,
            scale: MutPtr::of(col_scale, device),
            q: MutPtr::of(b_q, device),
            q_ld: b_ld,
        };
        // SAFETY: B spans base.cols x n at its strides (a bound operand); the scales hold at
        // least n floats and the quantized B cols rows of b_ld >= n bytes (grown for the
        // reserved width, which n is within).
        unsafe {
            self.column_scales
                .launch(stride_grid(u64::from(n)), &quantize)
        }?;
        let elements = u64::from(quantize.rows) * u64::from(n);
        // SAFETY: as above; the scales were written by the launch before, on this stream.
        unsafe {
            self.quantize.launch(
                stride_grid(elements.div_ceil(u64::from(THREADS))),
                &quantize,
            )
        }?;
        let (a, chunks) = (&self.a, &self.rows);
        let w = spmm_run_bytes(chunks.count, n, device.info.multiprocessors);
        let pick = RUN_BYTES.iter().position(|&r| r == w).unwrap_or(0);
        let (chunk_vrow, chunk_start, chunk_end) = chunks.pointers(device);
        let (c_rs, c_cs) = ops.c.strides();
        let params = McSpmmDequant {
            chunks: chunks.count,
            rows: a.rows,
            n,
            b_ld,
            c_rs,
            c_cs,
            chunk_vrow,
            chunk_start,
            chunk_end,
            vec_col: Ptr::of(&a.vec_col, device),
            values: Ptr::at(a.values.values.address()),
            b: Ptr::of(b_q, device),
            row_scale: Ptr::of(&self.row_scale, device),
            col_scale: Ptr::of(col_scale, device),
            c: ops.c.output(),
            alpha: alpha.to_f64() as f32,
            beta: beta.to_f64() as f32,
        };
        let config = warp_grid(u64::from(chunks.count) * u64::from(n.div_ceil(8 * w)))?;
        // SAFETY: the SR-BCRS as in the i8 SpMM; the quantized B holds cols rows of b_ld
        // bytes, b_ld a multiple of 16 so lane runs are aligned, read below n only; the row
        // scales hold rows floats and the column scales n; C spans rows x n at its strides.
        unsafe { self.kernels[pick].launch(config, &params) }
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        let device = &self.base.device;
        let host = host_column(&values, self.base.nnz, device, "update_values")?;
        let host = finite_values(host)?;
        let (q, scales) = quantize_rows(&self.row_ptr, &host);
        let slots = self.a.order.to_slot_order(&q);
        device.stage(
            self.a.values.values.address(),
            slots.len(),
            |start, out: &mut [i8]| {
                out.copy_from_slice(&slots[start..start + out.len()]);
            },
        )?;
        let scale_at = self.row_scale.device_ptr(&device.stream).0;
        device.stage(scale_at, scales.len(), |start, out: &mut [f32]| {
            out.copy_from_slice(&scales[start..start + out.len()]);
        })
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        let width = width.max(self.base.info.reserved_width);
        self.base.info.bytes += self.grow(width)?;
        self.base.info.reserved_width = width;
        Ok(())
    }
}
