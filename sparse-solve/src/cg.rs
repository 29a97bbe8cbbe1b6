//! Preconditioned conjugate gradient with its scalars in backend memory.
//!
//! Per iteration: one SpMV `q = Ap`, the reduction `pᵀq`, one fused pass `x += αp, r -= αq`
//! (with `rᵀr` when there is no preconditioner), the Jacobi pass `z = D⁻¹r` with `rᵀz` and
//! `rᵀr`, and `p = z + βp`; α = ρ/pᵀq and β = ρ_new/ρ are read from the workspace by the
//! passes that use them. ρ alternates between two slots so that β sees both.

use sparse_core::{Coef, Dense, DenseMut, DenseRef, Error, Real, Result, VectorOps};

use crate::options::Method;
use crate::solver::{not_finite, Outcome, Parts, Restarts, BB};

/// Work vectors: r, z, p, q.
pub(crate) const VECTORS: usize = 4;

const RHO: [usize; 2] = [1, 2];
const PQ: usize = 3;
const RR: usize = 4;

pub(crate) fn run<E: VectorOps, T: Real>(
    parts: &mut Parts<'_, '_, E, T>,
    work: &mut [Dense<T>],
    b: DenseRef<'_, T>,
    mut x: DenseMut<'_, T>,
) -> Result<Outcome> {
    let backend = parts.backend;
    let [r, z, p, q] = work else {
        return Err(Error::internal(
            "conjugate gradient needs four work vectors",
        ));
    };
    let jacobi = parts.inv_diag;
    // With no preconditioner z is r, and ρ = rᵀr is the residual's norm too.
    let rr_slot = |rho: usize| if jacobi.is_some() { RR } else { rho };
    let max_iter = parts.options.max_iter;
    let mut restarts = Restarts::new();
    loop {
        backend.copy(b, r.as_mut())?;
        parts
            .plan
            .run(-T::one(), x.as_ref(), T::one(), r.as_mut())?;
        backend.dot(b, b, None, parts.s.as_mut(), [BB, BB])?;
        match jacobi {
            Some(d) => {
                backend.scale(
                    d.as_ref(),
                    r.as_ref(),
                    z.as_mut(),
                    parts.s.as_mut(),
                    Some([RHO[0], RR]),
                )?;
                backend.copy(z.as_ref(), p.as_mut())?;
            }
            None => {
                backend.dot(r.as_ref(), r.as_ref(), None, parts.s.as_mut(), [RHO[0]; 2])?;
                backend.copy(r.as_ref(), p.as_mut())?;
            }
        }
        let v = parts.read()?;
        if v[BB] == 0.0 {
            backend.copy(b, x)?;
            return Ok(restarts.outcome(0, true));
        }
        if let Some(outcome) = restarts.test_start(parts, &v, rr_slot(RHO[0])) {
            return Ok(outcome);
        }
        let done = restarts.done;
        let mut recurrence_converged = None;
        for k in done + 1..=max_iter {
            let j = k - done;
            let (rho, rho_next) = (RHO[(j - 1) % 2], RHO[j % 2]);
            parts
                .plan
                .run(T::one(), p.as_ref(), T::zero(), q.as_mut())?;
            backend.dot(p.as_ref(), q.as_ref(), None, parts.s.as_mut(), [PQ; 2])?;
            let alpha = Coef::ratio(rho, PQ);
            let norm = jacobi.is_none().then_some(rho_next);
            backend.cg_update(
                alpha,
                p.as_ref(),
                q.as_ref(),
                x.reborrow(),
                r.as_mut(),
                parts.s.as_mut(),
                norm,
            )?;
            if let Some(d) = jacobi {
                backend.scale(
                    d.as_ref(),
                    r.as_ref(),
                    z.as_mut(),
                    parts.s.as_mut(),
                    Some([rho_next, RR]),
                )?;
            }
            if parts.test_at(k) {
                let v = parts.read()?;
                if v[PQ] <= 0.0 {
                    return Err(Error::NotSpd {
                        iteration: k,
                        value: v[PQ],
                    });
                }
                let rel = parts.relative(&v, rr_slot(rho_next), &mut restarts.history);
                if rel <= parts.options.tol {
                    recurrence_converged = Some(k);
                    break;
                }
                if !rel.is_finite() || v[PQ].is_nan() {
                    return Err(not_finite(Method::Cg, k));
                }
                if v[rho_next] == 0.0 {
                    return Err(Error::Breakdown {
                        method: Method::Cg.name(),
                        iteration: k,
                        quantity: "ρ = rᵀz is zero while the residual is not".to_string(),
                    });
                }
            }
            if k < max_iter {
                let direction = if jacobi.is_some() { &*z } else { &*r };
                backend.xpby(
                    direction.as_ref(),
                    Coef::ratio(rho_next, rho),
                    p.as_mut(),
                    parts.s.as_ref(),
                )?;
            }
        }
        if let Some(outcome) = restarts.after(recurrence_converged, max_iter) {
            return Ok(outcome);
        }
    }
}
