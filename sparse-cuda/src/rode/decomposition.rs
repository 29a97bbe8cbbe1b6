//! The RoDe row decomposition (`rode.cu` describes it), built on the device from the CSR row
//! pointers: `rode_preprocess_count` reduces per-row counts to one total per block of rows,
//! `rode_preprocess_scan` turns the block totals into offsets (one block, looping over them), the
//! host reads the grand total back to size the lists, and `rode_preprocess_fill` recomputes the
//! counts, scans them within its block and writes the lists. That is two reads of the row
//! pointers, a few kernels and one small copy back, whatever the matrix.
//!
//! `twin` (tests only) computes the same lists on the host: it is the specification the
//! device lists are held to.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{Error, Result, Scalar};

use super::SOURCE;
use crate::device::Device;
use crate::kernel::{kernel_params, Entry, KernelSpec, MutPtr, Ptr};
use crate::matrix::DeviceCsr;

/// Entries of a sparse tile (`RODE_TILE`); segments are whole tiles.
pub(crate) const TILE: u32 = 32;
/// Tile starts are multiples of this many entries (`RODE_ALIGN`): 16 bytes of column indices,
/// so a tile can be copied with cp.async.
pub(crate) const ALIGN: u32 = 4;
/// The slot of a segment that is the only part of its row (`RODE_NONE`).
pub(crate) const NONE: u32 = u32::MAX;
/// Threads per block and consecutive rows per thread of the count and fill kernels
/// (`RODE_PRE_THREADS`, `RODE_PRE_ROWS`), and threads of the scan kernel (`RODE_SCAN_THREADS`).
pub(crate) const PRE_THREADS: u32 = 256;
pub(crate) const PRE_ROWS: u32 = 4;
pub(crate) const SCAN_THREADS: u32 = 1024;
/// The u32 fields of `RodeCounts` in rode.cu: segments, residuals, listed rows, slots.
const COUNTS: usize = 4;

kernel_params! {
    /// `rode_preprocess_count`: the counts of each block's rows, a `RodeCounts` (COUNTS words)
    /// per block in `block_totals`. `with_combine`: the SpMM decomposition, else SDDMM's.
    pub(crate) struct RodeCount {
        rows: u32,
        row_ptr: ptr(u32),
        seg_len: u32,
        with_combine: u32,
        block_totals: out(u32),
    }
}

kernel_params! {
    /// `rode_preprocess_scan`: the first `blocks` totals become offsets in place, the matrix's
    /// totals after them.
    pub(crate) struct RodeScan {
        blocks: u32,
        block_totals: out(u32),
    }
}

kernel_params! {
    /// `rode_preprocess_fill`: the lists, from the offsets the scan left; `seg_slot` and
    /// `listed_row` are written only `with_combine`.
    pub(crate) struct RodeFill {
        rows: u32,
        row_ptr: ptr(u32),
        seg_len: u32,
        offsets: ptr(u32),
        with_combine: u32,
        part_row: out(u32),
        part_lo: out(u32),
        part_hi: out(u32),
        seg_slot: out(u32),
        listed_row: out(u32),
    }
}

/// The preprocessing kernels' entries.
pub(crate) struct Preprocess {
    count: Entry<RodeCount>,
    scan: Entry<RodeScan>,
    fill: Entry<RodeFill>,
}

impl Preprocess {
    pub fn new() -> Result<Self> {
        Ok(Preprocess {
            count: Entry::over_params(&SOURCE, "rode_preprocess_count")?,
            scan: Entry::over_params(&SOURCE, "rode_preprocess_scan")?,
            fill: Entry::over_params(&SOURCE, "rode_preprocess_fill")?,
        })
    }

    pub fn specs(&self) -> [&KernelSpec; 3] {
        [self.count.spec(), self.scan.spec(), self.fill.spec()]
    }
}

/// The lists the SpMM combining needs on top of the parts (`rode.cu`: workspace slots of split
/// rows, and the split rows).
pub(crate) struct Combine {
    /// Rows split in several segments.
    pub listed: u32,
    /// Workspace slots: one per segment of a split row, a row's in order.
    pub slots: u32,
    /// Slot of each segment, [`NONE`] for the only part of its row.
    pub seg_slot: CudaSlice<u32>,
    pub listed_row: CudaSlice<u32>,
}

impl Combine {
    /// Bytes of the lists on the device.
    pub fn bytes(&self) -> usize {
        (self.seg_slot.len() + self.listed_row.len()) * size_of::<u32>()
    }
}

/// A matrix's block segments and residuals, on the device: every part's row and its entries
/// `lo..hi` of the row, the segments first, then the residuals.
pub(crate) struct Decomposition {
    /// Entries per block segment (a multiple of [`TILE`]).
    pub seg_len: u32,
    pub segments: u32,
    /// Rows shorter than a tile, each the only part of its row (for SpMM, empty rows too).
    pub residuals: u32,
    pub part_row: CudaSlice<u32>,
    /// A segment's first entry: its row's first for the row's first segment, whose first tile
    /// starts before it at the aligned start, else the segment's aligned start.
    pub part_lo: CudaSlice<u32>,
    pub part_hi: CudaSlice<u32>,
}

/// The scanned counts of a matrix: per block of rows the counts before it, then the totals.
struct Counted {
    blocks: u32,
    offsets: CudaSlice<u32>,
    totals: [u32; COUNTS],
}

/// `len` zeroed u32 on the device (one when `len` is 0, so the pointer stays valid).
fn list(device: &Device, len: u32) -> Result<CudaSlice<u32>> {
    device.alloc_zeros::<u32>(len as usize, "allocating the RoDe lists")
}

impl Decomposition {
    /// SpMM's decomposition of `a` into segments of `seg_len` entries and residuals: empty rows
    /// are residuals, and what combining split rows needs is listed.
    pub fn for_spmm<T: Scalar>(
        device: &Arc<Device>,
        kernels: &Preprocess,
        a: &DeviceCsr<T>,
        seg_len: u32,
    ) -> Result<(Self, Combine)> {
        let counted = count(device, kernels, a, seg_len, true)?;
        let [segments, _, listed, slots] = counted.totals;
        let combine = Combine {
            listed,
            slots,
            seg_slot: list(device, segments)?,
            listed_row: list(device, listed)?,
        };
        let parts = Self::fill(device, kernels, a, seg_len, &counted, Some(&combine))?;
        Ok((parts, combine))
    }

    /// SDDMM's decomposition: as SpMM's, but empty rows have no part and nothing is combined.
    pub fn for_sddmm<T: Scalar>(
        device: &Arc<Device>,
        kernels: &Preprocess,
        a: &DeviceCsr<T>,
        seg_len: u32,
    ) -> Result<Self> {
        let counted = count(device, kernels, a, seg_len, false)?;
        Self::fill(device, kernels, a, seg_len, &counted, None)
    }

    /// Allocates the lists `counted` sizes and runs the fill kernel over its offsets (writing
    /// `combine`'s lists too when present).
    fn fill<T: Scalar>(
        device: &Arc<Device>,
        kernels: &Preprocess,
        a: &DeviceCsr<T>,
        seg_len: u32,
        counted: &Counted,
        combine: Option<&Combine>,
    ) -> Result<Self> {
        let [segments, residuals, ..] = counted.totals;
        let all = segments.checked_add(residuals).ok_or_else(|| {
            Error::overflow::<u32>(
                "RoDe's parts (segments and residuals)",
                segments as usize + residuals as usize,
            )
        })?;
        let parts = Decomposition {
            seg_len,
            segments,
            residuals,
            part_row: list(device, all)?,
            part_lo: list(device, all)?,
            part_hi: list(device, all)?,
        };
        if counted.blocks == 0 {
            return Ok(parts);
        }
        let out = |slice: &CudaSlice<u32>| MutPtr::of(slice, device);
        let (seg_slot, listed_row) = combine.map_or((MutPtr::NULL, MutPtr::NULL), |c| {
            (out(&c.seg_slot), out(&c.listed_row))
        });
        let params = RodeFill {
            rows: a.rows,
            row_ptr: Ptr::of(&a.row_ptr, device),
            seg_len,
            offsets: Ptr::of(&counted.offsets, device),
            with_combine: u32::from(combine.is_some()),
            part_row: out(&parts.part_row),
            part_lo: out(&parts.part_lo),
            part_hi: out(&parts.part_hi),
            seg_slot,
            listed_row,
        };
        // SAFETY: the grid, `with_combine` and seg_len are those of `count`, whose totals (after
        // the blocks' offsets) sized every list, so each row writes inside them; the combining
        // lists, null without `with_combine`, are written only with it.
        unsafe {
            device.kernel(&kernels.fill)?.launch(
                LaunchConfig {
                    grid_dim: (counted.blocks, 1, 1),
                    block_dim: (PRE_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                },
                &params,
            )?;
        }
        Ok(parts)
    }

    /// Bytes of the parts' lists on the device.
    pub fn bytes(&self) -> usize {
        (self.part_row.len() + self.part_lo.len() + self.part_hi.len()) * size_of::<u32>()
    }
}

/// Runs the count and scan kernels over `a`'s rows and reads the matrix's totals back.
fn count<T: Scalar>(
    device: &Arc<Device>,
    kernels: &Preprocess,
    a: &DeviceCsr<T>,
    seg_len: u32,
    with_combine: bool,
) -> Result<Counted> {
    if seg_len == 0 || seg_len % TILE != 0 {
        return Err(Error::internal(format!(
            "RoDe segment length {seg_len} is not a positive multiple of {TILE}"
        )));
    }
    let blocks = a.rows.div_ceil(PRE_THREADS * PRE_ROWS);
    // One RodeCounts per block, and the grand total after them.
    let counts = list(device, (blocks + 1) * COUNTS as u32)?;
    if blocks == 0 {
        return Ok(Counted {
            blocks,
            offsets: counts,
            totals: [0; COUNTS],
        });
    }
    let params = RodeCount {
        rows: a.rows,
        row_ptr: Ptr::of(&a.row_ptr, device),
        seg_len,
        with_combine: u32::from(with_combine),
        block_totals: MutPtr::of(&counts, device),
    };
    // SAFETY: row_ptr holds rows + 1 entries; `counts` holds blocks + 1 RodeCounts and the grid
    // has one block per PRE_THREADS * PRE_ROWS rows, writing its own total.
    unsafe {
        device.kernel(&kernels.count)?.launch(
            LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (PRE_THREADS, 1, 1),
                shared_mem_bytes: 0,
            },
            &params,
        )?;
    }
    let params = RodeScan {
        blocks,
        block_totals: MutPtr::of(&counts, device),
    };
    // SAFETY: `counts` holds blocks + 1 RodeCounts; one block scans the first `blocks` in place
    // and writes the total after them.
    unsafe {
        device.kernel(&kernels.scan)?.launch(
            LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (SCAN_THREADS, 1, 1),
                shared_mem_bytes: 0,
            },
            &params,
        )?;
    }
    let mut totals = [0u32; COUNTS];
    let at = blocks as usize * COUNTS;
    device
        .stream
        .memcpy_dtoh(&counts.slice(at..at + COUNTS), &mut totals)
        .map_err(|e| device.error("copying the RoDe counts from the device", e))?;
    device.synchronize()?;
    Ok(Counted {
        blocks,
        offsets: counts,
        totals,
    })
}

/// The decomposition computed on the host, as the device must compute it.
#[cfg(test)]
pub(crate) mod twin {
    use super::{ALIGN, NONE, TILE};

    /// One row's parts, as `row_parts` in rode.cu.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct RowParts {
        pub aligned: u32,
        pub segments: u32,
        pub residual: bool,
    }

    impl RowParts {
        /// `empty_residual`: an empty row is a residual (SpMM), else it has no part.
        pub fn new(begin: u32, end: u32, seg_len: u32, empty_residual: bool) -> Self {
            let aligned = begin & !(ALIGN - 1);
            let padded = end - aligned;
            RowParts {
                aligned,
                segments: if padded >= TILE {
                    (padded - TILE) / seg_len + 1
                } else {
                    0
                },
                residual: padded < TILE && (end > begin || empty_residual),
            }
        }

        pub fn parts(&self) -> u32 {
            self.segments + u32::from(self.residual)
        }
    }

    /// The device lists' contents; the combining ones are empty without `with_combine`.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct Lists {
        pub segments: u32,
        pub part_row: Vec<u32>,
        pub part_lo: Vec<u32>,
        pub part_hi: Vec<u32>,
        pub seg_slot: Vec<u32>,
        pub listed_row: Vec<u32>,
        pub slots: u32,
    }

    pub fn decompose(row_ptr: &[u32], seg_len: u32, with_combine: bool) -> Lists {
        let mut l = Lists::default();
        let mut residuals = Vec::new();
        for (row, w) in row_ptr.windows(2).enumerate() {
            let row = row as u32;
            let (begin, end) = (w[0], w[1]);
            let p = RowParts::new(begin, end, seg_len, with_combine);
            let split = p.segments > 1;
            for j in 0..p.segments {
                let start = p.aligned + j * seg_len;
                l.part_row.push(row);
                l.part_lo.push(if j == 0 { begin } else { start });
                l.part_hi.push(if j + 1 == p.segments {
                    end
                } else {
                    start + seg_len
                });
                if with_combine {
                    l.seg_slot.push(if split { l.slots + j } else { NONE });
                }
            }
            if p.residual {
                residuals.push((row, begin, end));
            }
            if with_combine && split {
                l.listed_row.push(row);
                l.slots += p.segments;
            }
        }
        l.segments = l.part_row.len() as u32;
        for (row, lo, hi) in residuals {
            l.part_row.push(row);
            l.part_lo.push(lo);
            l.part_hi.push(hi);
        }
        l
    }
}

#[cfg(test)]
mod tests {
    use super::twin::{decompose, RowParts};
    use super::*;
    use sparse_core::CsrRef;

    /// Row pointers for rows of the given lengths, the first starting at `offset`.
    fn row_ptr(offset: u32, lengths: &[u32]) -> Vec<u32> {
        let mut p = vec![offset];
        for &len in lengths {
            p.push(p.last().unwrap() + len);
        }
        p
    }

    /// Lengths around every boundary the decomposition has: empty, under a tile, a tile give or
    /// take the alignment, and a whole number of segments give or take up to a tile and the
    /// alignment (a row is split from one segment and a tile on).
    fn boundary_lengths(seg_len: u32) -> Vec<u32> {
        let mut v = vec![0, 1, 2, 3, 5, 28, 29, 31, 32, 33, 35, 36, 63, 64, 65];
        for base in [seg_len, 2 * seg_len, 3 * seg_len, 7 * seg_len] {
            for delta in [-4i64, -1, 0, 1, 3, 28, 29, 31, 32, 33, 35] {
                v.push((i64::from(base) + delta) as u32);
            }
        }
        v
    }

    /// Checks every property the kernels rely on, row by row.
    fn check_lists(row_ptr: &[u32], seg_len: u32, with_combine: bool) {
        let l = decompose(row_ptr, seg_len, with_combine);
        let rows = row_ptr.len() - 1;
        let mut covered: Vec<u32> = vec![0; *row_ptr.last().unwrap() as usize];
        let mut slot_used = vec![false; l.slots as usize];
        let (mut s, mut r, mut listed) = (0, 0, 0);
        for row in 0..rows {
            let (begin, end) = (row_ptr[row], row_ptr[row + 1]);
            let p = RowParts::new(begin, end, seg_len, with_combine);
            assert!(p.aligned <= begin && begin - p.aligned < ALIGN);
            let mut slots = Vec::new();
            for j in 0..p.segments {
                assert_eq!(l.part_row[s], row as u32);
                let (lo, hi) = (l.part_lo[s], l.part_hi[s]);
                // The tiles' start and the length as segment_at in rode.cu finds them.
                let start = lo & !(ALIGN - 1);
                assert_eq!(start, p.aligned + j * seg_len, "segments in order");
                assert_eq!(
                    lo,
                    if j == 0 { begin } else { start },
                    "row {row}: masked start"
                );
                let len = hi - start;
                if j + 1 < p.segments {
                    assert_eq!(len, seg_len, "row {row}: a full segment before the last");
                } else {
                    assert!(
                        (TILE..seg_len + TILE).contains(&len),
                        "row {row}: last segment"
                    );
                    assert_eq!(hi, end, "row {row}: the last segment ends the row");
                }
                for e in lo..hi {
                    covered[e as usize] += 1;
                }
                if with_combine {
                    slots.push(l.seg_slot[s]);
                }
                s += 1;
            }
            if p.residual {
                let at = l.segments as usize + r;
                assert_eq!(l.part_row[at], row as u32);
                assert_eq!((l.part_lo[at], l.part_hi[at]), (begin, end));
                assert!(
                    end - begin < TILE && p.segments == 0,
                    "row {row}: a residual row"
                );
                for e in begin..end {
                    covered[e as usize] += 1;
                }
                r += 1;
            }
            assert_eq!(
                p.parts() == 0,
                begin == end && !with_combine,
                "row {row}: only SDDMM's empty rows have no part"
            );
            for e in begin..end {
                assert_eq!(
                    covered[e as usize], 1,
                    "row {row}: entry {e} in exactly one part"
                );
            }
            if !with_combine {
                continue;
            }
            if p.segments > 1 {
                assert_eq!(l.listed_row[listed], row as u32);
                listed += 1;
                // The last segment finds the row's first slot as its own less its index.
                let expected: Vec<u32> = (0..p.segments).map(|q| slots[0] + q).collect();
                assert_eq!(
                    slots, expected,
                    "row {row}: consecutive slots, one per segment"
                );
                for q in expected {
                    assert!(!std::mem::replace(&mut slot_used[q as usize], true));
                }
            } else {
                assert!(slots.iter().all(|&q| q == NONE), "row {row}: the only part");
            }
        }
        assert_eq!(s, l.segments as usize);
        assert_eq!(s + r, l.part_row.len());
        assert_eq!(listed, l.listed_row.len());
        assert!(
            slot_used.iter().all(|&u| u),
            "every slot belongs to a segment"
        );
    }

    #[test]
    fn every_entry_lies_in_exactly_one_part_for_every_alignment() {
        for seg_len in [TILE, 4 * TILE, 512] {
            let lengths = boundary_lengths(seg_len);
            for offset in 0..ALIGN {
                for with_combine in [true, false] {
                    check_lists(&row_ptr(offset, &lengths), seg_len, with_combine);
                    let reversed: Vec<u32> = lengths.iter().rev().copied().collect();
                    check_lists(&row_ptr(offset, &reversed), seg_len, with_combine);
                }
            }
        }
    }

    #[test]
    fn a_small_matrix_decomposes_as_worked_out_by_hand() {
        // Rows: 3 entries at 0 (a residual); empty (a residual for SpMM); 1064 entries at 3
        // (aligned to 0: 1067 entries from there, split in segments at 0 and 512 and a last one
        // of 43 entries at 1024); 40 entries at 1067 (aligned to 1064: one segment of 43, the
        // first 3 masked); 29 entries at 1107 (aligned to 1104: exactly one tile, the first 3
        // masked).
        let p = row_ptr(0, &[3, 0, 1064, 40, 29]);
        let l = decompose(&p, 512, true);
        assert_eq!(l.segments, 5);
        assert_eq!(l.part_row, [2, 2, 2, 3, 4, 0, 1]);
        assert_eq!(l.part_lo, [3, 512, 1024, 1067, 1107, 0, 3]);
        assert_eq!(l.part_hi, [512, 1024, 1067, 1107, 1136, 3, 3]);
        assert_eq!(l.seg_slot, [0, 1, 2, NONE, NONE]);
        assert_eq!(l.listed_row, [2]);
        assert_eq!(l.slots, 3);
        let plain = decompose(&p, 512, false);
        assert_eq!(plain.part_row, [2, 2, 2, 3, 4, 0]);
        assert_eq!(plain.part_lo, l.part_lo[..6]);
        assert!(plain.seg_slot.is_empty() && plain.listed_row.is_empty() && plain.slots == 0);
    }

    fn device() -> Option<Arc<Device>> {
        match Device::new(0) {
            Ok(d) => Some(d),
            Err(e) => {
                assert!(
                    std::env::var("SPARSE_REQUIRE_GPU").as_deref() != Ok("1"),
                    "SPARSE_REQUIRE_GPU=1 but {e}"
                );
                eprintln!("skipped: {e}");
                None
            }
        }
    }

    fn download(device: &Device, v: &CudaSlice<u32>, len: u32) -> Vec<u32> {
        let mut host = vec![0u32; len as usize];
        if len > 0 {
            device
                .stream
                .memcpy_dtoh(&v.slice(..len as usize), &mut host)
                .expect("copy back");
            device.synchronize().expect("synchronize");
        }
        host
    }

    /// The device lists, as the twin's type.
    fn device_lists(device: &Arc<Device>, lengths: &[u32], with_combine: bool) -> twin::Lists {
        let p = row_ptr(0, lengths);
        let nnz = *p.last().unwrap() as usize;
        let cols = lengths.iter().copied().max().unwrap_or(0).max(1) as usize;
        let col_idx: Vec<u32> = lengths.iter().flat_map(|&len| 0..len).collect();
        let values = vec![1.0f32; nnz];
        let a = CsrRef::try_new(lengths.len(), cols, &p, &col_idx, &values).expect("valid CSR");
        let dev = DeviceCsr::upload(device, a).expect("upload");
        let kernels = Preprocess::new().expect("entries");
        let (d, combine) = if with_combine {
            let (d, c) = Decomposition::for_spmm(device, &kernels, &dev, 512).expect("decompose");
            (d, Some(c))
        } else {
            let d = Decomposition::for_sddmm(device, &kernels, &dev, 512).expect("decompose");
            (d, None)
        };
        let parts = d.segments + d.residuals;
        let mut l = twin::Lists {
            segments: d.segments,
            part_row: download(device, &d.part_row, parts),
            part_lo: download(device, &d.part_lo, parts),
            part_hi: download(device, &d.part_hi, parts),
            ..Default::default()
        };
        if let Some(c) = combine {
            l.seg_slot = download(device, &c.seg_slot, d.segments);
            l.listed_row = download(device, &c.listed_row, c.listed);
            l.slots = c.slots;
        }
        l
    }

    #[test]
    fn the_device_decomposition_matches_the_twin() {
        let Some(device) = device() else { return };
        // Enough rows for more than SCAN_THREADS count blocks (so the scan loops), with every
        // boundary length and every alignment mixed in.
        let boundary = boundary_lengths(512);
        let rows = (SCAN_THREADS * PRE_THREADS * PRE_ROWS + 12_345) as usize;
        let lengths: Vec<u32> = (0..rows)
            .map(|i| {
                if i % 97 == 0 {
                    boundary[i / 97 % boundary.len()]
                } else {
                    (i * 7 % 5) as u32
                }
            })
            .collect();
        for with_combine in [true, false] {
            for lengths in [&lengths[..], &[][..], &[0, 0, 3][..], &[5000, 1, 1500][..]] {
                let expected = decompose(&row_ptr(0, lengths), 512, with_combine);
                let got = device_lists(&device, lengths, with_combine);
                assert!(
                    got == expected,
                    "{} rows, combine {with_combine}: device lists differ from the twin",
                    lengths.len()
                );
            }
        }
    }
}
