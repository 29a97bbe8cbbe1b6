//! `auto` attention in f32: `fused` for heads a warp of it holds, the unfused pipeline for wider
//! ones. Past [`FUSED_WIDTH`] columns `fused` cuts a head's V columns into slices that each
//! recompute the scores and gathers K again for each, where the unfused pipeline computes the
//! scores once (on an H200, R-MAT of 1M edges: 1.04x `fused`'s speed at 256 columns, 1.6x at
//! 512, 2.7x at 1,024). The head widths are known only at run time, so the plan holds `fused`
//! and plans the unfused pipeline at the first run that needs it.

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

pub(crate) struct AutoAttention<'a, T: Scalar, I: SpIndex> {
    device: Arc<Device>,
    a: CsrRef<'a, T, I>,
    desc: AttentionDesc,
    fused: CudaPlan<T, FusedAttention<T>>,
    unfused: Option<CudaPlan<T, UnfusedAttention<T>>>,
    /// Whether the last run took the unfused pipeline, whose backward must then follow it.
    last_unfused: bool,
}

impl<'a, T: Scalar, I: SpIndex> AutoAttention<'a, T, I> {
    pub(crate) fn new(
        device: &Arc<Device>,
        a: CsrRef<'a, T, I>,
        desc: &AttentionDesc,
        clock: PlanClock,
    ) -> Result<Self> {
        Ok(AutoAttention {
            device: Arc::clone(device),
            a,
            desc: *desc,
            fused: super::plan(device, a, desc, sparse_core::Algorithm::Fused, clock)?,
            unfused: None,
            last_unfused: false,
        })
    }
}

impl<T: Scalar, I: SpIndex> AttentionPlan<T> for AutoAttention<'_, T, I> {
    /// The plan of the last run (`fused` before the first).
    fn info(&self) -> &PlanInfo {
        match (&self.unfused, self.last_unfused) {
            (Some(unfused), true) => unfused.info(),
            _ => self.fused.info(),
        }
    }

    fn run(
        &mut self,
        q: DenseRef<'_, T>,
        k: DenseRef<'_, T>,
        v: DenseRef<'_, T>,
        o: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let heads = self.desc.heads.max(1);
        if q.cols().max(v.cols()) / heads <= FUSED_WIDTH {
            self.last_unfused = false;
            return self.fused.run(q, k, v, o);
        }
        let unfused = match &mut self.unfused {
            Some(unfused) => unfused,
            none => none.insert(super::unfused_plan(
                &self.device,
                self.a,
                &self.desc,
                PlanClock::start(),
            )?),
        };
        self.last_unfused = true;
        unfused.run(q, k, v, o)
    }

    fn backward(&mut self, grads: AttentionBackward<'_, T>) -> Result<()> {
        match (&mut self.unfused, self.last_unfused) {
            (Some(unfused), true) => unfused.backward(grads),
            _ => self.fused.backward(grads),
        }
    }
}
