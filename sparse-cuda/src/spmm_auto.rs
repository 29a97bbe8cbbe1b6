//! `auto` SpMM that runs wide products on cuSPARSE: on the matrices [`rode::wide_on_vendor`]
//! accepts, a plan holds RoDe for runs of fewer than [`rode::AUTO_VENDOR_WIDTH`] columns and
//! cuSPARSE's SpMM for wider ones. The width of B is known only when a plan runs, so both are
//! planned up front; new values and reservations go to both. Operands cuSPARSE refuses (it sizes
//! its workspace for the smallest leading dimensions) run on RoDe.

use sparse_core::{DenseMut, DenseRef, Error, PlanInfo, Result, Scalar, SpmmPlan};

use crate::rode;

pub(crate) struct WideOnVendor<'a, T: Scalar> {
    narrow: Box<dyn SpmmPlan<T> + 'a>,
    wide: Box<dyn SpmmPlan<T> + 'a>,
    /// Whether the last run was wide: [`SpmmPlan::info`] describes the plan that ran.
    last_wide: bool,
}

impl<'a, T: Scalar> WideOnVendor<'a, T> {
    pub(crate) fn new(narrow: Box<dyn SpmmPlan<T> + 'a>, wide: Box<dyn SpmmPlan<T> + 'a>) -> Self {
        WideOnVendor {
            narrow,
            wide,
            last_wide: false,
        }
    }
}

impl<T: Scalar> SpmmPlan<T> for WideOnVendor<'_, T> {
    /// The plan of the last run (before the first, RoDe's).
    fn info(&self) -> &PlanInfo {
        if self.last_wide {
            self.wide.info()
        } else {
            self.narrow.info()
        }
    }

    fn run(
        &mut self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        mut c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        self.last_wide = b.cols() >= rode::AUTO_VENDOR_WIDTH;
        if self.last_wide {
            // A refusal is decided before anything runs: C is as it was.
            match self.wide.run(alpha, b, beta, c.reborrow()) {
                Err(Error::Unsupported { .. }) => self.last_wide = false,
                ran => return ran,
            }
        }
        self.narrow.run(alpha, b, beta, c)
    }

    fn update_values(&mut self, values: DenseRef<'_, T>) -> Result<()> {
        self.narrow.update_values(values)?;
        self.wide.update_values(values)
    }

    fn reserve(&mut self, width: usize) -> Result<()> {
        self.narrow.reserve(width)?;
        self.wide.reserve(width)
    }
}
