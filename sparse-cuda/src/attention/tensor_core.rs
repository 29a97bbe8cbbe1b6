//! The tensor-core fused attention (`fused-tc`, f16 and bf16 storage); `attention_tc.cu` has
//! the kernels and their lane mappings.
//!
//! A is held as row windows of [`WINDOW`] rows: each window's distinct columns, ascending, in
//! blocks of [`SLOTS`] slots, and per (block, row of the window) a bitmap of the slots the row
//! has. A warp takes one item and one head: an item is a window, or a piece of at most
//! [`piece_blocks`] blocks of a longer one, and items are listed longest first so that the
//! device's last warps are short ones. The pieces of a long window leave each row's maximum,
//! sum and unnormalised sums in a scratch buffer that a second kernel combines in piece order,
//! so runs are bit-reproducible. Q and K heads up to [`WIDEST_D`] columns; V heads of any
//! width, in slices of 64 or 128 columns (neighbouring warps of a block). Heads of 65 to 128
//! columns take two slices of 64 that share the scores, each multiplying half of d. The
//! backward ([`backward`]) runs over A's windows and over A^T's, cut the same way.

use std::cmp::Reverse;
use std::ops::RangeInclusive;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{AttentionShape, CsrRef, Error, Result, Scalar, SpIndex};
use sparse_formats::Transposed;

use crate::device::Device;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, MutPtr, Ptr,
};
use crate::operand::{to_u32, AttentionOperands, Bound};
use crate::plan::PlanBase;

use super::{AttentionGrad, AttentionHeads};

mod backward;

/// Rows of a window: the m of `mma.m16n8k16`.
const WINDOW: usize = 16;
/// Slots (distinct columns) of a block: the k of the weighted sum's MMA.
const SLOTS: usize = 16;
/// Blocks an item takes at most ([`piece_blocks`]): a longer window is cut into pieces of
/// this many.
const PIECE_BLOCKS: RangeInclusive<usize> = 32..=512;
/// Items per multiprocessor the piece length is chosen to give: twice the 16 or so warps of these
/// kernels a multiprocessor holds, so that no item is longer than half a warp's share.
const ITEMS_PER_SM: usize = 32;
/// Warps per block (`ATTN_TC_WARPS`).
const WARPS: u32 = 4;
/// The (KC, DVC, KS) instantiated: chunks of 32 columns of a Q and K head, chunks of 64
/// columns of V per slice, and the slices that share the scores' chunks of d ([`chunks`]
/// picks).
const CHUNKS: [(u32, u32, u32); 8] = [
    (1, 1, 1),
    (1, 2, 1),
    (2, 1, 1),
    (2, 2, 1),
    (4, 1, 1),
    (4, 1, 2),
    (4, 2, 1),
    (8, 1, 1),
];
/// The widest Q and K heads the kernels take.
pub(super) const WIDEST_D: usize = 256;
/// The most heads the kernels take: the weighted sums step from one entry's (P, dS) pairs to
/// the next by a 32-bit count of bytes, 8 a head. The forward runs more on CUDA cores; the
/// backward refuses them.
pub(super) const MOST_HEADS: usize = (u32::MAX / 8) as usize;
/// `item_piece` of an item that is a whole window (`ATTN_TC_WHOLE`).
const WHOLE: u32 = u32::MAX;

kernel_params! {
    /// A window layout as the kernels read it ([`DeviceWindows`]): item i is blocks
    /// `item_begin[i] .. item_end[i]` of window `item_window[i]`, piece `item_piece[i]` of it
    /// (or a whole window), its rows' next entries in the layout's order at
    /// `item_entry[16 i ..]`; split window s is `split_window[s]`, its pieces `split_piece[s] ..
    /// split_piece[s + 1]`. Block b's slots are the columns `blk_col[16 b ..]`, its rows' bitmaps
    /// `blk_bits[16 b ..]`. `rows`: the rows of the pattern the windows cut.
    pub(crate) struct TcWindows {
        items: u32,
        windows: u32,
        rows: u32,
        item_window: ptr(u32),
        item_begin: ptr(u32),
        item_end: ptr(u32),
        item_piece: ptr(u32),
        item_entry: ptr(u32),
        split_window: ptr(u32),
        split_piece: ptr(u32),
        blk_col: ptr(u32),
        blk_bits: ptr(u16),
    }
}

kernel_params! {
    /// `attention_tc<T, KC, DVC, KS>` and `attention_tc_combine<T>`: A's windows, V in slices
    /// of `slices`, the heads, and the pieces' scratch. `*_vec`: the operand takes 16-byte
    /// accesses.
    pub(crate) struct AttentionTc<T> {
        win: plain(TcWindows),
        slices: u32,
        q_vec: u32,
        k_vec: u32,
        v_vec: u32,
        o_vec: u32,
        values: ptr(T),
        ops: sub(AttentionHeads),
        stats: out(f32),
        part_acc: out(f32),
        part_stats: out(f32),
    }
}

kernel_params! {
    /// `attention_tc_grad_scores<T, KC>` and `attention_tc_transpose_pairs<T>`: A's windows and
    /// the backward's operands; `t_entry[p]` and `t_col[p]`: A's entry at position p of A^T
    /// and its column (the row of A^T), and `t_prob_grads` the pairs in A^T's order.
    /// `row_max` and `t_row_max`: the largest magnitude of each component of the pairs of each
    /// (row, head) of A and of A^T, as bits (laid out as a pair), raised by atomic maxima from
    /// zero (A's P component is not kept). `nonfinite`, cleared before, is set when an entry's
    /// S or dP is infinite or NaN.
    pub(crate) struct AttentionTcScores<T> {
        win: plain(TcWindows),
        q_vec: u32,
        k_vec: u32,
        v_vec: u32,
        o_vec: u32,
        do_vec: u32,
        t_entry: ptr(u32),
        t_col: ptr(u32),
        t_prob_grads: out(f32),
        row_max: out(u32),
        t_row_max: out(u32),
        nonfinite: out(u32),
        grad: sub(AttentionGrad),
    }
}

kernel_params! {
    /// `attention_tc_gather<T>` and `attention_tc_gather_combine<T>`: `out` (the layout's rows
    /// x heads*width) = W X over a window layout, W = `factor` times component `component` of
    /// the (entry, head) pairs at `weights` (in the layout's order), X (`x`, the slots' rows x
    /// heads*width) in `slices` slices of 64 columns; `row_max`: the largest magnitude of each
    /// component of each (row, head) of the layout, and `nonfinite` whether an S or dP was not
    /// finite (see [`AttentionTcScores`]).
    pub(crate) struct AttentionTcGather<T> {
        win: plain(TcWindows),
        slices: u32,
        heads: u32,
        width: u32,
        x: ptr(T),
        x_rs: u32,
        x_cs: u32,
        x_vec: u32,
        out: out(T),
        out_rs: u32,
        out_cs: u32,
        out_vec: u32,
        weights: ptr(f32),
        row_max: ptr(u32),
        nonfinite: ptr(u32),
        component: u32,
        factor: f32,
        part_acc: out(f32),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "attention_tc",
    code: include_str!("../../kernels/attention_tc.cu"),
    params: &[
        <AttentionHeads<half::f16> as KernelParams>::C_DECL,
        <AttentionGrad<half::f16> as KernelParams>::C_DECL,
        <TcWindows as KernelParams>::C_DECL,
        <AttentionTc<half::f16> as KernelParams>::C_DECL,
        <AttentionTcScores<half::f16> as KernelParams>::C_DECL,
        <AttentionTcGather<half::f16> as KernelParams>::C_DECL,
    ],
    defines: &[("ATTN_TC_WARPS", WARPS), ("ATTN_TC_THREADS", WARPS * 32)],
};

fn entry<T: Scalar>((k, v, split): (u32, u32, u32)) -> Result<Entry<AttentionTc<T>>> {
    Entry::new(
        &SOURCE,
        "attention_tc",
        &[&c_type(T::DTYPE)?, &k, &v, &split],
    )
}

/// Every (KC, DVC, KS) instantiation, in the order of [`CHUNKS`].
fn entries<T: Scalar>() -> Result<Vec<Entry<AttentionTc<T>>>> {
    CHUNKS.iter().map(|&chunks| entry::<T>(chunks)).collect()
}

fn combine_entry<T: Scalar>() -> Result<Entry<AttentionTc<T>>> {
    Entry::new(&SOURCE, "attention_tc_combine", &[&c_type(T::DTYPE)?])
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let mut specs: Vec<KernelSpec> = entries::<T>()?.iter().map(|e| e.spec().clone()).collect();
    specs.push(combine_entry::<T>()?.spec().clone());
    specs.extend(backward::specs::<T>()?);
    Ok(specs)
}

/// Every kernel of this file Rust can ask for.
pub(super) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = specs_of::<half::f16>()?;
    specs.extend(specs_of::<half::bf16>()?);
    Ok(specs)
}

/// KC for Q and K heads of width `d`: the fewest chunks of 32 columns that hold it.
fn k_chunks(d: usize) -> Option<u32> {
    [1, 2, 4, 8].into_iter().find(|&c| 32 * c as usize >= d)
}

/// (KC, DVC, KS) for heads of widths `d` and `dv`, or `None` past [`WIDEST_D`]. DVC is two
/// chunks of 64 (one slice of 128 columns) unless the head fits one, or the Q fragments already
/// fill the registers. Heads of 65 to 128 columns in Q and in V run as two slices of 64 that
/// share the scores (KS = 2): a warp then holds half the fragments, and twice as many warps fit
/// a multiprocessor.
fn chunks(d: usize, dv: usize) -> Option<(u32, u32, u32)> {
    let k = k_chunks(d)?;
    Some(if k == 4 && (65..=128).contains(&dv) {
        (4, 1, 2)
    } else if dv > 64 && k <= 4 {
        (k, 2, 1)
    } else {
        (k, 1, 1)
    })
}

/// A's row windows: block b's slots are the columns `col[16 b .. 16 b + 16]` and its bitmaps
/// `bits[16 b + r]` (bit j: row r of the window has slot j); window w's blocks are
/// `block_ptr[w] .. block_ptr[w + 1]`. A last block's unused slots repeat its first column.
#[derive(Debug, PartialEq)]
struct Windows {
    block_ptr: Vec<usize>,
    col: Vec<u32>,
    bits: Vec<u16>,
}

impl Windows {
    /// The windows of the pattern whose row i has the columns `col[row_ptr[i] .. row_ptr[i +
    /// 1]]`, ascending.
    fn of<I: SpIndex>(row_ptr: &[usize], col: &[I]) -> Result<Self> {
        let rows = row_ptr.len() - 1;
        let row = |i: usize| col[row_ptr[i]..row_ptr[i + 1]].iter().map(|c| c.to_usize());
        let mut w = Windows {
            block_ptr: vec![0],
            col: Vec::new(),
            bits: Vec::new(),
        };
        let mut distinct: Vec<usize> = Vec::new();
        for first in (0..rows).step_by(WINDOW) {
            let rows = first..(first + WINDOW).min(rows);
            distinct.clear();
            for i in rows.clone() {
                distinct.extend(row(i));
            }
            distinct.sort_unstable();
            distinct.dedup();
            let block0 = w.block_ptr[w.block_ptr.len() - 1];
            for slots in distinct.chunks(SLOTS) {
                for s in 0..SLOTS {
                    let c = slots.get(s).copied().unwrap_or(slots[0]);
                    w.col.push(to_u32("column index", c)?);
                }
            }
            let blocks = distinct.len().div_ceil(SLOTS);
            w.bits.resize(w.bits.len() + blocks * SLOTS, 0);
            for (r, i) in rows.enumerate() {
                // The row's columns and the window's are both ascending.
                let mut slot = 0;
                for c in row(i) {
                    while distinct[slot] != c {
                        slot += 1;
                    }
                    w.bits[(block0 + slot / SLOTS) * WINDOW + r] |= 1 << (slot % SLOTS);
                }
            }
            w.block_ptr.push(block0 + blocks);
        }
        to_u32("attention column slots", w.col.len())?;
        Ok(w)
    }
}

/// One warp's work: blocks `begin .. end` of a window, a piece of it or the whole
/// ([`WHOLE`]), and the CSR position of each of its rows' first entry in those blocks.
#[derive(Clone, Debug, PartialEq)]
struct Item {
    window: usize,
    begin: usize,
    end: usize,
    piece: u32,
    entry: [usize; WINDOW],
}

/// The piece length for `blocks` blocks of `heads` heads in all on a device of
/// `multiprocessors`: long enough that few windows are cut (every piece's sums cross memory
/// twice, to the scratch and back for the combine), short enough that [`ITEMS_PER_SM`] warps'
/// items are left for each multiprocessor, and within [`PIECE_BLOCKS`]. Listed longest first,
/// items of up to this length still leave the device's last warps short ones.
fn piece_blocks(blocks: usize, heads: usize, multiprocessors: u32) -> usize {
    (blocks.saturating_mul(heads) / (multiprocessors.max(1) as usize * ITEMS_PER_SM))
        .clamp(*PIECE_BLOCKS.start(), *PIECE_BLOCKS.end())
}

/// The items over `w`, longest first, windows of more than `piece` blocks cut into pieces of
/// `piece`, and the windows cut with the first piece of each (and, last, the number of
/// pieces).
fn items(
    w: &Windows,
    row_ptr: &[usize],
    piece: usize,
) -> Result<(Vec<Item>, Vec<usize>, Vec<usize>)> {
    let rows = row_ptr.len() - 1;
    let (mut list, mut split_window, mut split_piece) = (Vec::new(), Vec::new(), Vec::new());
    let mut pieces = 0u32;
    for (window, b) in w.block_ptr.windows(2).enumerate() {
        let mut entry = [0; WINDOW];
        for (r, e) in entry.iter_mut().enumerate() {
            *e = row_ptr[(window * WINDOW + r).min(rows)];
        }
        if b[1] - b[0] <= piece {
            list.push(Item {
                window,
                begin: b[0],
                end: b[1],
                piece: WHOLE,
                entry,
            });
            continue;
        }
        split_window.push(window);
        split_piece.push(pieces as usize);
        for begin in (b[0]..b[1]).step_by(piece) {
            let end = (begin + piece).min(b[1]);
            list.push(Item {
                window,
                begin,
                end,
                piece: pieces,
                entry,
            });
            pieces = pieces
                .checked_add(1)
                .filter(|&p| p != WHOLE)
                .ok_or_else(|| Error::overflow::<u32>("attention window pieces", list.len()))?;
            for (r, e) in entry.iter_mut().enumerate() {
                *e += w.bits[begin * WINDOW..end * WINDOW]
                    .iter()
                    .skip(r)
                    .step_by(WINDOW)
                    .map(|bits| bits.count_ones() as usize)
                    .sum::<usize>();
            }
        }
    }
    split_piece.push(pieces as usize);
    list.sort_by_key(|item| Reverse(item.end - item.begin));
    Ok((list, split_window, split_piece))
}

/// A pattern's windows and the items over them, built on the host.
pub(super) struct Layout {
    windows: Windows,
    items: Vec<Item>,
    split_window: Vec<usize>,
    split_piece: Vec<usize>,
}

impl Layout {
    /// The layout of the pattern `row_ptr`, `col` (see [`Windows::of`]) for `heads` heads on a
    /// device of `multiprocessors`.
    fn of<I: SpIndex>(
        row_ptr: &[usize],
        col: &[I],
        heads: usize,
        multiprocessors: u32,
    ) -> Result<Self> {
        let windows = Windows::of(row_ptr, col)?;
        let blocks = windows.block_ptr[windows.block_ptr.len() - 1];
        let piece = piece_blocks(blocks, heads, multiprocessors);
        let (items, split_window, split_piece) = items(&windows, row_ptr, piece)?;
        Ok(Layout {
            windows,
            items,
            split_window,
            split_piece,
        })
    }
}

/// The layouts of a `fused-tc` plan: A's windows (the forward, and dQ) and A^T's (dK and dV),
/// and A's entry at each position of A^T and A^T's rows.
pub(super) struct Layouts<'t> {
    a: Layout,
    t: Layout,
    t_entry: &'t [usize],
    t_ptr: &'t [usize],
}

impl<'t> Layouts<'t> {
    /// The layouts of A (its offsets as usize in `row_ptr`) and of its transpose `t`, for
    /// `heads` heads on a device of `multiprocessors`.
    pub(super) fn of<T: Scalar, I: SpIndex>(
        a: CsrRef<'_, T, I>,
        row_ptr: &[usize],
        t: &'t Transposed,
        heads: usize,
        multiprocessors: u32,
    ) -> Result<Self> {
        Ok(Layouts {
            a: Layout::of(row_ptr, a.col_idx(), heads, multiprocessors)?,
            t: Layout::of(&t.col_ptr, &t.row, heads, multiprocessors)?,
            t_entry: &t.entry,
            t_ptr: &t.col_ptr,
        })
    }
}

/// The row of each position of the pattern whose row j holds positions `ptr[j] .. ptr[j + 1]`;
/// the rows that hold any fit u32 (checked by [`Windows::of`]).
fn t_cols(ptr: &[usize]) -> Vec<u32> {
    ptr.windows(2)
        .enumerate()
        .flat_map(|(j, w)| std::iter::repeat_n(j as u32, w[1] - w[0]))
        .collect()
}

/// A layout on the device, and the number of its rows.
struct DeviceWindows {
    rows: u32,
    items: u32,
    windows: u32,
    pieces: usize,
    item_window: CudaSlice<u32>,
    item_begin: CudaSlice<u32>,
    item_end: CudaSlice<u32>,
    item_piece: CudaSlice<u32>,
    item_entry: CudaSlice<u32>,
    split_window: CudaSlice<u32>,
    split_piece: CudaSlice<u32>,
    col: CudaSlice<u32>,
    bits: CudaSlice<u16>,
}

impl DeviceWindows {
    fn upload(device: &Device, layout: &Layout, rows: usize) -> Result<Self> {
        let Layout {
            windows,
            items: list,
            split_window,
            split_piece,
        } = layout;
        let to_u32s = |v: &[usize]| device.upload_converted(v, 0, |&x| x as u32);
        // Windows, blocks and positions fit u32: the slots do (checked by Windows::of), and
        // the plan checked the entries.
        let field = |f: fn(&Item) -> usize| to_u32s(&list.iter().map(f).collect::<Vec<_>>());
        let positions: Vec<usize> = list.iter().flat_map(|i| i.entry).collect();
        Ok(DeviceWindows {
            rows: to_u32("number of rows", rows)?,
            items: to_u32("attention items", list.len())?,
            windows: to_u32("attention windows", split_window.len())?,
            pieces: split_piece[split_piece.len() - 1],
            item_window: field(|i| i.window)?,
            item_begin: field(|i| i.begin)?,
            item_end: field(|i| i.end)?,
            item_piece: device.upload_converted(list, 0, |i| i.piece)?,
            item_entry: to_u32s(&positions)?,
            split_window: to_u32s(split_window)?,
            split_piece: to_u32s(split_piece)?,
            col: device.upload_converted(&windows.col, 0, |&c| c)?,
            bits: device.upload_converted(&windows.bits, 0, |&b| b)?,
        })
    }

    fn params(&self, device: &Device) -> TcWindows {
        TcWindows {
            items: self.items,
            windows: self.windows,
            rows: self.rows,
            item_window: Ptr::of(&self.item_window, device),
            item_begin: Ptr::of(&self.item_begin, device),
            item_end: Ptr::of(&self.item_end, device),
            item_piece: Ptr::of(&self.item_piece, device),
            item_entry: Ptr::of(&self.item_entry, device),
            split_window: Ptr::of(&self.split_window, device),
            split_piece: Ptr::of(&self.split_piece, device),
            blk_col: Ptr::of(&self.col, device),
            blk_bits: Ptr::of(&self.bits, device),
        }
    }

    fn bytes(&self) -> usize {
        (self.item_window.len() * 4
            + self.item_entry.len()
            + self.split_window.len() * 2
            + self.col.len())
            * size_of::<u32>()
            + self.bits.len() * size_of::<u16>()
    }

    /// Floats of piece scratch for `heads` heads of rows of `width`.
    fn scratch(&self, heads: usize, width: usize) -> Result<usize> {
        self.pieces
            .checked_mul(heads * WINDOW)
            .and_then(|n| n.checked_mul(width))
            .ok_or_else(|| Error::overflow::<usize>("attention piece scratch", self.pieces))
    }
}

/// A launch of one warp per `warps`.
fn grid(warps: u64) -> Result<LaunchConfig> {
    let blocks = u32::try_from(warps.div_ceil(u64::from(WARPS)))
        .map_err(|_| Error::overflow::<u32>("attention blocks", warps as usize))?;
    Ok(LaunchConfig {
        grid_dim: (blocks.max(1), 1, 1),
        block_dim: (WARPS * 32, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// Whether an operand takes the kernels' 16-byte accesses: contiguous rows whose starts (every
/// head's, `width` apart) stay 16-byte aligned.
pub(super) fn vectors<T: Scalar>(b: &Bound, heads: usize, width: usize) -> bool {
    let (rs, cs) = b.strides();
    let per_access = 16 / size_of::<T>();
    cs == 1
        && rs as usize % per_access == 0
        && (heads == 1 || width % per_access == 0)
        && b.address % 16 == 0
}

/// The tensor-core kernels of a `fused-tc` plan: the forward over A's windows, the backward
/// over A's and A^T's ([`backward`]), and the pieces' scratch (grown to the widest heads run).
pub(super) struct TensorCore<T: Scalar> {
    a: DeviceWindows,
    t: DeviceWindows,
    /// A's entry at each position of A^T, and its column: col_idx[t_entry[p]], kept in A^T's
    /// order because the copy into it reads it in order (gathered, it cost the copy 0.13 ms on a
    /// graph of 16M entries).
    t_entry: CudaSlice<u32>,
    t_col: CudaSlice<u32>,
    /// P and dS of each (entry, head) in A^T's order, side by side.
    t_prob_grads: CudaSlice<f32>,
    /// The largest magnitudes of the pairs of each (row, head) of A and of A^T.
    row_max: CudaSlice<u32>,
    t_row_max: CudaSlice<u32>,
    /// One word: whether the last backward's score kernel met an infinite or NaN S or dP.
    nonfinite: CudaSlice<u32>,
    /// By (KC, DVC, KS), in the order of [`CHUNKS`].
    kernels: Vec<Kernel<AttentionTc<T>>>,
    combine: Kernel<AttentionTc<T>>,
    grad: backward::Kernels<T>,
    part_acc: CudaSlice<f32>,
    part_stats: CudaSlice<f32>,
}

impl<T: Scalar> TensorCore<T> {
    /// The specs a plan compiles before it builds.
    pub(super) fn specs() -> Result<Vec<KernelSpec>> {
        specs_of::<T>()
    }

    /// The plan's kernels and its layouts on the device; `heads` sizes the statistics' scratch
    /// and the backward's pairs.
    pub(super) fn upload(
        device: &Arc<Device>,
        layouts: &Layouts<'_>,
        (rows, cols): (usize, usize),
        heads: usize,
    ) -> Result<Self> {
        let a = DeviceWindows::upload(device, &layouts.a, rows)?;
        let kernels = entries::<T>()?
            .iter()
            .map(|e| device.kernel(e))
            .collect::<Result<_>>()?;
        let nnz = layouts.t_entry.len();
        let pairs = |n: usize| {
            n.checked_mul(2 * heads)
                .ok_or_else(|| Error::overflow::<usize>("attention pairs", n))
        };
        Ok(TensorCore {
            t: DeviceWindows::upload(device, &layouts.t, cols)?,
            // Positions below nnz, which fits u32 (checked by the plan).
            t_entry: device.upload_converted(layouts.t_entry, 0, |&x| x as u32)?,
            t_col: device.upload_converted(&t_cols(layouts.t_ptr), 0, |&c| c)?,
            t_prob_grads: device
                .alloc_zeros(pairs(nnz)?, "attention weights and score gradients")?,
            row_max: device.alloc_zeros(pairs(rows)?, "attention row maxima")?,
            t_row_max: device.alloc_zeros(pairs(cols)?, "attention column maxima")?,
            nonfinite: device.alloc_zeros(1, "attention non-finite flag")?,
            kernels,
            combine: device.kernel(&combine_entry::<T>()?)?,
            grad: backward::Kernels::load(device)?,
            part_acc: device.alloc_zeros(0, "attention piece sums")?,
            part_stats: device.alloc_zeros(a.scratch(heads, 2)?, "attention piece statistics")?,
            a,
        })
    }

    pub(super) fn bytes(&self) -> usize {
        self.a.bytes()
            + self.t.bytes()
            + (self.t_entry.len() + self.t_col.len()) * size_of::<u32>()
            + (self.t_prob_grads.len() + self.part_acc.len() + self.part_stats.len())
                * size_of::<f32>()
            + (self.row_max.len() + self.t_row_max.len() + self.nonfinite.len()) * size_of::<u32>()
    }

    /// Whether the kernels take heads of this shape.
    pub(super) fn takes(shape: &AttentionShape) -> bool {
        shape.d <= WIDEST_D && shape.heads <= MOST_HEADS
    }

    /// Grows the pieces' scratch to `floats`.
    fn reserve(&mut self, device: &Device, floats: usize) -> Result<()> {
        if self.part_acc.len() < floats {
            self.part_acc = device.alloc_zeros(floats, "attention piece sums")?;
        }
        Ok(())
    }

    /// O and the row statistics (`stats`) of a forward run.
    pub(super) fn run(
        &mut self,
        base: &PlanBase<T>,
        shape: &AttentionShape,
        ops: &AttentionOperands,
        heads: AttentionHeads<T>,
        values: Ptr<T>,
        stats: &CudaSlice<f32>,
    ) -> Result<()> {
        let device = &base.device;
        let (kc, dvc, split) = chunks(shape.d, shape.dv).ok_or_else(|| {
            Error::internal(format!(
                "no tensor-core attention kernel for d = {}",
                shape.d
            ))
        })?;
        let slices = to_u32(
            "attention column slices",
            shape.dv.div_ceil(64 * dvc as usize),
        )?;
        self.reserve(device, self.a.scratch(shape.heads, shape.dv)?)?;
        let params = AttentionTc {
            win: self.a.params(device),
            slices,
            q_vec: u32::from(vectors::<T>(&ops.q, shape.heads, shape.d)),
            k_vec: u32::from(vectors::<T>(&ops.k, shape.heads, shape.d)),
            v_vec: u32::from(vectors::<T>(&ops.v, shape.heads, shape.dv)),
            o_vec: u32::from(vectors::<T>(&ops.o, shape.heads, shape.dv)),
            values,
            ops: heads,
            stats: MutPtr::of(stats, device),
            part_acc: MutPtr::of(&self.part_acc, device),
            part_stats: MutPtr::of(&self.part_stats, device),
        };
        let kernel = CHUNKS
            .iter()
            .position(|&chunks| chunks == (kc, dvc, split))
            .and_then(|i| self.kernels.get(i))
            .ok_or_else(|| Error::internal("an uninstantiated tensor-core attention kernel"))?;
        // SAFETY: the items' blocks lie inside the window layout (16 columns and 16 bitmaps a
        // block), their windows' rows below A's rows (rows past them are neither read nor
        // written) and the columns below A's columns; CSR positions from item_entry stay below
        // nnz for the rows' own entries; Q spans rows x heads*d, K cols x heads*d, V cols x
        // heads*dv and O rows x heads*dv at their strides (bound operands checked against
        // `shape`), read for columns below d (dv) of each head only, by 16-byte accesses only
        // where `vectors` holds; stats has rows*heads pairs (sized for the plan's heads, which
        // `shape` matches), and the piece scratch pieces*heads*16 pairs and rows of dv.
        unsafe {
            let warps = u64::from(self.a.items) * u64::from(heads.heads) * u64::from(slices);
            kernel.launch(grid(warps)?, &params)?;
            if self.a.windows > 0 {
                let warps = u64::from(self.a.windows) * WINDOW as u64 * u64::from(heads.heads);
                self.combine.launch(grid(warps)?, &params)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_formats::Csr;

    fn csr(rows: usize, cols: usize, entries: &[(usize, usize)]) -> Csr<f32, u32> {
        let mut row_ptr = vec![0u32; rows + 1];
        for &(r, _) in entries {
            row_ptr[r + 1] += 1;
        }
        for i in 0..rows {
            row_ptr[i + 1] += row_ptr[i];
        }
        let col: Vec<u32> = entries.iter().map(|&(_, c)| c as u32).collect();
        Csr::try_new(rows, cols, row_ptr, col, vec![1.0; entries.len()]).unwrap()
    }

    fn row_ptr(a: &Csr<f32, u32>) -> Vec<usize> {
        a.row_ptr().iter().map(|&p| p as usize).collect()
    }

    fn windows(a: &Csr<f32, u32>) -> Windows {
        Windows::of(&row_ptr(a), a.col_idx()).unwrap()
    }

    #[test]
    fn windows_hold_each_distinct_column_once_with_its_rows_bitmap() {
        // Window 0: rows 0 and 2 share column 5; 17 distinct columns make two blocks.
        let mut entries = vec![(0, 5), (2, 5)];
        entries.extend((0..16).map(|c| (3, 10 + c)));
        entries.sort_unstable();
        let a = csr(18, 40, &entries);
        let w = windows(&a);
        // Windows: rows 0-15 (two blocks), rows 16-17 (none).
        assert_eq!(w.block_ptr, [0, 2, 2]);
        assert_eq!(w.col[0], 5);
        assert_eq!(w.col[1..16], (10..25).collect::<Vec<u32>>()[..]);
        // The second block holds column 25 and repeats it in its unused slots.
        assert!(w.col[16..].iter().all(|&c| c == 25));
        assert_eq!((w.bits[0], w.bits[2], w.bits[1]), (1, 1, 0));
        assert_eq!(w.bits[3], 0xfffe);
        assert_eq!(w.bits[16 + 3], 1);
    }

    #[test]
    fn the_transposed_layout_takes_columns_as_rows() {
        let a = csr(6, 4, &[(0, 1), (0, 3), (2, 1), (5, 0)]);
        let t = Transposed::of(a.as_ref());
        let layouts = Layouts::of(a.as_ref(), &row_ptr(&a), &t, 1, 132).unwrap();
        let w = &layouts.t.windows;
        // One window of A's 4 columns; its slots are the rows 0, 2 and 5.
        assert_eq!(w.block_ptr, [0, 1]);
        assert_eq!(w.col[..3], [0, 2, 5]);
        assert_eq!(w.bits[..4], [0b100, 0b011, 0, 0b001]);
        // Positions in column order, which t.entry maps to A's entries.
        assert_eq!(layouts.t.items[0].entry[..5], [0, 1, 3, 3, 4]);
        assert_eq!(t.entry, [3, 0, 2, 1]);
        // Each position's row of A^T: column 2 has no entries.
        assert_eq!(t_cols(layouts.t_ptr), [0, 1, 1, 3]);
    }

    #[test]
    fn long_windows_are_cut_into_pieces_listed_first() {
        // Row 1 has 40 blocks of columns: two pieces; rows 16.. an empty window and one block.
        let mut entries: Vec<(usize, usize)> = (0..40 * SLOTS).map(|c| (1, c)).collect();
        entries.push((17, 3));
        entries.insert(0, (0, 7));
        let a = csr(33, 40 * SLOTS, &entries);
        let w = windows(&a);
        assert_eq!(w.block_ptr, [0, 40, 41, 41]);
        let piece = piece_blocks(41, 1, 132);
        assert_eq!(piece, 32);
        let (list, split_window, split_piece) = items(&w, &row_ptr(&a), piece).unwrap();
        assert_eq!((split_window, split_piece), (vec![0], vec![0, 2]));
        let spans: Vec<_> = list
            .iter()
            .map(|i| (i.window, i.begin, i.end, i.piece))
            .collect();
        assert_eq!(
            spans,
            [
                (0, 0, 32, 0),
                (0, 32, 40, 1),
                (1, 40, 41, WHOLE),
                (2, 41, 41, WHOLE)
            ]
        );
        // Row 1's entries before the second piece: its first 32 blocks' 512 columns.
        assert_eq!(list[1].entry[1], 1 + 32 * SLOTS);
        // Row 0's one entry (column 7) is in the first piece.
        assert_eq!((list[0].entry[0], list[1].entry[0]), (0, 1));
        // The window of rows 32.. has one row; past it, positions stay at nnz.
        assert_eq!(list[3].entry[1], entries.len());
    }

    #[test]
    fn pieces_lengthen_with_the_work_per_multiprocessor() {
        assert_eq!(piece_blocks(0, 1, 132), 32);
        // R-MAT 2^20 x 16 on 132 multiprocessors: 940,556 blocks.
        assert_eq!(piece_blocks(940_556, 1, 132), 222);
        // R-MAT 2^18 x 16 with four heads: 220,687 blocks, each taken by four warps.
        assert_eq!(piece_blocks(220_687, 4, 132), 208);
        assert_eq!(piece_blocks(usize::MAX, 2, 132), 512);
        assert_eq!(piece_blocks(1 << 20, 1, 0), 512);
    }

    #[test]
    fn chunks_hold_the_heads() {
        assert_eq!(k_chunks(1), Some(1));
        assert_eq!(k_chunks(64), Some(2));
        assert_eq!(k_chunks(130), Some(8));
        assert_eq!(k_chunks(WIDEST_D + 1), None);
        assert_eq!(chunks(64, 64), Some((2, 1, 1)));
        assert_eq!(chunks(64, 128), Some((2, 2, 1)));
        assert_eq!(chunks(128, 128), Some((4, 1, 2)));
        assert_eq!(chunks(100, 65), Some((4, 1, 2)));
        assert_eq!(chunks(128, 64), Some((4, 1, 1)));
        assert_eq!(chunks(128, 129), Some((4, 2, 1)));
        assert_eq!(chunks(130, 128), Some((8, 1, 1)));
        assert_eq!(chunks(WIDEST_D + 1, 64), None);
        for c in [
            (1, 1),
            (64, 64),
            (64, 128),
            (128, 128),
            (128, 64),
            (128, 129),
            (256, 300),
        ] {
            let chunks = chunks(c.0, c.1).unwrap();
            assert!(
                CHUNKS.contains(&chunks),
                "{c:?}: {chunks:?} not instantiated"
            );
        }
    }
}
