//! `auto` attention in f32: `fused`, or the unfused pipeline where it is faster.
//! - **Short rows and columns.** A graph of at least [`UNFUSED_MIN_NNZ`] entries whose longest
//!   row and longest column hold at most [`SHORT_ROW`] entries takes the unfused pipeline.
//!   `fused` gathers each entry's K and V rows in one kernel, where the pipeline's SDDMM and SpMM
//!   each gather one of them: on a uniform random graph of 3.4M entries (f32, d = 64, one head,
//!   ncu) `fused` read 1.26 GB from DRAM at a 29% L2 hit rate and executed 314M instructions in
//!   674 µs, the pipeline 0.82 GB at 43%-47% and 168M in 423 µs. On an H200, on a 3D
//!   Poisson stencil and a uniformly random graph of 3.2M and 3.4M entries, with one and four
//!   heads of 64 and 128 columns, the pipeline was 1.3x-1.7x `fused`'s speed forward and
//!   1.2x-1.5x forward and backward. Its backward runs SpMMs over Aᵀ, which handle long rows
//!   poorly: on a web graph of short rows (60 entries at most) but a column of 10,717 it took
//!   2.3x-6.5x `fused`'s time forward and backward, hence the test of the columns. On graphs of 160k to
//!   320k entries the pipeline won forward (up to 1.2x) and lost forward and backward (down to
//!   0.8x), so they keep `fused`.
//! - **Wide heads.** Past [`FUSED_WIDTH`] columns `fused` cuts a head's V columns into slices
//!   that each recompute the scores and gathers K again for each, where the unfused pipeline
//!   computes the scores once (on an H200, R-MAT of 1M edges: 1.04x `fused`'s speed at 256
//!   columns, 1.6x at 512, 2.7x at 1,024). The head widths are known only at run time, so a
//!   plan that holds `fused` plans the unfused pipeline at the first run that needs it.

use std::sync::Arc;

use sparse_core::{
    AttentionBackward, AttentionDesc, AttentionPlan, CsrRef, DenseMut, DenseRef, PlanInfo, Result,
    Scalar, SpIndex,
};

use super::unfused::UnfusedAttention;
use super::{FusedAttention, CHUNKS};
use crate::device::Device;
use crate::plan::{CudaPlan, PlanClock};

/// Columns of a head one warp of `fused` holds.
pub(crate) const FUSED_WIDTH: usize = 32 * CHUNKS[CHUNKS.len() - 1] as usize;
/// Rows (and columns) of at most this many entries: short enough for the pipeline's backward over
/// Aᵀ, whose SpMMs handle long rows poorly.
pub(crate) const SHORT_ROW: usize = 64;
/// Graphs of fewer entries take `fused`: the pipeline's launches (several per head) and its
/// backward cost it what its forward gains.
pub(crate) const UNFUSED_MIN_NNZ: usize = 1 << 20;

/// Whether the unfused pipeline outruns `fused` on this graph, whatever the width: a large one
/// of short rows and short columns.
pub(crate) fn short_rows_take_unfused<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> bool {
    if a.nnz() < UNFUSED_MIN_NNZ || a.row_stats().max > SHORT_ROW {
        return false;
    }
    let mut column_len = vec![0usize; a.cols()];
    a.col_idx().iter().all(|c| {
        let len = &mut column_len[c.to_usize()];
        *len += 1;
        *len <= SHORT_ROW
    })
}

/// What an `auto` plan runs.
enum Pipelines<T: Scalar> {
    /// Short rows and columns: the unfused pipeline at every width.
    Unfused(Box<CudaPlan<T, UnfusedAttention<T>>>),
    /// `fused`, and the unfused pipeline once a run's heads are too wide for it.
    Fused {
        fused: Box<CudaPlan<T, FusedAttention<T>>>,
        wide: Option<Box<CudaPlan<T, UnfusedAttention<T>>>>,
    },
}

pub(crate) struct AutoAttention<'a, T: Scalar, I: SpIndex> {
    device: Arc<Device>,
    a: CsrRef<'a, T, I>,
    desc: AttentionDesc,
    pipelines: Pipelines<T>,
    /// Whether the last run took the unfused pipeline for wide heads; its backward must then
    /// follow it.
    last_wide: bool,
}

impl<'a, T: Scalar, I: SpIndex> AutoAttention<'a, T, I> {
    pub(crate) fn new(
        device: &Arc<Device>,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
        clock: PlanClock,
    ) -> Result<Self> {
        let pipelines = if short_rows_take_unfused(a) {
            Pipelines::Unfused(Box::new(super::unfused_plan(device, a, desc, clock)?))
        } else {
            Pipelines::Fused {
                fused: Box::new(super::plan(
                    device,
                    a,
                    desc,
                    sparse_core::Algorithm::Fused,
                    clock,
                )?),
                wide: None,
            }
        };
        Ok(AutoAttention {
            device: Arc::clone(device),
            a,
            desc: *desc,
            pipelines,
            last_wide: false,
        })
    }
}

impl<T: Scalar, I: SpIndex> AttentionPlan<T> for AutoAttention<'_, T, I> {
    /// The plan of the last run (before the first, the one planned).
    fn info(&self) -> &PlanInfo {
        match &self.pipelines {
            Pipelines::Unfused(unfused) => unfused.info(),
            Pipelines::Fused {
                wide: Some(wide), ..
            } if self.last_wide => wide.info(),
            Pipelines::Fused { fused, .. } => fused.info(),
        }
    }

    fn run(
        &mut self,
        q: DenseRef<'_, T>,
        k: DenseRef<'_, T>,
        v: DenseRef<'_, T>,
        o: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let (fused, wide) = match &mut self.pipelines {
            Pipelines::Unfused(unfused) => return unfused.run(q, k, v, o),
            Pipelines::Fused { fused, wide } => (fused, wide),
        };
        let heads = self.desc.heads.max(1);
        self.last_wide = q.cols().max(v.cols()) / heads > FUSED_WIDTH;
        if !self.last_wide {
            return fused.run(q, k, v, o);
        }
        let unfused = match wide {
            Some(unfused) => unfused,
            none => none.insert(Box::new(super::unfused_plan(
                &self.device,
                self.a,
                &self.desc,
                PlanClock::start(),
            )?)),
        };
        unfused.run(q, k, v, o)
    }

    fn backward(&mut self, grads: AttentionBackward<'_, T>) -> Result<()> {
        match &mut self.pipelines {
            Pipelines::Unfused(unfused) => unfused.backward(grads),
            Pipelines::Fused {
                wide: Some(wide), ..
            } if self.last_wide => wide.backward(grads),
            Pipelines::Fused { fused, .. } => fused.backward(grads),
        }
    }
}
