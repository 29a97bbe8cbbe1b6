//! The tensor-core backward of `fused-tc` (`attention_tc_grad_scores`,
//! `attention_tc_transpose_pairs`, `attention_tc_gather` and `attention_tc_gather_combine` in
//! `attention_tc.cu`). From the forward's row statistics, one kernel forms P and dS of every
//! (entry, head) with two score MMAs per block of A's windows (S = Q K^T and dP = dO V^T) and
//! stores them in A's order; a second copies them into A^T's. Both keep the largest magnitude
//! of the weights of each row of each layout, from which a weighted sum scales the row's
//! weights once. Three weighted sums on the MMA then make dQ = scale dS K over A's windows, and
//! dK = scale dS^T Q and dV = P^T dO over A^T's, each reading the pairs in its own layout's
//! order.

use std::sync::Arc;

use sparse_core::{AttentionShape, Error, Result, Scalar};

use crate::attention::AttentionGrad;
use crate::device::Device;
use crate::kernel::{c_type, Entry, Kernel, KernelSpec, MutPtr, Ptr};
use crate::operand::{to_u32, AttentionGradOperands, Bound};

use super::{
    grid, k_chunks, vectors, AttentionTcGather, AttentionTcScores, DeviceWindows, TensorCore,
    MOST_HEADS, SOURCE, WINDOW,
};

/// KC of the score kernel instantiated: chunks of 32 columns holding both d and dv.
const SCORE_CHUNKS: [u32; 4] = [1, 2, 4, 8];
/// Columns of X (and of the gradient) in a chunk: a warp of the weighted sum takes DVC chunks.
const CHUNK: usize = 64;

/// The DVC of each weighted sum instantiated, the narrowest first: one chunk, and two for heads
/// wider than one chunk, which load and split each block's weights once for twice the MMAs.
const GATHER_CHUNKS: [u32; 2] = [1, 2];

fn score_entry<T: Scalar>(chunks: u32) -> Result<Entry<AttentionTcScores<T>>> {
    Entry::new(
        &SOURCE,
        "attention_tc_grad_scores",
        &[&c_type(T::DTYPE)?, &chunks],
    )
}

fn transpose_entry<T: Scalar>() -> Result<Entry<AttentionTcScores<T>>> {
    Entry::new(
        &SOURCE,
        "attention_tc_transpose_pairs",
        &[&c_type(T::DTYPE)?],
    )
}

/// The index into [`GATHER_CHUNKS`] of the weighted sum of `width` columns: a head wider than a
/// chunk takes the widest slices instantiated.
fn gather_kind(width: usize) -> usize {
    if width > CHUNK {
        GATHER_CHUNKS.len() - 1
    } else {
        0
    }
}

/// `attention_tc_gather<T, DVC>` for each of [`GATHER_CHUNKS`].
fn gather_entries<T: Scalar>() -> Result<Vec<Entry<AttentionTcGather<T>>>> {
    let t = c_type(T::DTYPE)?;
    GATHER_CHUNKS
        .iter()
        .map(|dvc| Entry::new(&SOURCE, "attention_tc_gather", &[&t, dvc]))
        .collect()
}

fn combine_entry<T: Scalar>() -> Result<Entry<AttentionTcGather<T>>> {
    Entry::new(
        &SOURCE,
        "attention_tc_gather_combine",
        &[&c_type(T::DTYPE)?],
    )
}

pub(super) fn specs<T: Scalar>() -> Result<Vec<KernelSpec>> {
    let mut specs = SCORE_CHUNKS
        .iter()
        .map(|&c| Ok(score_entry::<T>(c)?.spec().clone()))
        .collect::<Result<Vec<_>>>()?;
    specs.push(transpose_entry::<T>()?.spec().clone());
    specs.extend(gather_entries::<T>()?.iter().map(|e| e.spec().clone()));
    specs.push(combine_entry::<T>()?.spec().clone());
    Ok(specs)
}

/// The backward's kernels.
pub(super) struct Kernels<T: Scalar> {
    /// By KC, in the order of [`SCORE_CHUNKS`].
    scores: Vec<Kernel<AttentionTcScores<T>>>,
    transpose: Kernel<AttentionTcScores<T>>,
    /// By DVC, in the order of [`GATHER_CHUNKS`].
    gather: Vec<Kernel<AttentionTcGather<T>>>,
    combine: Kernel<AttentionTcGather<T>>,
}

impl<T: Scalar> Kernels<T> {
    pub(super) fn load(device: &Arc<Device>) -> Result<Self> {
        Ok(Kernels {
            scores: SCORE_CHUNKS
                .iter()
                .map(|&c| device.kernel(&score_entry::<T>(c)?))
                .collect::<Result<_>>()?,
            transpose: device.kernel(&transpose_entry::<T>()?)?,
            gather: gather_entries::<T>()?
                .iter()
                .map(|e| device.kernel(e))
                .collect::<Result<_>>()?,
            combine: device.kernel(&combine_entry::<T>()?)?,
        })
    }
}

/// One weighted sum: `out` = W X over `layout`, W the `component` of the (entry, head) pairs
/// at `weights` (in the layout's order, their maxima at `row_max`) times `factor`.
struct Gather<'a, T> {
    layout: &'a DeviceWindows,
    x: (&'a Bound, Ptr<T>),
    out: &'a Bound,
    width: usize,
    weights: Ptr<f32>,
    row_max: Ptr<u32>,
    component: u32,
    factor: f32,
}

impl<T: Scalar> TensorCore<T> {
    /// dQ, dK and dV, and P and dS of every (entry, head) in `grad.prob_grads` (which the bias
    /// gradient reads).
    pub(in crate::attention) fn backward(
        &mut self,
        device: &Device,
        shape: &AttentionShape,
        ops: &AttentionGradOperands,
        grad: AttentionGrad<T>,
    ) -> Result<()> {
        let (d, dv, heads) = (shape.d, shape.dv, shape.heads);
        if heads > MOST_HEADS {
            return Err(Error::invalid(format!(
                "the tensor-core attention backward takes at most {MOST_HEADS} heads, got {heads}"
            )));
        }
        let chunks = k_chunks(d.max(dv))
            .and_then(|kc| SCORE_CHUNKS.iter().position(|&c| c == kc))
            .ok_or_else(|| {
                Error::internal(format!(
                    "no tensor-core attention backward for d = {d}, dv = {dv}"
                ))
            })?;
        let need = self
            .a
            .scratch(heads, d)?
            .max(self.t.scratch(heads, d.max(dv))?);
        self.reserve(device, need)?;
        for cleared in [&mut self.row_max, &mut self.t_row_max, &mut self.nonfinite] {
            device
                .stream
                .memset_zeros(cleared)
                .map_err(|e| device.error("clearing the attention row maxima and flag", e))?;
        }
        let scores = AttentionTcScores {
            win: self.a.params(device),
            q_vec: u32::from(vectors::<T>(&ops.q, heads, d)),
            k_vec: u32::from(vectors::<T>(&ops.k, heads, d)),
            v_vec: u32::from(vectors::<T>(&ops.v, heads, dv)),
            o_vec: u32::from(vectors::<T>(&ops.o, heads, dv)),
            do_vec: u32::from(vectors::<T>(&ops.d_o, heads, dv)),
            t_entry: Ptr::of(&self.t_entry, device),
            t_col: Ptr::of(&self.t_col, device),
            t_prob_grads: MutPtr::of(&self.t_prob_grads, device),
            row_max: MutPtr::of(&self.row_max, device),
            t_row_max: MutPtr::of(&self.t_row_max, device),
            nonfinite: MutPtr::of(&self.nonfinite, device),
            grad,
        };
        let t_pairs = Ptr::of(&self.t_prob_grads, device);
        let nonfinite = Ptr::of(&self.nonfinite, device);
        let (a_max, t_max) = (
            Ptr::of(&self.row_max, device),
            Ptr::of(&self.t_row_max, device),
        );
        let (a, t) = (&self.a, &self.t);
        let gathers = [
            Gather {
                layout: a,
                x: (&ops.k, grad.k),
                out: &ops.dq,
                width: d,
                weights: grad.prob_grads.read_only(),
                row_max: a_max,
                component: 1,
                factor: grad.scale,
            },
            Gather {
                layout: t,
                x: (&ops.q, grad.q),
                out: &ops.dk,
                width: d,
                weights: t_pairs,
                row_max: t_max,
                component: 1,
                factor: grad.scale,
            },
            Gather {
                layout: t,
                x: (&ops.d_o, grad.d_o),
                out: &ops.dv,
                width: dv,
                weights: t_pairs,
                row_max: t_max,
                component: 0,
                factor: 1.0,
            },
        ];
        let heads = grad.heads;
        // SAFETY: the layouts' blocks lie inside their window arrays; A's windows' slots are
        // columns below A's columns and A^T's rows below A's rows, their rows below the
        // pattern's rows (rows past them are neither read nor written); the positions from
        // item_entry and from t_entry (a permutation of 0..nnz) stay below nnz for the rows'
        // own entries, and both pair buffers hold nnz*heads pairs (sized for the plan's heads,
        // which `shape` matches), and the row maxima a pair per (row, head) of A and per
        // (column, head), and the non-finite flag one word, cleared above on the same stream;
        // Q, K, V, O, dO and the gradients span their shapes at their strides (bound and
        // checked against `shape`), read and written for columns below d (dv) of each head
        // only, by 16-byte accesses only where `vectors` holds; the scratch holds every piece's rows at the widest width; the score
        // kernel finishes before the copy into A^T's order, that before the weighted sums read
        // the pairs, and each combine after its sum (one stream).
        unsafe {
            let warps = u64::from(a.items) * u64::from(heads);
            self.grad.scores[chunks].launch(grid(warps)?, &scores)?;
            let pairs = u64::from(grad.nnz) * u64::from(heads);
            self.grad
                .transpose
                .launch(grid(pairs.div_ceil(32))?, &scores)?;
            for g in gathers {
                let kind = gather_kind(g.width);
                let columns = CHUNK * GATHER_CHUNKS[kind] as usize;
                let slices = to_u32("attention column slices", g.width.div_ceil(columns))?;
                let (x_rs, x_cs) = g.x.0.strides();
                let (out_rs, out_cs) = g.out.strides();
                let params = AttentionTcGather {
                    win: g.layout.params(device),
                    slices,
                    heads,
                    width: to_u32("attention head width", g.width)?,
                    x: g.x.1,
                    x_rs,
                    x_cs,
                    x_vec: u32::from(vectors::<T>(g.x.0, shape.heads, g.width)),
                    out: g.out.output(),
                    out_rs,
                    out_cs,
                    out_vec: u32::from(vectors::<T>(g.out, shape.heads, g.width)),
                    weights: g.weights,
                    row_max: g.row_max,
                    nonfinite,
                    component: g.component,
                    factor: g.factor,
                    part_acc: MutPtr::of(&self.part_acc, device),
                };
                let warps = u64::from(g.layout.items) * u64::from(heads) * u64::from(slices);
                self.grad.gather[kind].launch(grid(warps)?, &params)?;
                if g.layout.windows > 0 {
                    let warps = u64::from(g.layout.windows) * WINDOW as u64 * u64::from(heads);
                    self.grad.combine.launch(grid(warps)?, &params)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_wider_than_a_chunk_take_two_chunks_a_warp() {
        let chunks = |width| GATHER_CHUNKS[gather_kind(width)];
        assert_eq!(
            [chunks(1), chunks(64), chunks(65), chunks(130)],
            [1, 1, 2, 2]
        );
    }
}
