//! `auto` SpMM and SDDMM that run wide products on cuSPARSE: on the matrices
//! [`rode::spmm_wide_on_vendor`] and [`rode::sddmm_wide_on_vendor`] accept, a plan holds the
//! rule's own pick for runs of fewer than [`rode::AUTO_VENDOR_WIDTH`] columns (N of B, K of X and
//! Y) and cuSPARSE's plan for wider ones. The width is known only when a plan runs, so both are
//! planned up front; new values and reservations go to both. Operands cuSPARSE refuses (it sizes
//! its workspace for the smallest leading dimensions) run on the narrow plan.

use sparse_core::{DenseMut, DenseRef, Error, PlanInfo, Result, Scalar, SddmmPlan, SpmmPlan};

use crate::rode;

pub(crate) struct WideOnVendor<P: ?Sized> {
    narrow: Box<P>,
    wide: Box<P>,
    /// Whether the last run was wide: `info` describes the plan that ran.
    last_wide: bool,
}

impl<P: ?Sized> WideOnVendor<P> {
    pub(crate) fn new(narrow: Box<P>, wide: Box<P>) -> Self {
        WideOnVendor {
            narrow,
            wide,
            last_wide: false,
        }
    }

    /// The plan of the last run (before the first, the narrow one).
    fn last(&self) -> &P {
        if self.last_wide {
            &self.wide
        } else {
            &self.narrow
        }
    }

    /// `run` on the wide plan for products of `width` columns from [`rode::AUTO_VENDOR_WIDTH`]
    /// on, else, or where cuSPARSE refuses the operands, on the narrow one.
    fn run_at(&mut self, width: usize, mut run: impl FnMut(&mut P) -> Result<()>) -> Result<()> {
        self.last_wide = width >= rode::AUTO_VENDOR_WIDTH;
        if self.last_wide {
            // A refusal is decided before anything runs: the output is as it was.
            match run(&mut self.wide) {
                Err(Error::Unsupported { .. }) => self.last_wide = false,
                ran => return ran,
            }
        }
        run(&mut self.narrow)
    }

    fn both(&mut self, mut apply: impl FnMut(&mut P) -> Result<()>) -> Result<()> {
        apply(&mut self.narrow)?;
        apply(&mut self.wide)
    }
}

impl<'a, T: Scalar> SpmmPlan<T> for WideOnVendor<dyn SpmmPlan<T> + 'a> {
    fn info(&self) -> &PlanInfo {
        self.last().info()
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        self.run_at(b.cols(), |plan| plan.run(alpha, b, beta, c.reborrow()))
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.both(|plan| plan.update_values(values))
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.both(|plan| plan.reserve(width))
    }
}

impl<'a, T: Scalar> SddmmPlan<T> for WideOnVendor<dyn SddmmPlan<T> + 'a> {
    fn info(&self) -> &PlanInfo {
        self.last().info()
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        self.run_at(x.cols(), |plan| plan.run(alpha, x, y, beta, c.reborrow()))
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.both(|plan| plan.update_values(values))
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.both(|plan| plan.reserve(width))
    }
}
