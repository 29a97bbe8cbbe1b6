//! BiCGSTAB (right preconditioned) with its scalars in backend memory.
//!
//! Per iteration: `p = r + β(p - ωv)`, `p̂ = M⁻¹p`, `v = Ap̂`, α = ρ/r̂ᵀv, `r -= αv` (r is now
//! s), `x += αp̂`, `ŝ = M⁻¹r`, `t = Aŝ`, ω = tᵀs/tᵀt, `x += ωŝ`, `r -= ωt`, and ρ_new = r̂ᵀr
//! with rᵀr in one reduction. β = (ρ_new/ρ)(α/ω) is formed as (ρ_new/r̂ᵀv)(tᵀt/tᵀs), so every
//! coefficient is at most two ratios of workspace slots; each iteration's slots alternate
//! between two sets so that the next one reads them.

use sparse_core::{Coef, Dense, DenseMut, DenseRef, Error, Real, Result, VectorOps};

use crate::options::Method;
use crate::solver::{not_finite, Outcome, Parts, Restarts, BB};

/// Work vectors: r, r̂, p, v, p̂, ŝ, t.
pub(crate) const VECTORS: usize = 7;

const RHO: [usize; 2] = [1, 2];
const RV: [usize; 2] = [3, 4];
const TS: [usize; 2] = [5, 6];
const TT: [usize; 2] = [7, 8];
const RR: usize = 9;

fn breakdown(iteration: usize, quantity: &str) -> Error {
    Error::Breakdown {
        method: Method::Bicgstab.name(),
        iteration,
        quantity: quantity.to_string(),
    }
}

pub(crate) fn run<E: VectorOps, T: Real>(
    parts: &mut Parts<'_, '_, E, T>,
    work: &mut [Dense<T>],
    b: DenseRef<'_, T>,
    mut x: DenseMut<'_, T>,
) -> Result<Outcome> {
    let backend = parts.backend;
    let [r, r_hat, p, v, p_hat, s_hat, t] = work else {
        return Err(Error::internal("BiCGSTAB needs seven work vectors"));
    };
    let jacobi = parts.inv_diag;
    let max_iter = parts.options.max_iter;
    let mut restarts = Restarts::new();
    loop {
        backend.copy(b, r.as_mut())?;
        parts
            .plan
            .run(-T::one(), x.as_ref(), T::one(), r.as_mut())?;
        backend.dot(b, b, None, parts.s.as_mut(), [BB, BB])?;
        backend.copy(r.as_ref(), r_hat.as_mut())?;
        backend.copy(r.as_ref(), p.as_mut())?;
        backend.dot(
            r.as_ref(),
            r.as_ref(),
            Some(r_hat.as_ref()),
            parts.s.as_mut(),
            [RR, RHO[0]],
        )?;
        let w = parts.read()?;
        if w[BB] == 0.0 {
            backend.copy(b, x)?;
            return Ok(restarts.outcome(0, true));
        }
        if let Some(outcome) = restarts.test_start(parts, &w, RR) {
            return Ok(outcome);
        }
        let done = restarts.done;
        let mut recurrence_converged = None;
        for k in done + 1..=max_iter {
            let j = k - done;
            let (c, o) = ((j - 1) % 2, j % 2);
            if j > 1 {
                backend.axpy(
                    -Coef::ratio(TS[o], TT[o]),
                    v.as_ref(),
                    p.as_mut(),
                    parts.s.as_ref(),
                )?;
                backend.xpby(
                    r.as_ref(),
                    Coef::ratio(RHO[c], RV[o]).times(TT[o], TS[o]),
                    p.as_mut(),
                    parts.s.as_ref(),
                )?;
            }
            let p_used = match jacobi {
                Some(d) => {
                    backend.scale(
                        d.as_ref(),
                        p.as_ref(),
                        p_hat.as_mut(),
                        parts.s.as_mut(),
                        None,
                    )?;
                    &*p_hat
                }
                None => &*p,
            };
            parts
                .plan
                .run(T::one(), p_used.as_ref(), T::zero(), v.as_mut())?;
            backend.dot(
                r_hat.as_ref(),
                v.as_ref(),
                None,
                parts.s.as_mut(),
                [RV[c]; 2],
            )?;
            let alpha = Coef::ratio(RHO[c], RV[c]);
            backend.axpy(-alpha, v.as_ref(), r.as_mut(), parts.s.as_ref())?;
            backend.axpy(alpha, p_used.as_ref(), x.reborrow(), parts.s.as_ref())?;
            if let Some(d) = jacobi {
                backend.scale(
                    d.as_ref(),
                    r.as_ref(),
                    s_hat.as_mut(),
                    parts.s.as_mut(),
                    None,
                )?;
            }
            let s_used = if jacobi.is_some() { &*s_hat } else { &*r };
            parts
                .plan
                .run(T::one(), s_used.as_ref(), T::zero(), t.as_mut())?;
            backend.dot(
                t.as_ref(),
                r.as_ref(),
                Some(t.as_ref()),
                parts.s.as_mut(),
                [TS[c], TT[c]],
            )?;
            let omega = Coef::ratio(TS[c], TT[c]);
            let s_used = if jacobi.is_some() { &*s_hat } else { &*r };
            backend.axpy(omega, s_used.as_ref(), x.reborrow(), parts.s.as_ref())?;
            backend.axpy(-omega, t.as_ref(), r.as_mut(), parts.s.as_ref())?;
            backend.dot(
                r.as_ref(),
                r.as_ref(),
                Some(r_hat.as_ref()),
                parts.s.as_mut(),
                [RR, RHO[o]],
            )?;
            if parts.test_at(k) {
                let w = parts.read()?;
                let rel = parts.relative(&w, RR, &mut restarts.history);
                if rel <= parts.options.tol {
                    recurrence_converged = Some(k);
                    break;
                }
                if !rel.is_finite() {
                    return Err(not_finite(Method::Bicgstab, k));
                }
                if w[RV[c]] == 0.0 {
                    return Err(breakdown(k, "r̂ᵀv is zero"));
                }
                if w[TS[c]] == 0.0 {
                    return Err(breakdown(k, "ω = tᵀs/tᵀt is zero"));
                }
                if w[RHO[o]] == 0.0 {
                    return Err(breakdown(k, "ρ = r̂ᵀr is zero while the residual is not"));
                }
            }
        }
        if let Some(outcome) = restarts.after(recurrence_converged, max_iter) {
            return Ok(outcome);
        }
    }
}
