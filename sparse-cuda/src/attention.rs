//! Sparse attention on CUDA cores, `O = softmax_row(scale*(Q*K^T) ∘ spy(A) [+ A]) * V` over
//! several heads (`attention.cu` has the kernel).
//!
//! The `fused` algorithm (DF-GNN's tiling, corrected): one pass over each row's K and V rows
//! per head with an online softmax whose running maximum starts at -inf. Rows are listed by
//! length at plan time: rows of up to [`LONG_ROW`] entries take one warp per head; longer rows
//! are cut into pieces of [`LONG_ROW`] entries, a warp per head each, whose partial results a
//! second kernel combines in piece order, so runs are bit-reproducible. Groups of G lanes score
//! an entry (G chosen per run from d); lanes hold CH consecutive columns of V (CH chosen per run
//! from dv), wider V heads are cut into slices over grid.y. The backward gives a long row a block
//! of [`LONG_WARPS`] warps instead.
//!
//! The `fused-tc` algorithm (`tensor_core.rs`): the same forward and backward on tensor cores
//! in f16 and bf16 (heads wider than those kernels take run this file's).
//!
//! The `unfused` algorithm (`unfused.rs`): SDDMM, a row softmax and SpMM, the baseline.
//!
//! `auto` (`auto.rs`): `fused-tc` in f16 and bf16; in f32 `fused`, or `unfused` for heads wider
//! than a warp of `fused` holds and for large graphs of short rows and columns.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig};
use sparse_core::{
    Algorithm, AttentionDesc, AttentionShape, BackendKind, CsrRef, DType, Error, Format, OpKind,
    PlanInfo, Precision, Result, Scalar, SpIndex,
};

use sparse_formats::Transposed;

use crate::device::Device;
use crate::kernel::{
    c_type, kernel_params, Entry, Kernel, KernelParams, KernelSource, KernelSpec, MutPtr, Ptr,
};
use crate::matrix::DeviceCsr;
use crate::operand::{to_u32, AttentionGradOperands, AttentionOperands, Bound};
use crate::plan::{AttentionKernels, CudaPlan, Phase, PlanBase, PlanClock};

mod auto;
mod tensor_core;
mod unfused;
pub(crate) use auto::AutoAttention;
use tensor_core::TensorCore;
pub(crate) use unfused::plan as unfused_plan;

/// Threads per block (`ATTN_BLOCK`): eight warps.
const BLOCK: u32 = 256;
/// Rows longer than this are long: the forward cuts them into pieces of this many entries
/// (`ATTN_PIECE`), a warp each, and the backward gives them a block of warps rather than one.
const LONG_ROW: usize = 256;
/// Warps of a long row in the backward: the whole block.
const LONG_WARPS: u32 = BLOCK / 32;
/// Columns per lane (CH) instantiated: a lane holds 32*CH columns of a head.
const CHUNKS: [u32; 4] = [1, 2, 4, 8];
/// Warps per item instantiated by the backward: short rows and long rows.
const WARPS: [u32; 2] = [1, LONG_WARPS];
/// Lanes per entry (G) of the forward's scores instantiated: each lane holds two 16-byte runs
/// of a head's Q row (`ATTN_HELD_RUNS`), so G lanes hold 2*16*G bytes of it.
const GROUPS: [u32; 4] = [4, 8, 16, 32];
/// Runs of a Q row each lane of a score group holds (`ATTN_HELD_RUNS`).
const HELD_RUNS: usize = 2;

kernel_params! {
    /// The heads and dense operands of a forward run, as the fused kernels read them: Q
    /// (rows x heads*d), K (cols x heads*d), V (cols x heads*dv) and O (rows x heads*dv) at
    /// their strides; `bias`: A's values are added to the scaled scores.
    pub(crate) struct AttentionHeads<T> {
        heads: u32,
        d: u32,
        dv: u32,
        bias: u32,
        scale: f32,
        q: ptr(T),
        q_rs: u32,
        q_cs: u32,
        k: ptr(T),
        k_rs: u32,
        k_cs: u32,
        v: ptr(T),
        v_rs: u32,
        v_cs: u32,
        o: out(T),
        o_rs: u32,
        o_cs: u32,
    }
}

impl<T: Scalar> AttentionHeads<T> {
    fn new(shape: &AttentionShape, ops: &AttentionOperands) -> Result<Self> {
        let ((q_rs, q_cs), (k_rs, k_cs), (v_rs, v_cs), (o_rs, o_cs)) = (
            ops.q.strides(),
            ops.k.strides(),
            ops.v.strides(),
            ops.o.strides(),
        );
        Ok(AttentionHeads {
            heads: to_u32("attention heads", shape.heads)?,
            d: to_u32("attention head width", shape.d)?,
            dv: to_u32("attention V head width", shape.dv)?,
            bias: u32::from(shape.bias),
            scale: shape.scale as f32,
            q: ops.q.input(),
            q_rs,
            q_cs,
            k: ops.k.input(),
            k_rs,
            k_cs,
            v: ops.v.input(),
            v_rs,
            v_cs,
            o: ops.o.output(),
            o_rs,
            o_cs,
        })
    }
}

kernel_params! {
    /// `attention_fused<T, CH, G>` and `attention_fused_combine<T>`. The forward's items, each
    /// with every head, are the `pieces` pieces of long rows (row `piece_row[i]` from entry
    /// `piece_begin[i]`, `ATTN_PIECE` entries or to the row's end), then the rows `rows[j]`
    /// whole, `items` in all. Piece i's results go to its slot i of `scratch`; the combine adds
    /// the slots `piece_first[j] .. piece_first[j + 1]` of row `long_rows[j]`, j < long_count.
    /// `q_vec`, `k_vec`: Q and K take 16-byte loads; `v_vec`: V takes one load of a lane's CH
    /// columns.
    pub(crate) struct AttentionFused<T> {
        items: u32,
        pieces: u32,
        piece_row: ptr(u32),
        piece_begin: ptr(u32),
        rows: ptr(u32),
        long_count: u32,
        long_rows: ptr(u32),
        piece_first: ptr(u32),
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        values: ptr(T),
        ops: sub(AttentionHeads),
        q_vec: u32,
        k_vec: u32,
        v_vec: u32,
        stats: out(f32),
        scratch: out(f32),
    }
}

kernel_params! {
    /// `attention_softmax<T>`: row i's weights from `scores` (plus `values` with `bias`) into
    /// `weights`, entries `row_ptr[i] .. row_ptr[i + 1]`.
    pub(crate) struct AttentionSoftmax<T> {
        rows: u32,
        row_ptr: ptr(u32),
        values: ptr(T),
        scores: ptr(T),
        weights: out(T),
        bias: u32,
    }
}

kernel_params! {
    /// `attention_widen<T>` / `attention_narrow<T>`: `rows x cols` elements of T at `t` (row
    /// stride `t_rs`, column stride `t_cs`, in elements) to or from the row-major f32 `wide`.
    pub(crate) struct AttentionWiden<T> {
        rows: u32,
        cols: u32,
        t: out(T),
        t_rs: u32,
        t_cs: u32,
        wide: out(acc),
    }
}

kernel_params! {
    /// `attention_unfused_grad<T>`: head `head` of `heads` (V width `dv`) of rows `row_ptr`;
    /// O and dO at their strides; P in `probs` (overwritten with dS), dP in `dprobs`; dbias
    /// (`dbias_inc` apart, null when not asked for) and, with `bias`, the f32 sum over heads in
    /// `bias_sum`.
    pub(crate) struct AttentionUnfusedGrad<T> {
        rows: u32,
        head: u32,
        heads: u32,
        dv: u32,
        row_ptr: ptr(u32),
        o: ptr(T),
        o_rs: u32,
        o_cs: u32,
        d_o: ptr(T),
        do_rs: u32,
        do_cs: u32,
        probs: out(f32),
        dprobs: ptr(f32),
        bias_sum: out(f32),
        dbias: out(T),
        dbias_inc: u32,
        bias: u32,
    }
}

kernel_params! {
    /// The backward kernels (`attention_backward_rows<T, CH>`, `attention_backward_cols<T, CH>`,
    /// `attention_backward_bias<T>`): A by rows and by columns (`t_*`, [`Transposed`]), the
    /// forward's operands and statistics, dL/dO, the gradients (g*) and the per-(entry, head)
    /// weights and score gradients passed between the kernels. The row and column passes take
    /// the items `list[i]` (rows or columns) for i < items, each with every head.
    pub(crate) struct AttentionGrad<T> {
        items: u32,
        list: ptr(u32),
        rows: u32,
        cols: u32,
        nnz: u32,
        heads: u32,
        d: u32,
        dv: u32,
        bias: u32,
        scale: f32,
        row_ptr: ptr(u32),
        col_idx: ptr(u32),
        values: ptr(T),
        t_ptr: ptr(u32),
        t_row: ptr(u32),
        t_entry: ptr(u32),
        q: ptr(T),
        q_rs: u32,
        q_cs: u32,
        k: ptr(T),
        k_rs: u32,
        k_cs: u32,
        v: ptr(T),
        v_rs: u32,
        v_cs: u32,
        o: ptr(T),
        o_rs: u32,
        o_cs: u32,
        d_o: ptr(T),
        do_rs: u32,
        do_cs: u32,
        gq: out(T),
        gq_rs: u32,
        gq_cs: u32,
        gk: out(T),
        gk_rs: u32,
        gk_cs: u32,
        gv: out(T),
        gv_rs: u32,
        gv_cs: u32,
        gb: out(T),
        gb_inc: u32,
        stats: ptr(f32),
        prob_grads: out(f32),
    }
}

pub(crate) const SOURCE: KernelSource = KernelSource {
    name: "attention",
    code: include_str!("../kernels/attention.cu"),
    params: &[
        <AttentionHeads<f32> as KernelParams>::C_DECL,
        <AttentionFused<f32> as KernelParams>::C_DECL,
        <AttentionSoftmax<f32> as KernelParams>::C_DECL,
        <AttentionWiden<f32> as KernelParams>::C_DECL,
        <AttentionUnfusedGrad<f32> as KernelParams>::C_DECL,
        <AttentionGrad<f32> as KernelParams>::C_DECL,
    ],
    defines: &[
        ("ATTN_BLOCK", BLOCK),
        ("ATTN_PIECE", LONG_ROW as u32),
        ("ATTN_HELD_RUNS", HELD_RUNS as u32),
    ],
};

fn entry<T: Scalar>(chunks: u32, group: u32) -> Result<Entry<AttentionFused<T>>> {
    Entry::new(
        &SOURCE,
        "attention_fused",
        &[&c_type(T::DTYPE)?, &chunks, &group],
    )
}

/// Every (CH, G) instantiation, G major.
fn entries<T: Scalar>() -> Result<Vec<Entry<AttentionFused<T>>>> {
    GROUPS
        .iter()
        .flat_map(|&g| CHUNKS.iter().map(move |&c| entry::<T>(c, g)))
        .collect()
}

fn combine_entry<T: Scalar>() -> Result<Entry<AttentionFused<T>>> {
    Entry::new(&SOURCE, "attention_fused_combine", &[&c_type(T::DTYPE)?])
}

fn softmax_entry<T: Scalar>() -> Result<Entry<AttentionSoftmax<T>>> {
    Entry::new(&SOURCE, "attention_softmax", &[&c_type(T::DTYPE)?])
}

fn unfused_grad_entry<T: Scalar>() -> Result<Entry<AttentionUnfusedGrad<T>>> {
    Entry::new(&SOURCE, "attention_unfused_grad", &[&c_type(T::DTYPE)?])
}

/// `attention_widen<T>` and `attention_narrow<T>`.
fn widening_entries<T: Scalar>() -> Result<[Entry<AttentionWiden<T>>; 2]> {
    let t = c_type(T::DTYPE)?;
    Ok([
        Entry::new(&SOURCE, "attention_widen", &[&t])?,
        Entry::new(&SOURCE, "attention_narrow", &[&t])?,
    ])
}

/// The backward's kernels of one storage type.
struct GradEntries<T: Scalar> {
    /// By (WPI, CH), in the order of [`WARPS`] and [`CHUNKS`].
    rows: Vec<Entry<AttentionGrad<T>>>,
    cols: Vec<Entry<AttentionGrad<T>>>,
    bias: Entry<AttentionGrad<T>>,
}

impl<T: Scalar> GradEntries<T> {
    fn new() -> Result<Self> {
        let t = c_type(T::DTYPE)?;
        let by_chunks = |name| -> Result<Vec<_>> {
            WARPS
                .iter()
                .flat_map(|w| CHUNKS.iter().map(move |c| (w, c)))
                .map(|(w, c)| Entry::new(&SOURCE, name, &[&t, c, w]))
                .collect()
        };
        Ok(GradEntries {
            rows: by_chunks("attention_backward_rows")?,
            cols: by_chunks("attention_backward_cols")?,
            bias: Entry::new(&SOURCE, "attention_backward_bias", &[&t])?,
        })
    }

    /// The specs of the bias kernel and, for the CUDA-core backward, of the two passes.
    fn specs(&self, cuda_core: bool) -> Vec<&KernelSpec> {
        let mut specs = vec![self.bias.spec()];
        if cuda_core {
            specs.extend(self.rows.iter().chain(&self.cols).map(|e| e.spec()));
        }
        specs
    }
}

fn specs_of<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let mut specs: Vec<KernelSpec> = entries::<T>()?.iter().map(|e| e.spec().clone()).collect();
    specs.push(combine_entry::<T>()?.spec().clone());
    specs.push(unfused_grad_entry::<T>()?.spec().clone());
    if T::DTYPE != DType::F32 {
        specs.extend(widening_entries::<T>()?.iter().map(|e| e.spec().clone()));
    }
    specs.extend(GradEntries::<T>::new()?.specs(true).into_iter().cloned());
    Ok(specs)
}

/// Every kernel of this file Rust can ask for.
pub(crate) fn all_specs() -> Result<Vec<KernelSpec>> {
    let mut specs = vec![softmax_entry::<f32>()?.spec().clone()];
    specs.extend(specs_of::<f32>()?);
    specs.extend(specs_of::<half::f16>()?);
    specs.extend(specs_of::<half::bf16>()?);
    specs.extend(tensor_core::all_specs()?);
    Ok(specs)
}

/// CH for heads of widths `d` and `dv`: the fewest columns per lane that hold both, at most
/// the widest instantiated.
fn chunks_for(d: usize, dv: usize) -> u32 {
    let width = d.max(dv).max(1);
    CHUNKS
        .iter()
        .copied()
        .find(|&c| 32 * c as usize >= width)
        .unwrap_or(CHUNKS[CHUNKS.len() - 1])
}

/// Whether V's rows take one load of a lane's `chunks` consecutive columns: contiguous rows
/// whose starts (every head's, `dv` apart) and spans stay aligned to the span.
fn spans_load_whole<T: Scalar>(v: &Bound, dv: usize, chunks: usize) -> bool {
    let (rs, cs) = v.strides();
    let span = chunks * size_of::<T>();
    cs == 1 && rs as usize % chunks == 0 && dv % chunks == 0 && v.address % span as u64 == 0
}

/// G for heads of width `d` in storage T: the fewest lanes per score whose held runs of Q
/// (`HELD_RUNS` of 16 bytes each) cover d, at most the widest instantiated (the rest of a
/// wider head is read in a loop).
fn group_for<T: Scalar>(d: usize) -> u32 {
    let per_lane = HELD_RUNS * 16 / size_of::<T>();
    GROUPS
        .iter()
        .copied()
        .find(|&g| g as usize * per_lane >= d)
        .unwrap_or(GROUPS[GROUPS.len() - 1])
}

/// The rows (or columns) of offsets `ptr` by length: those of up to [`LONG_ROW`] entries
/// (empty ones included), and the longer ones.
fn split_by_length(ptr: &[usize]) -> Result<(Vec<u32>, Vec<u32>)> {
    let (mut short, mut long) = (Vec::new(), Vec::new());
    for (i, w) in ptr.windows(2).enumerate() {
        let list = if w[1] - w[0] > LONG_ROW {
            &mut long
        } else {
            &mut short
        };
        list.push(to_u32("row or column index", i)?);
    }
    Ok((short, long))
}

/// One list of rows and how many there are.
struct RowList {
    rows: CudaSlice<u32>,
    len: u32,
}

impl RowList {
    fn upload(device: &Device, rows: &[u32]) -> Result<Self> {
        Ok(RowList {
            rows: device.upload_converted(rows, 0, |&r| r)?,
            len: to_u32("number of rows", rows.len())?,
        })
    }

    /// The launch of `warps` warps per (listed item, head), `slices` column slices over grid.y.
    fn grid(&self, heads: u32, warps: u32, slices: u32) -> Result<LaunchConfig> {
        grid(self.len, heads, warps, slices)
    }
}

/// The launch of `warps` warps per (item, head) for `items` items, `slices` column slices over
/// grid.y.
fn grid(items: u32, heads: u32, warps: u32, slices: u32) -> Result<LaunchConfig> {
    let items = u64::from(items) * u64::from(heads);
    let per_block = u64::from(BLOCK / 32 / warps);
    let blocks = u32::try_from(items.div_ceil(per_block))
        .map_err(|_| Error::overflow::<u32>("attention blocks", items as usize))?;
    Ok(LaunchConfig {
        grid_dim: (blocks, slices, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// The forward's pieces of the long rows ([`RowList`] `long`, in its order): each piece's row
/// and first entry, where each long row's pieces start (one offset more than long rows), and
/// the pieces' scratch, grown to the widest heads run.
struct Pieces {
    row: CudaSlice<u32>,
    begin: CudaSlice<u32>,
    first: CudaSlice<u32>,
    count: u32,
    scratch: CudaSlice<f32>,
}

/// The pieces of [`LONG_ROW`] entries of the rows `long` of offsets `ptr`: (row, first entry)
/// of each, and the first piece of each row followed by the number of pieces.
fn pieces_of(ptr: &[usize], long: &[u32]) -> Result<(Vec<u32>, Vec<u32>, Vec<u32>)> {
    let (mut rows, mut begins, mut first) = (Vec::new(), Vec::new(), Vec::new());
    for &r in long {
        first.push(to_u32("attention pieces", rows.len())?);
        let (from, to) = (ptr[r as usize], ptr[r as usize + 1]);
        for begin in (from..to).step_by(LONG_ROW) {
            rows.push(r);
            begins.push(to_u32("number of entries", begin)?);
        }
    }
    first.push(to_u32("attention pieces", rows.len())?);
    Ok((rows, begins, first))
}

impl Pieces {
    fn upload(device: &Device, ptr: &[usize], long: &[u32]) -> Result<Self> {
        let (rows, begins, first) = pieces_of(ptr, long)?;
        Ok(Pieces {
            row: device.upload_converted(&rows, 0, |&r| r)?,
            begin: device.upload_converted(&begins, 0, |&b| b)?,
            first: device.upload_converted(&first, 0, |&f| f)?,
            count: to_u32("attention pieces", rows.len())?,
            scratch: device.alloc_zeros(0, "attention piece scratch")?,
        })
    }

    /// Grows the scratch to the sums, maximum and sum of every (piece, head) for heads of `dv`
    /// V columns.
    fn reserve(&mut self, device: &Device, heads: usize, dv: usize) -> Result<()> {
        let floats = (self.count as usize)
            .checked_mul(heads)
            .and_then(|n| n.checked_mul(dv + 2))
            .ok_or_else(|| Error::overflow::<usize>("attention piece scratch", dv))?;
        if self.scratch.len() < floats {
            self.scratch = device.alloc_zeros(floats, "attention piece scratch")?;
        }
        Ok(())
    }

    fn bytes(&self) -> usize {
        (self.row.len() + self.begin.len() + self.first.len()) * size_of::<u32>()
            + self.scratch.len() * size_of::<f32>()
    }
}

/// The fused attention kernels of one plan and the matrix they read.
pub(crate) struct FusedAttention<T: Scalar> {
    desc: AttentionDesc,
    a: DeviceCsr<T>,
    /// A's rows of up to [`LONG_ROW`] entries and the longer ones.
    short: RowList,
    long: RowList,
    pieces: Pieces,
    /// By (G, CH), in the order of [`entries`].
    kernels: Vec<Kernel<AttentionFused<T>>>,
    combine: Kernel<AttentionFused<T>>,
    /// The tensor-core kernels of a `fused-tc` plan (heads they do not take run the CUDA-core
    /// kernels).
    tensor: Option<TensorCore<T>>,
    backward: Backward<T>,
}

/// What the backward keeps: the forward's row statistics (maximum, normaliser per (row, head)),
/// the weights and score gradients per (entry, head), the bias gradient's kernel, and the
/// CUDA-core backward of a `fused` plan (a `fused-tc` plan's runs on tensor cores).
struct Backward<T: Scalar> {
    stats: CudaSlice<f32>,
    /// A forward run has left its statistics.
    ran: bool,
    /// P and dS of each (entry, head), side by side, so that the column pass gathers both at once.
    prob_grads: CudaSlice<f32>,
    bias: Kernel<AttentionGrad<T>>,
    cuda_core: Option<CudaCoreBackward<T>>,
}

impl<T: Scalar> Backward<T> {
    fn bytes(&self) -> usize {
        (self.stats.len() + self.prob_grads.len()) * size_of::<f32>()
            + self.cuda_core.as_ref().map_or(0, CudaCoreBackward::bytes)
    }
}

/// The CUDA-core backward: A by columns with its columns listed by length, and the kernels of
/// the row pass and the column pass.
struct CudaCoreBackward<T: Scalar> {
    short_cols: RowList,
    long_cols: RowList,
    t_ptr: CudaSlice<u32>,
    t_row: CudaSlice<u32>,
    t_entry: CudaSlice<u32>,
    rows: Vec<Kernel<AttentionGrad<T>>>,
    cols: Vec<Kernel<AttentionGrad<T>>>,
}

impl<T: Scalar> CudaCoreBackward<T> {
    /// A^T `t`, its columns by length in `short_cols` and `long_cols`.
    fn upload(
        device: &Arc<Device>,
        t: &Transposed,
        (short_cols, long_cols): (&[u32], &[u32]),
        grads: &GradEntries<T>,
    ) -> Result<Self> {
        let to_u32s = |v: &[usize]| device.upload_converted(v, 0, |&x| x as u32);
        let load_all = |list: &[Entry<AttentionGrad<T>>]| -> Result<Vec<_>> {
            list.iter().map(|e| device.kernel(e)).collect()
        };
        Ok(CudaCoreBackward {
            short_cols: RowList::upload(device, short_cols)?,
            long_cols: RowList::upload(device, long_cols)?,
            // Offsets up to nnz, rows and entry positions below it: all fit u32 (checked by
            // the plan).
            t_ptr: to_u32s(&t.col_ptr)?,
            t_row: to_u32s(&t.row)?,
            t_entry: to_u32s(&t.entry)?,
            rows: load_all(&grads.rows)?,
            cols: load_all(&grads.cols)?,
        })
    }

    fn bytes(&self) -> usize {
        (self.t_ptr.len()
            + self.t_row.len()
            + self.t_entry.len()
            + self.short_cols.rows.len()
            + self.long_cols.rows.len())
            * size_of::<u32>()
    }
}

/// `auto`'s algorithm: a fused kernel, on tensor cores in f16 and bf16. Fused kernels read each
/// K and V row once per (row, head) and write O once, where the unfused pipeline also writes and
/// reads the scores and the weights (three kernels per head). In f32 the plan is an
/// [`AutoAttention`], which takes the unfused pipeline for heads too wide for `fused` and for
/// large graphs whose rows and columns are all short; in f16
/// and bf16 the unfused pipeline widens every head into f32 staging and was 5.7x-7.6x slower
/// than `fused` even there.
pub(crate) fn auto_algorithm(precision: Precision) -> Algorithm {
    match precision.storage {
        DType::F16 | DType::BF16 => Algorithm::FusedTensorCore,
        _ => Algorithm::Fused,
    }
}

/// A planned `fused` or `fused-tc` attention.
pub(crate) fn plan<T: Scalar, I: SpIndex>(
    device: &Arc<Device>,
    a: CsrRef<'_, T, I>,
    desc: &AttentionDesc,
    algorithm: Algorithm,
    clock: PlanClock,
) -> Result<CudaPlan<T, FusedAttention<T>>> {
    let entries = entries::<T>()?;
    let grads = GradEntries::<T>::new()?;
    let tensor_core = algorithm == Algorithm::FusedTensorCore;
    let tensor_specs = if tensor_core {
        TensorCore::<T>::specs()?
    } else {
        Vec::new()
    };
    let mut specs: Vec<&KernelSpec> = entries.iter().map(|e| e.spec()).collect();
    specs.extend(grads.specs(!tensor_core));
    specs.extend(tensor_specs.iter());
    let info = PlanInfo::new(
        BackendKind::Cuda,
        OpKind::Attention,
        Format::Csr,
        desc.precision,
        algorithm,
        true,
    );
    let (base, mut clock) = PlanBase::new(device, a, info, &specs, clock)?;
    let row_ptr: Vec<usize> = (0..=a.rows()).map(|i| a.row_ptr()[i].to_usize()).collect();
    let (short, long) = split_by_length(&row_ptr)?;
    to_u32("number of entries", a.nnz())?;
    let transposed = Transposed::of(a);
    let (layouts, columns) = if tensor_core {
        let layouts = tensor_core::Layouts::of(
            a,
            &row_ptr,
            &transposed,
            desc.heads,
            device.info.multiprocessors,
        )?;
        (Some(layouts), None)
    } else {
        (None, Some(split_by_length(&transposed.col_ptr)?))
    };
    let per_head = |n: usize| {
        n.checked_mul(desc.heads)
            .ok_or_else(|| Error::overflow::<usize>("attention statistics", n))
    };
    clock.lap(device, Phase::Host)?;
    let backward = Backward {
        stats: device.alloc_zeros(per_head(2 * a.rows())?, "attention statistics")?,
        ran: false,
        prob_grads: device.alloc_zeros(
            per_head(2 * a.nnz())?,
            "attention weights and score gradients",
        )?,
        bias: device.kernel(&grads.bias)?,
        cuda_core: columns
            .map(|(short, long)| {
                CudaCoreBackward::upload(device, &transposed, (&short, &long), &grads)
            })
            .transpose()?,
    };
    let family = FusedAttention {
        desc: *desc,
        a: DeviceCsr::upload(device, a)?,
        short: RowList::upload(device, &short)?,
        long: RowList::upload(device, &long)?,
        pieces: Pieces::upload(device, &row_ptr, &long)?,
        kernels: entries
            .iter()
            .map(|e| device.kernel(e))
            .collect::<Result<_>>()?,
        combine: device.kernel(&combine_entry::<T>()?)?,
        tensor: layouts
            .map(|l| TensorCore::upload(device, &l, (a.rows(), a.cols()), desc.heads))
            .transpose()?,
        backward,
    };
    clock.lap(device, Phase::Transfer)?;
    let bytes = family.a.bytes()
        + (short.len() + long.len()) * size_of::<u32>()
        + family.pieces.bytes()
        + family.backward.bytes()
        + family.tensor.as_ref().map_or(0, TensorCore::bytes);
    Ok(base.into_plan(clock, bytes, family))
}

impl<T: Scalar> FusedAttention<T> {
    fn kernel(&self, chunks: u32, group: u32) -> Result<&Kernel<AttentionFused<T>>> {
        let g = GROUPS.iter().position(|&x| x == group);
        let c = CHUNKS.iter().position(|&x| x == chunks);
        match (g, c) {
            (Some(g), Some(c)) => Ok(&self.kernels[g * CHUNKS.len() + c]),
            _ => Err(Error::internal(format!(
                "no attention kernel with {chunks} columns per lane and {group} lanes per score"
            ))),
        }
    }
}

impl<T: Scalar> AttentionKernels<T> for FusedAttention<T> {
    fn desc(&self) -> &AttentionDesc {
        &self.desc
    }

    fn run(
        &mut self,
        base: &PlanBase<T>,
        shape: &AttentionShape,
        ops: &AttentionOperands,
    ) -> Result<()> {
        let (row_ptr, col_idx, values) = self.a.pointers(&base.device);
        let heads = AttentionHeads::new(shape, ops)?;
        if let Some(tensor) = self
            .tensor
            .as_mut()
            .filter(|_| TensorCore::<T>::takes(shape))
        {
            tensor.run(base, shape, ops, heads, values, &self.backward.stats)?;
            self.backward.ran = true;
            return Ok(());
        }
        let chunks = chunks_for(shape.dv, shape.dv);
        let group = group_for::<T>(shape.d);
        let slices = to_u32(
            "attention column slices",
            shape.dv.div_ceil(32 * chunks as usize),
        )?;
        if slices > 65_535 {
            return Err(Error::invalid(format!(
                "attention heads of {} V columns need {slices} column slices, more than grid.y \
                 holds (65535)",
                shape.dv
            )));
        }
        let device = &base.device;
        self.pieces.reserve(device, shape.heads, shape.dv)?;
        let (pieces, short, long) = (&self.pieces, &self.short, &self.long);
        let items = pieces
            .count
            .checked_add(short.len)
            .ok_or_else(|| Error::overflow::<u32>("attention items", pieces.count as usize))?;
        let params = AttentionFused {
            items,
            pieces: pieces.count,
            piece_row: Ptr::of(&pieces.row, device),
            piece_begin: Ptr::of(&pieces.begin, device),
            rows: Ptr::of(&short.rows, device),
            long_count: long.len,
            long_rows: Ptr::of(&long.rows, device),
            piece_first: Ptr::of(&pieces.first, device),
            row_ptr,
            col_idx,
            values,
            ops: heads,
            q_vec: u32::from(tensor_core::vectors::<T>(&ops.q, shape.heads, shape.d)),
            // Whole runs only, so that the kernel's K loads need no element-wise tail.
            k_vec: u32::from(
                tensor_core::vectors::<T>(&ops.k, shape.heads, shape.d)
                    && shape.d % (16 / size_of::<T>()) == 0,
            ),
            v_vec: u32::from(spans_load_whole::<T>(&ops.v, shape.dv, chunks as usize)),
            stats: MutPtr::of(&self.backward.stats, device),
            scratch: MutPtr::of(&pieces.scratch, device),
        };
        // SAFETY: every listed row is below A's rows and its entries' columns below A's
        // columns (a canonical CSR); each piece starts at an entry of its row, and an item reads
        // at most LONG_ROW entries of its row; Q spans rows x heads*d, K cols x heads*d, V cols x
        // heads*dv and O rows x heads*dv at their strides (bound operands checked against
        // `shape`), read by 16-byte accesses only where `vectors` holds; the kernel reads head
        // h's columns h*d + t for t < d (h*dv + t, t < dv) only, and writes each (row, head,
        // column) of O once: a whole row's by its warp, a long row's by the combine, after the
        // pieces wrote their (pieces x heads) slots of dv + 2 floats (stream order), which the
        // scratch holds (`reserve` above).
        unsafe {
            if items > 0 {
                self.kernel(chunks, group)?
                    .launch(grid(items, heads.heads, 1, slices)?, &params)?;
            }
            if long.len > 0 {
                self.combine
                    .launch(grid(long.len, heads.heads, 1, 1)?, &params)?;
            }
        }
        self.backward.ran = true;
        Ok(())
    }

    fn backward(
        &mut self,
        base: &PlanBase<T>,
        shape: &AttentionShape,
        ops: &AttentionGradOperands,
    ) -> Result<()> {
        let b = &self.backward;
        if !b.ran {
            return Err(Error::invalid(
                "the attention backward reads the statistics of a forward run: run the plan first",
            ));
        }
        let widest = 32 * CHUNKS[CHUNKS.len() - 1] as usize;
        const _: () = assert!(32 * CHUNKS[CHUNKS.len() - 1] as usize == tensor_core::WIDEST_D);
        if shape.d.max(shape.dv) > widest {
            return Err(Error::invalid(format!(
                "the attention backward on the GPU takes heads up to {widest} columns wide, got \
                 d = {} and dv = {}",
                shape.d, shape.dv
            )));
        }
        let device = &base.device;
        let (row_ptr, col_idx, values) = self.a.pointers(device);
        let (q_rs, q_cs) = ops.q.strides();
        let (k_rs, k_cs) = ops.k.strides();
        let (v_rs, v_cs) = ops.v.strides();
        let (o_rs, o_cs) = ops.o.strides();
        let (do_rs, do_cs) = ops.d_o.strides();
        let (gq_rs, gq_cs) = ops.dq.strides();
        let (gk_rs, gk_cs) = ops.dk.strides();
        let (gv_rs, gv_cs) = ops.dv.strides();
        let heads = to_u32("attention heads", shape.heads)?;
        // A by columns, read by the CUDA-core backward only.
        let (t_ptr, t_row, t_entry) =
            b.cuda_core
                .as_ref()
                .map_or((Ptr::NULL, Ptr::NULL, Ptr::NULL), |c| {
                    (
                        Ptr::of(&c.t_ptr, device),
                        Ptr::of(&c.t_row, device),
                        Ptr::of(&c.t_entry, device),
                    )
                });
        let params = AttentionGrad {
            items: 0,
            list: Ptr::NULL,
            rows: self.a.rows,
            cols: self.a.cols,
            nnz: self.a.nnz,
            heads,
            d: to_u32("attention head width", shape.d)?,
            dv: to_u32("attention V head width", shape.dv)?,
            bias: u32::from(shape.bias),
            scale: shape.scale as f32,
            row_ptr,
            col_idx,
            values,
            t_ptr,
            t_row,
            t_entry,
            q: ops.q.input(),
            q_rs,
            q_cs,
            k: ops.k.input(),
            k_rs,
            k_cs,
            v: ops.v.input(),
            v_rs,
            v_cs,
            o: ops.o.input(),
            o_rs,
            o_cs,
            d_o: ops.d_o.input(),
            do_rs,
            do_cs,
            gq: ops.dq.output(),
            gq_rs,
            gq_cs,
            gk: ops.dk.output(),
            gk_rs,
            gk_cs,
            gv: ops.dv.output(),
            gv_rs,
            gv_cs,
            gb: ops.dbias.map_or(MutPtr::NULL, |d| d.output()),
            gb_inc: ops.dbias.map_or(0, |d| d.increment()),
            stats: Ptr::of(&b.stats, device),
            prob_grads: MutPtr::of(&b.prob_grads, device),
        };
        // Both backwards take heads up to the same width, checked above.
        if let Some(tensor) = self.tensor.as_mut() {
            tensor.backward(device, shape, ops, params)?;
        } else {
            let c = b
                .cuda_core
                .as_ref()
                .ok_or_else(|| Error::internal("a fused attention plan without its backward"))?;
            let chunks = chunks_for(shape.d, shape.dv);
            let position = CHUNKS
                .iter()
                .position(|&c| c == chunks)
                .ok_or_else(|| Error::internal("an uninstantiated attention width"))?;
            // The row pass by the forward's row lists, the column pass by the plan's column
            // lists.
            let passes = [
                (&c.rows, [&self.short, &self.long]),
                (&c.cols, [&c.short_cols, &c.long_cols]),
            ];
            // SAFETY: A by rows and by columns describe the same canonical pattern (indices
            // below rows, cols and nnz; the lists hold rows and columns of it); the operands
            // span their shapes at their strides (bound and checked against `shape`, whose
            // heads the statistics, weights and score gradients were sized for at plan time);
            // each kernel writes each gradient element, weight and score gradient once; the
            // row pass finishes before the column pass reads its results (one stream).
            unsafe {
                for (kernels, lists) in passes {
                    for (w, (list, warps)) in lists.into_iter().zip(WARPS).enumerate() {
                        if list.len == 0 {
                            continue;
                        }
                        let config = list.grid(heads, warps, 1)?;
                        let params = AttentionGrad {
                            items: list.len,
                            list: Ptr::of(&list.rows, device),
                            ..params
                        };
                        kernels[w * CHUNKS.len() + position].launch(config, &params)?;
                    }
                }
            }
        }
        // SAFETY: a thread per entry below nnz reads its heads' score gradients (written by
        // the passes above, on the same stream) and writes its dbias element once.
        unsafe {
            if ops.dbias.is_some() && self.a.nnz > 0 {
                let config = LaunchConfig {
                    grid_dim: (self.a.nnz.div_ceil(BLOCK), 1, 1),
                    block_dim: (BLOCK, 1, 1),
                    shared_mem_bytes: 0,
                };
                b.bias.launch(config, &params)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_hold_both_widths_up_to_the_widest_variant() {
        assert_eq!(chunks_for(1, 1), 1);
        assert_eq!(chunks_for(0, 0), 1);
        assert_eq!(chunks_for(33, 3), 2);
        assert_eq!(chunks_for(64, 64), 2);
        assert_eq!(chunks_for(128, 130), 8);
        assert_eq!(chunks_for(1000, 4), 8);
    }

    #[test]
    fn long_rows_are_listed_apart() {
        let lengths = [0usize, LONG_ROW, LONG_ROW + 1, 3];
        let mut ptr = vec![0usize];
        for &len in &lengths {
            ptr.push(ptr[ptr.len() - 1] + len);
        }
        let (short, long) = split_by_length(&ptr).unwrap();
        assert_eq!((short, long), (vec![0, 1, 3], vec![2]));
    }

    #[test]
    fn long_rows_are_cut_into_pieces_of_the_long_row_limit() {
        // Rows 1 and 3 are long: 2 * LONG_ROW + 1 entries from 5, and LONG_ROW + 1 after them.
        let lengths = [5usize, 2 * LONG_ROW + 1, 7, LONG_ROW + 1];
        let mut ptr = vec![0usize];
        for &len in &lengths {
            ptr.push(ptr[ptr.len() - 1] + len);
        }
        let (rows, begins, first) = pieces_of(&ptr, &[1, 3]).unwrap();
        let (b1, b3) = (5u32, (5 + 2 * LONG_ROW + 1 + 7) as u32);
        let piece = LONG_ROW as u32;
        assert_eq!(rows, [1, 1, 1, 3, 3]);
        assert_eq!(begins, [b1, b1 + piece, b1 + 2 * piece, b3, b3 + piece]);
        assert_eq!(first, [0, 3, 5]);
    }

    #[test]
    fn score_groups_hold_the_head_up_to_the_widest_variant() {
        // Two 16-byte runs a lane: 8 f32 or 16 f16 elements.
        assert_eq!(group_for::<f32>(1), 4);
        assert_eq!(group_for::<f32>(64), 8);
        assert_eq!(group_for::<f32>(65), 16);
        assert_eq!(group_for::<f32>(128), 16);
        assert_eq!(group_for::<half::f16>(128), 8);
        assert_eq!(group_for::<f32>(1000), 32);
    }
}
