//! Vector operations with scalars that stay in backend memory, the building blocks of iterative
//! solvers.
//!
//! An iteration of conjugate gradient needs dot products whose results feed the next update. If
//! each result went to the host and back as an argument, every iteration would wait on the
//! device several times. Here a reduction writes its result into a slot of a scalar workspace
//! (an `n x 1` f64 operand in the backend's memory), and an update reads its coefficient from
//! slots ([`Coef`]), so the host reads the workspace only when it tests for convergence
//! ([`VectorOps::read_scalars`], one transfer).
//!
//! Vectors are `n x 1` operands in the backend's memory. Reductions accumulate in f64 for f64
//! vectors and in f32 for f32 vectors, in an order fixed by n alone: results are bit-identical
//! from run to run.

use crate::backend::Executor;
use crate::dense::{DenseMut, DenseRef};
use crate::error::{Error, Result};
use crate::scalar::Scalar;

/// The value types vector operations run on: f64 and f32, which are their own accumulation and
/// output types.
pub trait Real: Scalar<Acc = Self, Out = Self> + num_traits::Float {}
impl Real for f64 {}
impl Real for f32 {}

/// A slot index meaning the constant 1 in a [`Coef`].
pub const ONE: u32 = u32::MAX;

/// A coefficient read from the scalar workspace `s` when an operation runs:
/// `±(s[a]/s[b])·(s[c]/s[d])`, where [`ONE`] stands for 1. A ratio whose denominator is zero
/// counts as zero, so a breakdown leaves the vectors finite and is found at the next
/// convergence test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coef {
    pub negative: bool,
    /// (numerator, denominator) slots of the two ratios.
    pub ratios: [(u32, u32); 2],
}

impl Coef {
    /// The constant 1.
    pub fn one() -> Self {
        Coef {
            negative: false,
            ratios: [(ONE, ONE); 2],
        }
    }

    /// `s[k]`.
    pub fn of(k: usize) -> Self {
        Coef {
            negative: false,
            ratios: [(slot(k), ONE), (ONE, ONE)],
        }
    }

    /// `s[num]/s[den]`.
    pub fn ratio(num: usize, den: usize) -> Self {
        Coef {
            negative: false,
            ratios: [(slot(num), slot(den)), (ONE, ONE)],
        }
    }

    /// This coefficient times `s[num]/s[den]` (the second ratio is replaced).
    pub fn times(mut self, num: usize, den: usize) -> Self {
        self.ratios[1] = (slot(num), slot(den));
        self
    }

    /// The value on workspace `s` (host memory); what every backend computes, in f64.
    pub fn eval(&self, s: &[f64]) -> f64 {
        let at = |k: u32| if k == ONE { 1.0 } else { s[k as usize] };
        let mut v = 1.0;
        for &(num, den) in &self.ratios {
            let d = at(den);
            v *= if d == 0.0 { 0.0 } else { at(num) / d };
        }
        if self.negative {
            -v
        } else {
            v
        }
    }

    /// The largest slot it reads, to check against the workspace.
    pub fn max_slot(&self) -> Option<usize> {
        self.ratios
            .iter()
            .flat_map(|&(a, b)| [a, b])
            .filter(|&k| k != ONE)
            .map(|k| k as usize)
            .max()
    }
}

/// Slot `k` as the kernels take it; one past u32's range stays out of any workspace's range, so
/// the check of the slots refuses it.
impl std::ops::Neg for Coef {
    type Output = Coef;
    fn neg(mut self) -> Coef {
        self.negative = !self.negative;
        self
    }
}

fn slot(k: usize) -> u32 {
    u32::try_from(k)
        .ok()
        .filter(|&k| k != ONE)
        .unwrap_or(ONE - 1)
}

/// [`Error::InvalidArgument`] when a slot is outside the workspace of `len` slots.
pub fn check_slots(len: usize, slots: impl IntoIterator<Item = usize>) -> Result<()> {
    match slots.into_iter().find(|&k| k >= len) {
        Some(k) => Err(Error::invalid(format!(
            "scalar slot {k} is outside a workspace of {len} slots"
        ))),
        None => Ok(()),
    }
}

/// Vector operations on a backend's memory, with reductions into and coefficients from a scalar
/// workspace `s` (f64, `slots x 1`, in the same memory). Every operation is enqueued in order
/// with the backend's plans; only [`VectorOps::read_scalars`] waits.
pub trait VectorOps: Executor {
    /// `y = x`.
    fn copy<T: Real>(&self, x: DenseRef<'_, T>, y: DenseMut<'_, T>) -> Result<()>;

    /// `y = x` converted to `U` (rounded to nearest).
    fn convert<T: Real, U: Real>(&self, x: DenseRef<'_, T>, y: DenseMut<'_, U>) -> Result<()>;

    /// `s[slots[0]] = x·y`, and `s[slots[1]] = x·z` when `z` is given.
    fn dot<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        z: Option<DenseRef<'_, T>>,
        s: DenseMut<'_, f64>,
        slots: [usize; 2],
    ) -> Result<()>;

    /// `y += c·x`.
    fn axpy<T: Real>(
        &self,
        c: Coef,
        x: DenseRef<'_, T>,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()>;

    /// `y = x + c·y`.
    fn xpby<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        c: Coef,
        y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()>;

    /// The update of conjugate gradient in one pass: `x += c·p`, `r -= c·q`, and
    /// `s[norm] = r·r` (of the new r) when `norm` is given.
    #[allow(clippy::too_many_arguments)]
    fn cg_update<T: Real>(
        &self,
        c: Coef,
        p: DenseRef<'_, T>,
        q: DenseRef<'_, T>,
        x: DenseMut<'_, T>,
        r: DenseMut<'_, T>,
        s: DenseMut<'_, f64>,
        norm: Option<usize>,
    ) -> Result<()>;

    /// Jacobi preconditioning in one pass: `z = d ∘ r` (d holds the inverse diagonal), and when
    /// `slots` are given `s[slots[0]] = r·z` and `s[slots[1]] = r·r`.
    fn scale<T: Real>(
        &self,
        d: DenseRef<'_, T>,
        r: DenseRef<'_, T>,
        z: DenseMut<'_, T>,
        s: DenseMut<'_, f64>,
        slots: Option<[usize; 2]>,
    ) -> Result<()>;

    /// Copies the workspace to `out` (its first `out.len()` slots), waiting for the work
    /// enqueued before: the one host round trip of an iteration.
    fn read_scalars(&self, s: DenseRef<'_, f64>, out: &mut [f64]) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_evaluate_with_zero_denominators_as_zero() {
        let s = [2.0, 4.0, 0.0, 3.0];
        assert_eq!(Coef::ratio(0, 1).eval(&s), 0.5);
        assert_eq!((-Coef::ratio(0, 1).times(3, 0)).eval(&s), -0.75);
        assert_eq!(Coef::ratio(0, 2).eval(&s), 0.0);
        assert_eq!(Coef::ratio(3, 1).max_slot(), Some(3));
        assert!(check_slots(4, [0, 3]).is_ok());
        assert!(check_slots(4, [4]).is_err());
    }
}
