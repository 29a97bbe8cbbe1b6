//! The attention backward on the CPU, from the row statistics the forward kept.
//!
//! Three passes, each element written by one task in a fixed order (bit-reproducible whatever
//! the pool): rows (the weights P and dS = P (dP - <dO, O>) of every entry and head, and dQ),
//! columns through the transposed pattern (dK and dV, so no two tasks add into one row), and
//! entries (the bias gradient, dS summed over the heads).

use num_traits::Float;
use rayon::prelude::*;
use sparse_core::{
    Accumulator, AttentionBackward, AttentionShape, CsrRef, DenseMut, DenseRef, Layout, Result,
    Scalar, SpIndex,
};

use sparse_formats::Transposed;

use crate::shared_out::SharedOut;

/// What the backward keeps between its passes: P and dS per (entry, head), entry major.
pub struct Workspace {
    pub probs: Vec<f64>,
    pub dscores: Vec<f64>,
}

impl Workspace {
    pub fn new(nnz: usize, heads: usize) -> Self {
        Workspace {
            probs: vec![0.0; nnz * heads],
            dscores: vec![0.0; nnz * heads],
        }
    }

    pub fn bytes(&self) -> usize {
        (self.probs.len() + self.dscores.len()) * size_of::<f64>()
    }
}

/// `<x row i, y row j>` over columns `first .. first + len` of both, in `F`.
fn dot<F: Accumulator, X: Scalar, Y: Scalar>(
    x: &DenseRef<'_, X>,
    i: usize,
    y: &DenseRef<'_, Y>,
    j: usize,
    first: usize,
    len: usize,
) -> F {
    (first..first + len).fold(F::ZERO, |s, t| {
        s.madd(
            F::from_f64(x.at(i, t).to_f64()),
            F::from_f64(y.at(j, t).to_f64()),
        )
    })
}

/// dQ, dK, dV and the bias gradient from `stats` (rows x 2*heads: each row and head's maximum
/// and normaliser, as the forward left them). The caller has checked shapes.
pub fn backward<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    shape: &AttentionShape,
    grads: AttentionBackward<'_, T>,
    stats: &[f64],
    transpose: &Transposed,
    work: &mut Workspace,
) -> Result<()> {
    let AttentionShape {
        heads, d, dv, bias, ..
    } = *shape;
    let AttentionBackward {
        q,
        k,
        v,
        o,
        d_o,
        dq: mut grad_q,
        dk: mut grad_k,
        dv: mut grad_v,
        dbias,
    } = grads;
    type F<T> = <T as Scalar>::Float;
    let f = |x: f64| <F<T> as Accumulator>::from_f64(x);
    let scale = f(shape.scale);
    let nnz = a.nnz();
    {
        let mut probs = DenseMut::from_slice(&mut work.probs, nnz, heads, Layout::RowMajor)?;
        let mut dscores = DenseMut::from_slice(&mut work.dscores, nnz, heads, Layout::RowMajor)?;
        let probs = SharedOut::new(&mut probs, "attention weights")?;
        let dscores = SharedOut::new(&mut dscores, "attention score gradients")?;
        let dq_out = SharedOut::new(&mut grad_q, "attention dQ")?;
        (0..a.rows()).into_par_iter().for_each(|i| {
            let (cols, vals) = a.row(i);
            let entries = a.row_range(i);
            let mut acc = vec![<F<T> as Accumulator>::ZERO; d];
            for h in 0..heads {
                let (max, norm) = (
                    f(stats[i * 2 * heads + 2 * h]),
                    f(stats[i * 2 * heads + 2 * h + 1]),
                );
                let mean: F<T> = dot(&d_o, i, &o, i, h * dv, dv);
                acc.fill(<F<T> as Accumulator>::ZERO);
                for (n, (&c, &value)) in cols.iter().zip(vals).enumerate() {
                    let j = c.to_usize();
                    let mut score = dot::<F<T>, _, _>(&q, i, &k, j, h * d, d) * scale;
                    if bias {
                        score += f(value.to_f64());
                    }
                    let p = (score - max).exp() / norm;
                    let dp: F<T> = dot(&d_o, i, &v, j, h * dv, dv);
                    let ds = p * (dp - mean);
                    // SAFETY: entry e belongs to row i, which belongs to this task alone.
                    unsafe {
                        probs.write(entries.start + n, h, p.to_f64());
                        dscores.write(entries.start + n, h, ds.to_f64());
                    }
                    for (t, x) in acc.iter_mut().enumerate() {
                        *x = x.madd(ds * scale, f(k.at(j, h * d + t).to_f64()));
                    }
                }
                for (t, &x) in acc.iter().enumerate() {
                    // SAFETY: row i belongs to this task alone.
                    unsafe { dq_out.write(i, h * d + t, T::Out::from_f64(x.to_f64())) };
                }
            }
        });
    }
    let (probs, dscores) = (&work.probs, &work.dscores);
    let dk_out = SharedOut::new(&mut grad_k, "attention dK")?;
    let dv_out = SharedOut::new(&mut grad_v, "attention dV")?;
    (0..a.cols()).into_par_iter().for_each(|j| {
        let range = transpose.col_ptr[j]..transpose.col_ptr[j + 1];
        let mut acc_k = vec![<F<T> as Accumulator>::ZERO; d];
        let mut acc_v = vec![<F<T> as Accumulator>::ZERO; dv];
        for h in 0..heads {
            acc_k.fill(<F<T> as Accumulator>::ZERO);
            acc_v.fill(<F<T> as Accumulator>::ZERO);
            for s in range.clone() {
                let (i, e) = (transpose.row[s], transpose.entry[s]);
                let (p, ds) = (f(probs[e * heads + h]), f(dscores[e * heads + h]));
                for (t, x) in acc_k.iter_mut().enumerate() {
                    *x = x.madd(ds * scale, f(q.at(i, h * d + t).to_f64()));
                }
                for (t, x) in acc_v.iter_mut().enumerate() {
                    *x = x.madd(p, f(d_o.at(i, h * dv + t).to_f64()));
                }
            }
            // SAFETY: column j of A is row j of dK and dV, which belong to this task alone.
            unsafe {
                for (t, &x) in acc_k.iter().enumerate() {
                    dk_out.write(j, h * d + t, T::Out::from_f64(x.to_f64()));
                }
                for (t, &x) in acc_v.iter().enumerate() {
                    dv_out.write(j, h * dv + t, T::Out::from_f64(x.to_f64()));
                }
            }
        }
    });
    if let Some(mut dbias) = dbias {
        let out = SharedOut::new(&mut dbias, "attention dbias")?;
        (0..nnz).into_par_iter().for_each(|e| {
            let sum = (0..heads).fold(<F<T> as Accumulator>::ZERO, |s, h| {
                s + f(dscores[e * heads + h])
            });
            // SAFETY: entry e belongs to this task alone.
            unsafe {
                out.write(
                    e,
                    0,
                    T::Out::from_f64(if bias { sum.to_f64() } else { 0.0 }),
                )
            };
        });
    }
    Ok(())
}
