//! SpMV plans on ELL and HYB (`ell.cu` has the kernels): `scalar`, one thread per row over the
//! column-major ELL slots; HYB adds its overflow entries as a CSR over the rows that have any,
//! in segments of at most [`crate::spmv::LONG_ROW`] entries, combined per row in a fixed order. Both are
//! bit-reproducible.
//!
//! The matrix is converted as the CPU backend converts it ([`Converted::from_csr`] with the
//! default [`FillLimit`]), so both backends accept and refuse the same descriptors. Values stay
//! in the format's slots (ELL slots, then HYB's overflow entries); value updates scatter new
//! CSR-ordered values there, and padding keeps its zeros.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use sparse_core::{
    Algorithm, BackendKind, BlockShape, CsrRef, Error, Format, OpKind, PlanInfo, Precision, Result,
    Scalar, SpIndex,
};
use sparse_formats::{Converted, Ell, FillLimit, Hyb, SparseFormat};

use crate::device::Device;
use crate::kernel::{c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, Ptr};
use crate::matrix::FormatValues;
use crate::operand::{to_u32, Run, SpmvDense, SpmvOperands};
use crate::plan::{CudaPlan, Kernels, Phase, PlanBase, PlanClock, SpmvKernels, Values};
use crate::spmv::{grid, segments_entry, DeviceSegments, Segments, SpmvSegments, BLOCK, LONG_ROW};

kernel_params! {
    /// `ell_spmv`: rows whose bit is set in `skip` (null for ELL) are left to the HYB overflow
    /// kernel.
    pub(crate) struct EllSpmv<T> {
        rows: u32,
        width: u32,
        col_idx: ptr(u32),
        values: ptr(T),
        skip: ptr(u32),
        dense: sub(SpmvDense),
    }
}

kernel_params! {
    /// `hyb_overflow_rows`: one warp per row with overflow entries, `row` its matrix row and
    /// `first_segment` where its segments' partials start.
    pub(crate) struct HybRows<T> {
        ell: sub(EllSpmv),
        overflow_rows: u32,
        row: ptr(u32),
        first_segment: ptr(u32),
        partial: ptr(acc),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "ell",
    code: include_str!("../kernels/ell.cu"),
    params: &[
        <SpmvDense<f32> as KernelParams>::C_DECL,
        <EllSpmv<f32> as KernelParams>::C_DECL,
        <HybRows<f32> as KernelParams>::C_DECL,
    ],
    defines: &[("ELL_BLOCK", BLOCK), ("ELL_PADDING", Ell::<f32>::PADDING)],
};

/// The entries a plan of storage type `T` may launch: this file's, and spmv.cu's segment sums.
struct Entries<T: Scalar> {
    ell: Entry<EllSpmv<T>>,
    overflow: Entry<HybRows<T>>,
    segments: Entry<SpmvSegments<T>>,
}

impl<T: Scalar> Entries<T> {
    fn new() -> Result<Self> {
        let t = c_type(T::DTYPE)?;
        Ok(Entries {
            ell: Entry::new(&SOURCE, "ell_spmv", &[&t])?,
            overflow: Entry::new(&SOURCE, "hyb_overflow_rows", &[&t])?,
            segments: segments_entry()?,
        })
    }
}

fn specs_of<T: Scalar>() -> Result<Vec<crate::kernel::KernelSpec>> {
    let e = Entries::<T>::new()?;
    Ok(vec![e.ell.spec().clone(), e.overflow.spec().clone()])
}

/// Every kernel of this file Rust can ask for (spmv.rs lists the segment sums).
pub(crate) fn all_specs() -> Result<Vec<crate::kernel::KernelSpec>> {
    let mut specs = specs_of::<f64>()?;
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    Ok(specs)
}

/// HYB's overflow on the device: the rows that have any, their entries as a CSR over those rows
/// (values in the plan's value buffer, after the ELL slots), its segments, and the bitmap of
/// those rows that the ELL kernel skips.
struct Overflow<T: Scalar> {
    rows: u32,
    row: CudaSlice<u32>,
    row_ptr: CudaSlice<u32>,
    col_idx: CudaSlice<u32>,
    skip: CudaSlice<u32>,
    segments: DeviceSegments<T>,
    segment_kernel: Kernel<SpmvSegments<T>>,
    row_kernel: Kernel<HybRows<T>>,
}

impl<T: Scalar> Overflow<T> {
    /// The overflow of `hyb`, or `None` when no row overflows its ELL part.
    fn new(device: &Arc<Device>, entries: &Entries<T>, hyb: &Hyb<T>) -> Result<Option<Self>> {
        if hyb.coo_nnz() == 0 {
            return Ok(None);
        }
        let (row, row_ptr, skip) = overflow_rows(hyb)?;
        let segments = Segments::of(
            (0..row.len()).map(|i| {
                // Fits: at most the overflow entry count, which fits u32 (checked above).
                (i as u32, row_ptr[i] as usize..row_ptr[i + 1] as usize)
            }),
            LONG_ROW,
        )?;
        let upload = |v: &[u32]| device.upload_converted(v, 0, |&i| i);
        Ok(Some(Overflow {
            rows: to_u32("overflow rows", row.len())?,
            row: upload(&row)?,
            row_ptr: upload(&row_ptr)?,
            col_idx: upload(hyb.coo_cols())?,
            skip: upload(&skip)?,
            segments: segments.upload(device)?,
            segment_kernel: device.kernel(&entries.segments)?,
            row_kernel: device.kernel(&entries.overflow)?,
        }))
    }

    fn bytes(&self) -> usize {
        (2 * self.rows as usize + 1 + self.col_idx.len() + self.skip.len()) * 4
            + self.segments.bytes()
    }
}

/// The rows of `hyb` with overflow entries, those entries' offsets as a CSR over these rows,
/// and a bitmap (32 rows a word) marking them.
fn overflow_rows<T: Scalar>(hyb: &Hyb<T>) -> Result<(Vec<u32>, Vec<u32>, Vec<u32>)> {
    let (mut row, mut row_ptr) = (Vec::new(), Vec::new());
    for (e, &r) in hyb.coo_rows().iter().enumerate() {
        if row.last() != Some(&r) {
            row.push(r);
            row_ptr.push(to_u32("overflow entry", e)?);
        }
    }
    row_ptr.push(to_u32("overflow entries", hyb.coo_nnz())?);
    let mut skip = vec![0u32; hyb.rows().div_ceil(32)];
    for &r in &row {
        skip[r as usize / 32] |= 1 << (r % 32);
    }
    Ok((row, row_ptr, skip))
}

/// The ELL or HYB SpMV of one plan and the matrix it reads.
pub(crate) struct EllFamily<T: Scalar> {
    rows: u32,
    width: u32,
    col_idx: CudaSlice<u32>,
    /// The ELL slots, then HYB's overflow entries.
    values: FormatValues<T>,
    ell_slots: usize,
    kernel: Kernel<EllSpmv<T>>,
    overflow: Option<Overflow<T>>,
}

/// A planned SpMV of ELL or HYB (`scalar`), `a` converted as the CPU backend converts it.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    (format, precision, algorithm): (Format, Precision, Algorithm),
    block: Option<BlockShape>,
    clock: PlanClock,
) -> Result<CudaPlan<T, EllFamily<T>>> {
    if algorithm != Algorithm::Scalar {
        return Err(Error::internal(format!(
            "the table lists no {algorithm} SpMV on {format}"
        )));
    }
    let converted = Converted::from_csr(a, format, block, FillLimit::default())?;
    let (ell, hyb): (&Ell<T>, Option<&Hyb<T>>) = match &converted {
        Converted::Ell(ell) => (ell, None),
        Converted::Hyb(hyb) => (hyb.ell(), Some(hyb)),
        other => {
            return Err(Error::internal(format!(
                "the ELL family was given {}",
                other.format()
            )))
        }
    };
    let order = match hyb {
        Some(h) => h.value_order(),
        None => ell.value_order(),
    };
    let entries = Entries::<T>::new()?;
    let mut specs = vec![entries.ell.spec()];
    if hyb.is_some_and(|h| h.coo_nnz() > 0) {
        specs.extend([entries.overflow.spec(), entries.segments.spec()]);
    }
    let info = PlanInfo::new(
        BackendKind::Cuda,
        OpKind::Spmv,
        format,
        precision,
        algorithm,
        true,
    );
    let (base, mut clock) = PlanBase::new(device, a, info, &specs, clock)?;
    let coo_values = hyb.map_or(&[][..], |h| h.coo_values());
    let values = FormatValues::upload(device, &[ell.values(), coo_values], &order)?;
    let family = EllFamily {
        rows: to_u32("number of rows", ell.rows())?,
        width: to_u32("ELL width", ell.width())?,
        col_idx: device.upload_converted(ell.col_idx(), 0, |&c| c)?,
        values,
        ell_slots: ell.stored_slots(),
        kernel: device.kernel(&entries.ell)?,
        overflow: match hyb {
            Some(h) => Overflow::new(device, &entries, h)?,
            None => None,
        },
    };
    clock.lap(device, Phase::Transfer)?;
    let bytes = family.ell_slots * 4
        + family.values.bytes()
        + family.overflow.as_ref().map_or(0, Overflow::bytes);
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> SpmvKernels<T> for EllFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmvOperands, T::Acc>) -> Result<()> {
        let device = &base.device;
        let ell = EllSpmv {
            rows: self.rows,
            width: self.width,
            col_idx: Ptr::of(&self.col_idx, device),
            values: self.values.pointer(),
            skip: self
                .overflow
                .as_ref()
                .map_or(Ptr::NULL, |o| Ptr::of(&o.skip, device)),
            dense: SpmvDense::new(run),
        };
        // SAFETY: col_idx and values hold rows * width slots, column-major, every real column
        // below cols; x spans cols elements at stride incx and y rows at stride incy (bound
        // operands); skip, when given, holds a bit per row; one thread per row.
        unsafe { self.kernel.launch(grid(u64::from(self.rows))?, &ell)? };
        let Some(o) = &self.overflow else {
            return Ok(());
        };
        let coo = (
            Ptr::of(&o.row_ptr, device),
            Ptr::of(&o.col_idx, device),
            self.values.pointer().offset(self.ell_slots),
        );
        o.segments
            .launch(&o.segment_kernel, device, coo, ell.dense)?;
        let params = HybRows {
            ell,
            overflow_rows: o.rows,
            row: Ptr::of(&o.row, device),
            first_segment: Ptr::of(&o.segments.first, device),
            partial: Ptr::of_bytes(&o.segments.partial, device),
        };
        // SAFETY: `row` names overflow_rows rows of y; first_segment holds overflow_rows + 1
        // offsets into the partials written above (stream order); the ELL slots as above.
        unsafe { o.row_kernel.launch(grid(u64::from(o.rows) * 32)?, &params) }
    }
}

impl<T: Scalar> Kernels<T> for EllFamily<T> {
    fn values(&self) -> Values<'_, T> {
        self.values.target()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_formats::{Csr, HybWidth};

    #[test]
    fn overflow_is_a_csr_over_the_rows_that_have_any() {
        // Row lengths 3, 0, 1, 4 and 40 rows of 1 after them: at width 1, rows 0 and 3 and
        // the last-but-one (row 42, 5 entries) overflow.
        let mut triplets = vec![(0, 0, 1.0), (0, 2, 2.0), (0, 4, 3.0), (2, 1, 4.0)];
        triplets.extend((0..4).map(|j| (3, j, 5.0)));
        triplets.extend((4..44).map(|i| (i, i % 5, 6.0)));
        triplets.extend((1..5).map(|j| (42, (42 + j) % 5, 7.0)));
        let a = Csr::<f64>::from_triplets(44, 5, &triplets).unwrap();
        let hyb = Hyb::from_csr(a.as_ref(), HybWidth::Fixed(1), FillLimit::UNLIMITED).unwrap();
        let (row, row_ptr, skip) = overflow_rows(&hyb).unwrap();
        assert_eq!(row, [0, 3, 42]);
        assert_eq!(row_ptr, [0, 2, 5, 9]);
        assert_eq!(skip, [0b1001, 1 << 10]);
    }
}
