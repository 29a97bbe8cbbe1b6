//! `auto` SpMM and SDDMM that run wide products on cuSPARSE: on the matrices
//! [`rode::spmm_wide_on_vendor`] and [`rode::sddmm_wide_on_vendor`] accept, a plan holds the
//! rule's own pick for runs of fewer than [`rode::AUTO_VENDOR_WIDTH`] columns (N of B, K of X and
//! Y) and cuSPARSE's plan for wider ones. The width is known only when a plan runs, so both are
//! planned up front; new values and reservations go to both. Operands cuSPARSE refuses (it sizes
//! its workspace for the smallest leading dimensions) run on the narrow plan. `info` describes
//! the plan of the last run (before the first, the narrow one), with the bytes and the planning
//! time of both.

use sparse_core::{DenseMut, DenseRef, Error, PlanInfo, Result, Scalar, SddmmPlan, SpmmPlan};

use crate::rode;

/// A plan [`WideOnVendor`] holds: SpMM's or SDDMM's.
pub(crate) trait Described {
    fn info(&self) -> &PlanInfo;
}

impl<'a, T: Scalar> Described for dyn SpmmPlan<T> + 'a {
    fn info(&self) -> &PlanInfo {
        SpmmPlan::info(self)
    }
}

impl<'a, T: Scalar> Described for dyn SddmmPlan<T> + 'a {
    fn info(&self) -> &PlanInfo {
        SddmmPlan::info(self)
    }
}

pub(crate) struct WideOnVendor<P: ?Sized> {
    narrow: Box<P>,
    wide: Box<P>,
    /// Whether the last run was wide.
    last_wide: bool,
    /// What `info` reports after a narrow run and after a wide one.
    infos: [PlanInfo; 2],
}

impl<P: ?Sized + Described> WideOnVendor<P> {
    pub(crate) fn new(narrow: Box<P>, wide: Box<P>) -> Self {
        let infos = Self::infos(&narrow, &wide);
        WideOnVendor {
            narrow,
            wide,
            last_wide: false,
            infos,
        }
    }

    /// Each plan's description with the bytes and the planning time of both.
    fn infos(narrow: &P, wide: &P) -> [PlanInfo; 2] {
        let both = |one: &PlanInfo, other: &PlanInfo| {
            let mut info = one.clone();
            info.bytes += other.bytes;
            info.plan_time += other.plan_time;
            info
        };
        [
            both(narrow.info(), wide.info()),
            both(wide.info(), narrow.info()),
        ]
    }

    fn last(&self) -> &PlanInfo {
        &self.infos[usize::from(self.last_wide)]
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

    /// `apply` to both plans; their descriptions again after it (a reservation may grow them).
    fn both(&mut self, mut apply: impl FnMut(&mut P) -> Result<()>) -> Result<()> {
        let applied = apply(&mut self.narrow).and_then(|()| apply(&mut self.wide));
        self.infos = Self::infos(&self.narrow, &self.wide);
        applied
    }
}

impl<'a, T: Scalar> SpmmPlan<T> for WideOnVendor<dyn SpmmPlan<T> + 'a> {
    fn info(&self) -> &PlanInfo {
        self.last()
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
        self.last()
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sparse_core::{Algorithm, BackendKind, Format, Layout, OpKind, Precision};

    use super::*;

    /// A plan that counts its runs and refuses them when told to.
    struct Counted {
        info: PlanInfo,
        runs: usize,
        refuses: bool,
    }

    impl Counted {
        fn boxed(algorithm: Algorithm, bytes: usize, refuses: bool) -> Box<dyn SpmmPlan<f32>> {
            let mut info = PlanInfo::new(
                BackendKind::Cuda,
                OpKind::Spmm,
                Format::Csr,
                Precision::F32,
                algorithm,
                true,
            );
            info.bytes = bytes;
            info.plan_time.host = Duration::from_millis(bytes as u64);
            Box::new(Counted {
                info,
                runs: 0,
                refuses,
            })
        }
    }

    impl SpmmPlan<f32> for Counted {
        fn info(&self) -> &PlanInfo {
            &self.info
        }

        fn run(
            &mut self,
            _: f32,
            _: DenseRef<'_, f32>,
            _: f32,
            _: DenseMut<'_, f32>,
        ) -> Result<()> {
            if self.refuses {
                return Err(Error::Unsupported {
                    op: OpKind::Spmm,
                    format: Format::Csr,
                    precision: Precision::F32,
                    algorithm: Some(self.info.algorithm),
                    backend: BackendKind::Cusparse,
                    supported: "other operands".into(),
                });
            }
            self.runs += 1;
            Ok(())
        }

        fn update_values(&mut self, _: DenseRef<'_, f32>) -> Result<()> {
            Ok(())
        }

        fn reserve(&mut self, width: usize) -> Result<()> {
            self.info.reserved_width = width;
            Ok(())
        }
    }

    fn run(plan: &mut dyn SpmmPlan<f32>, width: usize) -> Algorithm {
        let (b, mut c) = (vec![0.0f32; 3 * width], vec![0.0f32; 2 * width]);
        let b = DenseRef::from_slice(&b, 3, width, Layout::RowMajor).unwrap();
        let c = DenseMut::from_slice(&mut c, 2, width, Layout::RowMajor).unwrap();
        plan.run(1.0, b, 0.0, c).unwrap();
        plan.info().algorithm
    }

    #[test]
    fn wide_runs_take_the_wide_plan_and_refused_ones_the_narrow_one() {
        let (narrow, vendor) = (Algorithm::RodeDeterministic, Algorithm::VendorDefault);
        let mut plan = WideOnVendor::new(
            Counted::boxed(narrow, 3, false),
            Counted::boxed(vendor, 5, false),
        );
        assert_eq!(SpmmPlan::info(&plan).algorithm, narrow);
        assert_eq!(SpmmPlan::info(&plan).bytes, 8);
        assert_eq!(
            SpmmPlan::info(&plan).plan_time.host,
            Duration::from_millis(8)
        );
        let wide = rode::AUTO_VENDOR_WIDTH;
        assert_eq!(run(&mut plan, wide - 1), narrow);
        assert_eq!(run(&mut plan, wide), vendor);
        assert_eq!(SpmmPlan::info(&plan).bytes, 8);
        SpmmPlan::reserve(&mut plan, 300).unwrap();
        assert_eq!(SpmmPlan::info(&plan).reserved_width, 300);

        let refusing = Counted::boxed(vendor, 5, true);
        let mut plan = WideOnVendor::new(Counted::boxed(narrow, 3, false), refusing);
        assert_eq!(run(&mut plan, wide), narrow);
    }
}
