//! SpMV plans on BSR (`bsr.cu` has the kernel): `vector`, a sub-warp of W lanes per block row,
//! each lane reading chunks of K consecutive slots of a block row with one vector load, for every
//! block shape the format holds (r and c each 1, 2, 4, 8 or 16). Bit-reproducible.
//!
//! The matrix is converted as the CPU backend converts it ([`Converted::from_csr`] with the
//! descriptor's block shape, 4x4 when it names none, and the default [`FillLimit`]). The values
//! stay in BSR's slots, fill and ragged edges included (zeros); value updates scatter new
//! CSR-ordered values there. The occupancy mask goes to the device only when some block holds
//! fill, as 32-bit words, `ceil(r*c / 32)` per block.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, DevicePtr};
use sparse_core::{
    Algorithm, BackendKind, BlockShape, CsrRef, Error, Format, OpKind, PlanInfo, Precision, Result,
    Scalar, SpIndex,
};
use sparse_formats::{Bsr, Converted, FillLimit, SparseFormat, BSR_BLOCK_SIZES};

use crate::device::Device;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, Ptr,
};
use crate::matrix::FormatValues;
use crate::operand::{to_u32, Run, SpmvDense, SpmvOperands};
use crate::plan::{CudaPlan, Kernels, Phase, PlanBase, PlanClock, SpmvKernels, Values};
use crate::spmv::{grid, vector_width, BLOCK, VECTOR_LANES};

kernel_params! {
    /// `bsr_spmv<W, K>`: `row_lanes` lanes per row of a block row (dividing c / K, with r *
    /// row_lanes dividing W); `mask` null when every slot of every block holds an entry.
    pub(crate) struct BsrSpmv<T> {
        rows: u32,
        block_rows: u32,
        r: u32,
        c: u32,
        row_lanes: u32,
        mask_words: u32,
        block_row_ptr: ptr(u32),
        block_col: ptr(u32),
        values: ptr(T),
        mask: ptr(u32),
        dense: sub(SpmvDense),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "bsr",
    code: include_str!("../kernels/bsr.cu"),
    params: &[
        <SpmvDense<f32> as KernelParams>::C_DECL,
        <BsrSpmv<f32> as KernelParams>::C_DECL,
    ],
    defines: &[("BSR_BLOCK", BLOCK), ("BSR_GROUP", BSR_GROUP)],
};

/// Slots a lane reads with one vector load: as many as 16 bytes hold, at most a block's width.
fn chunk_width<T: Scalar>(c: usize) -> u32 {
    (16 / size_of::<T>()).min(c) as u32
}

/// `bsr_spmv<T, lanes, chunk>`.
fn entry<T: Scalar>(lanes: u32, chunk: u32) -> Result<Entry<BsrSpmv<T>>> {
    Entry::new(&SOURCE, "bsr_spmv", &[&c_type(T::DTYPE)?, &lanes, &chunk])
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let chunks = BSR_BLOCK_SIZES.map(chunk_width::<T>);
    let mut specs = Vec::new();
    for (n, &chunk) in chunks.iter().enumerate() {
        if chunks[..n].contains(&chunk) {
            continue;
        }
        for &lanes in &VECTOR_LANES {
            specs.push(entry::<T>(lanes, chunk)?.spec().clone());
        }
    }
    Ok(specs)
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = specs_of::<f64>()?;
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    Ok(specs)
}

/// `a` in BSR with `block` (4x4 when `None`), as the CPU backend converts it.
pub(crate) fn convert<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    block: Option<BlockShape>,
) -> Result<Bsr<T>> {
    match Converted::from_csr(a, Format::Bsr, block, FillLimit::default())? {
        Converted::Bsr(bsr) => Ok(bsr),
        other => Err(Error::internal(format!(
            "a BSR conversion gave {}",
            other.format()
        ))),
    }
}

/// BSR on the device with u32 indices: what this backend's kernel and cuSPARSE read.
pub(crate) struct DeviceBsr<T> {
    pub rows: u32,
    pub block: BlockShape,
    pub block_rows: u32,
    pub block_cols: u32,
    pub blocks: u32,
    pub block_row_ptr: CudaSlice<u32>,
    pub block_col: CudaSlice<u32>,
    pub values: FormatValues<T>,
    /// The occupancy mask, `mask_words` 32-bit words per block; `None` without fill.
    pub mask: Option<CudaSlice<u32>>,
    pub mask_words: u32,
}

impl<T: Scalar> DeviceBsr<T> {
    /// `bsr` on the device; its mask only when `with_mask` and some block holds fill.
    pub fn upload(device: &Arc<Device>, bsr: &Bsr<T>, with_mask: bool) -> Result<Self> {
        let block = bsr.block_shape();
        let block_size = block.rows * block.cols;
        let words = block_size.div_ceil(32);
        let mask = if with_mask && bsr.stored_slots() > bsr.nnz() {
            let words64 = block_size.div_ceil(64);
            let slice = device.alloc_zeros::<u32>(bsr.nblocks() * words, "allocating a mask")?;
            let address = slice.device_ptr(&device.stream).0;
            device.stage(address, bsr.nblocks() * words, |start, out: &mut [u32]| {
                for (k, w) in out.iter_mut().enumerate() {
                    let (b, word) = ((start + k) / words, (start + k) % words);
                    // The low or high half of a 64-bit word of the format's mask.
                    *w = (bsr.mask()[b * words64 + word / 2] >> (32 * (word % 2))) as u32;
                }
            })?;
            Some(slice)
        } else {
            None
        };
        let copy = |v: &[u32]| device.upload_converted(v, 0, |&i| i);
        Ok(DeviceBsr {
            rows: to_u32("number of rows", bsr.rows())?,
            block,
            block_rows: to_u32("number of block rows", bsr.block_rows())?,
            block_cols: to_u32("number of block columns", bsr.block_cols())?,
            blocks: to_u32("number of blocks", bsr.nblocks())?,
            block_row_ptr: copy(bsr.block_row_ptr())?,
            block_col: copy(bsr.block_col())?,
            values: FormatValues::upload(device, &[bsr.values()], &bsr.value_order())?,
            mask,
            mask_words: to_u32("mask words per block", words)?,
        })
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        let mask = self
            .mask
            .as_ref()
            .map_or(0, |_| self.blocks as usize * self.mask_words as usize * 4);
        (self.block_rows as usize + 1 + self.blocks as usize) * 4 + self.values.bytes() + mask
    }
}

/// The BSR SpMV of one plan and the matrix it reads.
pub(crate) struct BsrFamily<T: Scalar> {
    a: DeviceBsr<T>,
    lanes: BsrLanes,
    kernel: Kernel<BsrSpmv<T>>,
}

/// How `bsr_spmv` spreads a block row over lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BsrLanes {
    /// Lanes per block row (W).
    lanes: u32,
    /// Lanes per row of a block row (L).
    row_lanes: u32,
    /// Consecutive slots a lane reads with one vector load (K).
    chunk: u32,
}

/// Chunks whose loads a lane of `bsr_spmv` issues together.
const BSR_GROUP: u32 = 4;

/// W, L and K for `bsr`, the block rows' slots holding an entry each unless `fill`
/// (`docs/results/h200-2026-11-29g.md`, H200):
/// - Without fill, x's chunks are vector loads too, and a lane takes about one load group of
///   [`BSR_GROUP`] chunks, so that a warp has several block rows' bytes in flight. On a 3D
///   stencil of 4 x 4 blocks (30M entries) that ran 2.8x (f32), 3.1x (f16) and 1.5x (f64) as
///   fast as a lane a slot, and 1.2x to 1.7x as fast as cuSPARSE's BSR SpMV.
/// - With fill, x is read slot by slot under the mask, and a lane takes one chunk of a block
///   row: a lane a load group left the FEM matrices' chains of loads longer. Chunks of four
///   slots or more (f32, f16) ran 1.1x to 2.7x as fast as a lane a slot. In f64 a lane takes
///   one slot: chunks of two were up to 12% slower on the larger FEM matrices.
///
/// K is then as wide as [`chunk_width`] allows (1 for f64 with fill); W the power of two
/// nearest the mean lanes per block row so counted, at least r; L as many of them per row as
/// c / K and W allow.
fn lanes<T: Scalar>(bsr: &Bsr<T>) -> BsrLanes {
    let BlockShape { rows: r, cols: c } = bsr.block_shape();
    let fill = bsr.stored_slots() > bsr.nnz();
    let chunk = if fill && size_of::<T>() >= 8 {
        1
    } else {
        chunk_width::<T>(c)
    };
    let per_lane = if fill { 1.0 } else { f64::from(BSR_GROUP) };
    let chunks = bsr.stored_slots() as f64 / f64::from(chunk);
    let lanes = vector_width(chunks / bsr.block_rows().max(1) as f64 / per_lane).max(r as u32);
    BsrLanes {
        lanes,
        row_lanes: (c as u32 / chunk).min(lanes / r as u32),
        chunk,
    }
}

/// A planned SpMV of BSR (`vector`), `a` converted with `block` as the CPU backend converts it.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    (precision, algorithm): (Precision, Algorithm),
    block: Option<BlockShape>,
    clock: PlanClock,
) -> Result<CudaPlan<T, BsrFamily<T>>> {
    if algorithm != Algorithm::Vector {
        return Err(Error::internal(format!(
            "the table lists no {algorithm} SpMV on bsr"
        )));
    }
    let bsr = convert(a, block)?;
    let lanes = lanes(&bsr);
    let entry = entry::<T>(lanes.lanes, lanes.chunk)?;
    let info = PlanInfo::new(
        BackendKind::Cuda,
        OpKind::Spmv,
        Format::Bsr,
        precision,
        algorithm,
        true,
    );
    let (base, mut clock) = PlanBase::new(device, a, info, &[entry.spec()], clock)?;
    let dev = DeviceBsr::upload(device, &bsr, true)?;
    clock.lap(device, Phase::Transfer)?;
    let bytes = dev.bytes();
    let family = BsrFamily {
        a: dev,
        lanes,
        kernel: device.kernel(&entry)?,
    };
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> SpmvKernels<T> for BsrFamily<T> {
    fn run(&mut self, base: &PlanBase<T>, run: &Run<SpmvOperands, T::Acc>) -> Result<()> {
        let (device, a) = (&base.device, &self.a);
        let params = BsrSpmv {
            rows: a.rows,
            block_rows: a.block_rows,
            r: a.block.rows as u32,
            c: a.block.cols as u32,
            row_lanes: self.lanes.row_lanes,
            mask_words: a.mask_words,
            block_row_ptr: Ptr::of(&a.block_row_ptr, device),
            block_col: Ptr::of(&a.block_col, device),
            values: a.values.pointer(),
            mask: a.mask.as_ref().map_or(Ptr::NULL, |m| Ptr::of(m, device)),
            dense: SpmvDense::new(run),
        };
        // SAFETY: a valid BSR (converted from a canonical CSR): block_row_ptr holds
        // block_rows + 1 offsets into block_col, values holds r*c per block, mask (when given)
        // mask_words per block with no bit outside the matrix, and without it no slot lies
        // outside the matrix; x spans cols elements at stride incx and y rows at stride incy;
        // W lanes per block row, with r * row_lanes dividing W and row_lanes dividing c / K;
        // values aligned to K elements (its own allocation; chunks start at multiples of K).
        unsafe {
            self.kernel.launch(
                grid(u64::from(a.block_rows) * u64::from(self.lanes.lanes))?,
                &params,
            )
        }
    }
}

impl<T: Scalar> Kernels<T> for BsrFamily<T> {
    fn values(&self) -> Values<'_, T> {
        self.a.values.target()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_formats::Csr;

    /// The kernel's lane layout holds for every block shape and density, in every storage
    /// type: W among the instantiated widths and at least r, K a divisor of c, L a divisor of
    /// c / K, r * L a divisor of W, and the kernel instantiated.
    #[test]
    fn lanes_fit_every_block_shape() {
        lanes_fit::<f64>();
        lanes_fit::<f32>();
        lanes_fit::<half::f16>();
    }

    fn lanes_fit<T: Scalar>() {
        let one = T::from_f64(1.0);
        let dense = |n: usize| {
            let t: Vec<_> = (0..n * n).map(|k| (k / n, k % n, one)).collect();
            Csr::<T>::from_triplets(n, n, &t).unwrap()
        };
        let diagonal = |n: usize| {
            let t: Vec<_> = (0..n).map(|i| (i, i, one)).collect();
            Csr::<T>::from_triplets(n, n, &t).unwrap()
        };
        let specs = specs_of::<T>().unwrap();
        for a in [
            dense(48),
            dense(40),
            diagonal(40),
            Csr::<T>::zeros(0, 3),
            Csr::<T>::zeros(7, 3),
        ] {
            for r in BSR_BLOCK_SIZES {
                for c in BSR_BLOCK_SIZES {
                    let bsr = Bsr::from_csr(a.as_ref(), r, c, FillLimit::UNLIMITED).unwrap();
                    let BsrLanes {
                        lanes: w,
                        row_lanes: l,
                        chunk: k,
                    } = lanes(&bsr);
                    let (r, c) = (r as u32, c as u32);
                    assert!(VECTOR_LANES.contains(&w) && w >= r, "{r}x{c}: W {w}");
                    assert!(
                        l >= 1 && c % (k * l) == 0 && w % (r * l) == 0,
                        "{r}x{c}: W {w} L {l} K {k}"
                    );
                    let spec = entry::<T>(w, k).unwrap().spec().clone();
                    assert!(specs.contains(&spec), "{r}x{c}: {}", spec.expression);
                }
            }
        }
    }
}
