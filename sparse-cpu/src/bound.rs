//! Expected results with per-entry error bounds: what the oracle says, and how far a correct
//! kernel may stray from it.
//!
//! For an output built from k products, floating-point summation in any order satisfies
//! `|got - exact| <= gamma(k, u) * sum |terms|` with `gamma(k, u) = k*u / (1 - k*u)` and `u` the
//! unit roundoff of the accumulation (Higham, Accuracy and Stability, §3.1). The absolute sum is
//! computed by the reference on |A|, |x| (and |beta*y|, which adds one term); two more terms
//! cover the final alpha/beta update and the combination of partial sums. Storing the result in
//! the output type adds `u_out * |result|`. Inputs need no term of their own: the oracle reads
//! the same rounded values the kernel reads. Integer arithmetic (u = 0) must be exact.

use sparse_core::{
    AttentionShape, Compute, CsrRef, DType, Dense, DenseRef, Error, Layout, Precision, Result,
    Scalar, SpIndex,
};

use crate::reference;

/// The oracle's values with the largest deviation each may show.
#[derive(Clone, Debug)]
pub struct Expectation {
    pub values: Vec<f64>,
    /// Bound on |got - value| before the output rounding (which [`Expectation::check`] adds).
    pub tolerance: Vec<f64>,
    /// Unit roundoff of the output type.
    pub output_roundoff: f64,
    /// Half the smallest subnormal of the output type: below its normal range a store errs by
    /// up to half that spacing, whatever the relative roundoff says.
    pub output_underflow: f64,
}

/// How a result compared with an [`Expectation`].
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub entries: usize,
    pub failures: usize,
    /// Largest |got - expected| / bound (0 when every entry is exact; infinite for a NaN
    /// mismatch or a nonzero error where the bound is zero).
    pub max_ratio: f64,
    /// (entry, got, expected) of the first failure.
    pub first_failure: Option<(usize, f64, f64)>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

pub fn gamma(k: usize, u: f64) -> f64 {
    let ku = k as f64 * u;
    if ku >= 1.0 {
        f64::INFINITY
    } else {
        ku / (1.0 - ku)
    }
}

/// The smallest positive subnormal of `dtype`: the spacing of values below its normal range;
/// 0 for the integer types.
pub fn smallest_subnormal(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::from_bits(1),
        DType::F32 => f64::from(f32::from_bits(1)),
        DType::F16 => 2f64.powi(-24),
        DType::BF16 => 2f64.powi(-133),
        _ => 0.0,
    }
}

/// Unit roundoff of storing a result of type `O`.
fn output_roundoff<O: Scalar>() -> f64 {
    match O::DTYPE.bits() {
        _ if O::DTYPE == sparse_core::DType::I32 => 0.0,
        64 => f64::EPSILON / 2.0,
        32 => f64::from(f32::EPSILON) / 2.0,
        _ => Precision {
            storage: O::DTYPE,
            compute: sparse_core::Compute::F32,
        }
        .input_roundoff(),
    }
}

impl Expectation {
    /// Compares `got` (converted to f64) entry by entry.
    pub fn check(&self, got: &[f64]) -> Result<Verdict> {
        if got.len() != self.values.len() {
            return Err(Error::shape(
                "result",
                (self.values.len(), 1),
                (got.len(), 1),
            ));
        }
        let mut verdict = Verdict {
            entries: got.len(),
            failures: 0,
            max_ratio: 0.0,
            first_failure: None,
        };
        for (e, ((&g, &x), &tol)) in got
            .iter()
            .zip(&self.values)
            .zip(&self.tolerance)
            .enumerate()
        {
            let ratio = deviation_ratio(
                g,
                x,
                tol * (1.0 + self.output_roundoff)
                    + self.output_roundoff * x.abs()
                    + self.output_underflow,
            );
            verdict.max_ratio = verdict.max_ratio.max(ratio);
            if ratio > 1.0 {
                verdict.failures += 1;
                verdict.first_failure.get_or_insert((e, g, x));
            }
        }
        Ok(verdict)
    }
}

/// |got - expected| / bound; NaN must meet NaN and an infinity the same infinity.
fn deviation_ratio(got: f64, expected: f64, bound: f64) -> f64 {
    if got.is_nan() || expected.is_nan() {
        return if got.is_nan() && expected.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if got.is_infinite() || expected.is_infinite() {
        return if got == expected { 0.0 } else { f64::INFINITY };
    }
    let err = (got - expected).abs();
    if err == 0.0 {
        0.0
    } else if bound > 0.0 {
        err / bound
    } else {
        f64::INFINITY
    }
}

fn abs_csr<T: Scalar, I: SpIndex>(a: CsrRef<'_, T, I>) -> (Vec<f64>, CsrRef<'_, T, I>) {
    (a.values().iter().map(|v| v.to_f64().abs()).collect(), a)
}

fn abs_dense<T: Scalar>(d: DenseRef<'_, T>) -> Result<Dense<f64>> {
    let data = d.host("bound")?;
    Ok(Dense::from_fn(
        d.rows(),
        d.cols(),
        Layout::RowMajor,
        |i, j| data[d.offset(i, j)].to_f64().abs(),
    ))
}

/// Runs `f` on the entry-wise absolute value of `a`.
fn with_abs<T: Scalar, I: SpIndex, R>(
    a: CsrRef<'_, T, I>,
    f: impl FnOnce(CsrRef<'_, f64, I>) -> Result<R>,
) -> Result<R> {
    let (values, a) = abs_csr(a);
    // SAFETY: same structure as the validated `a`, only the values differ.
    let abs =
        unsafe { CsrRef::new_unchecked(a.rows(), a.cols(), a.row_ptr(), a.col_idx(), &values) };
    f(abs)
}

fn tolerance_from(magnitude: impl Iterator<Item = (usize, f64)>, u: f64) -> Vec<f64> {
    magnitude
        .map(|(terms, m)| gamma(terms + 2, u) * m)
        .collect()
}

/// Expected `alpha*A*x + beta*y`.
pub fn spmv<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    precision: Precision,
    alpha: f64,
    x: DenseRef<'_, T>,
    beta: f64,
    y: Option<DenseRef<'_, T::Out>>,
) -> Result<Expectation> {
    let values = reference::spmv(a, alpha, x, beta, y)?;
    let ax = abs_dense(x)?;
    let ay = y.filter(|_| beta != 0.0).map(abs_dense).transpose()?;
    let magnitude = with_abs(a, |abs| {
        reference::spmv(
            abs,
            alpha.abs(),
            ax.as_ref(),
            beta.abs(),
            ay.as_ref().map(Dense::as_ref),
        )
    })?;
    let terms = (0..a.rows()).map(|i| a.row_len(i) + 1);
    Ok(Expectation {
        values,
        tolerance: tolerance_from(terms.zip(magnitude), precision.compute.unit_roundoff()),
        output_roundoff: output_roundoff::<T::Out>(),
        output_underflow: smallest_subnormal(<T::Out as Scalar>::DTYPE) / 2.0,
    })
}

/// Expected `alpha*A*B + beta*C`, row-major.
pub fn spmm<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    precision: Precision,
    alpha: f64,
    b: DenseRef<'_, T>,
    beta: f64,
    c: Option<DenseRef<'_, T::Out>>,
) -> Result<Expectation> {
    let values = reference::spmm(a, alpha, b, beta, c)?.into_host_vec()?;
    let ab = abs_dense(b)?;
    let ac = c.filter(|_| beta != 0.0).map(abs_dense).transpose()?;
    let magnitude = with_abs(a, |abs| {
        reference::spmm(
            abs,
            alpha.abs(),
            ab.as_ref(),
            beta.abs(),
            ac.as_ref().map(Dense::as_ref),
        )
    })?
    .into_host_vec()?;
    let n = b.cols();
    let terms = (0..a.rows()).flat_map(|i| std::iter::repeat_n(a.row_len(i) + 1, n));
    Ok(Expectation {
        values,
        tolerance: tolerance_from(terms.zip(magnitude), precision.compute.unit_roundoff()),
        output_roundoff: output_roundoff::<T::Out>(),
        output_underflow: smallest_subnormal(<T::Out as Scalar>::DTYPE) / 2.0,
    })
}

/// Expected `alpha*(X*Y^T) ∘ spy(S) + beta*C`, in S's entry order.
#[allow(clippy::too_many_arguments)]
pub fn sddmm<T: Scalar, I: SpIndex>(
    s: CsrRef<'_, T, I>,
    precision: Precision,
    alpha: f64,
    x: DenseRef<'_, T>,
    y: DenseRef<'_, T>,
    beta: f64,
    c: Option<DenseRef<'_, T::Out>>,
    scale_by_values: bool,
) -> Result<Expectation> {
    let values = reference::sddmm(s, alpha, x, y, beta, c, scale_by_values)?;
    let (ax, ay) = (abs_dense(x)?, abs_dense(y)?);
    let ac = c.filter(|_| beta != 0.0).map(abs_dense).transpose()?;
    let magnitude = with_abs(s, |abs| {
        reference::sddmm(
            abs,
            alpha.abs(),
            ax.as_ref(),
            ay.as_ref(),
            beta.abs(),
            ac.as_ref().map(Dense::as_ref),
            scale_by_values,
        )
    })?;
    let terms = x.cols() + 1 + usize::from(scale_by_values);
    Ok(Expectation {
        values,
        tolerance: tolerance_from(
            std::iter::repeat(terms).zip(magnitude),
            precision.compute.unit_roundoff(),
        ),
        output_roundoff: output_roundoff::<T::Out>(),
        output_underflow: smallest_subnormal(<T::Out as Scalar>::DTYPE) / 2.0,
    })
}

/// The largest score magnitude of each (row, head) of an attention, row major:
/// `max_j (|scale| * sum_t |q_t k_jt| + |b_j|)` over the row's entries j, the head's columns t,
/// with the bias b from A's values when the shape has one. A score's rounding error is this
/// times the dot product's gamma.
pub fn score_magnitudes<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    shape: &AttentionShape,
) -> Result<Vec<f64>> {
    let (aq, ak) = (abs_dense(q)?, abs_dense(k)?);
    let AttentionShape { heads, d, .. } = *shape;
    let mut out = Vec::with_capacity(a.rows() * heads);
    for i in 0..a.rows() {
        let (cols, vals) = a.row(i);
        for h in 0..heads {
            let largest = cols
                .iter()
                .zip(vals)
                .map(|(&c, &value)| {
                    let dot: f64 = (0..d)
                        .map(|t| aq.at(i, h * d + t) * ak.at(c.to_usize(), h * d + t))
                        .sum();
                    let bias = if shape.bias {
                        value.to_f64().abs()
                    } else {
                        0.0
                    };
                    dot * shape.scale.abs() + bias
                })
                .fold(0.0, f64::max);
            out.push(largest);
        }
    }
    Ok(out)
}

/// Expected sparse attention, rows x heads*dv, row-major.
///
/// A score s_j = scale*<q, k_j> (+ bias b_j) computed with d products errs by at most
/// `e = gamma(d+3, u) * (scale * sum_t |q_t k_jt| + |b_j|)`; each softmax weight then changes by
/// a factor within exp(±2e), so the weighted mean of V rows moves by at most
/// `(exp(2e_max) - 1) * max|v|` over the row's entries. Summing n weights and n weighted rows
/// adds `gamma(2n+4, u) * max|v|`.
pub fn attention<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    precision: Precision,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    v: DenseRef<'_, T>,
    shape: &AttentionShape,
) -> Result<Expectation> {
    let values = reference::attention(a, q, k, v, shape)?.into_host_vec()?;
    let magnitudes = score_magnitudes(a, q, k, shape)?;
    let av = abs_dense(v)?;
    let AttentionShape { heads, d, dv, .. } = *shape;
    let u = precision.compute.unit_roundoff();
    let mut tolerance = Vec::with_capacity(values.len());
    for i in 0..a.rows() {
        let cols = a.row(i).0;
        for h in 0..heads {
            let score_error = magnitudes[i * heads + h] * gamma(d + 3, u);
            let spread = (2.0 * score_error).exp_m1() + gamma(2 * cols.len() + 4, u);
            for t in 0..dv {
                let vmax = cols
                    .iter()
                    .map(|&c| av.at(c.to_usize(), h * dv + t))
                    .fold(0.0, f64::max);
                tolerance.push(spread * vmax);
            }
        }
    }
    Ok(Expectation {
        values,
        tolerance,
        output_roundoff: output_roundoff::<T::Out>(),
        output_underflow: smallest_subnormal(<T::Out as Scalar>::DTYPE) / 2.0,
    })
}

/// Expected gradients of attention ([`reference::attention_backward`]), each row-major.
#[derive(Debug)]
pub struct AttentionGradsExpectation {
    pub dq: Expectation,
    pub dk: Expectation,
    pub dv: Expectation,
    /// One per entry of A, in its CSR order.
    pub dbias: Expectation,
}

/// Expected attention gradients given dL/dO (`d_o`) and the forward's output as stored (`o`).
///
/// First-order propagation, doubled for the terms it leaves out: each weight P is off by a
/// factor within `rel_p = exp(2 e_s) - 1 + gamma(2n+4, u)` (as in [`attention`]); dP = <dO, V>
/// by `gamma(dv+2, u) <|dO|, |V|>`; the row mean D = <dO, O> by that of the products plus what
/// O's own error (its forward bound and its rounding to storage) moves it; then
/// dS = P (dP - D) by `rel_p |dS| + P (err dP + err D)`, and every sum over entries adds its own
/// `gamma(terms + 2, u)`.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    precision: Precision,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    v: DenseRef<'_, T>,
    o: DenseRef<'_, T::Out>,
    d_o: DenseRef<'_, T::Out>,
    shape: &AttentionShape,
) -> Result<AttentionGradsExpectation> {
    const SAFETY: f64 = 2.0;
    let grads = reference::attention_backward(a, q, k, v, d_o, shape)?;
    let forward = attention(a, precision, q, k, v, shape)?;
    let AttentionShape { heads, d, dv, .. } = *shape;
    let u = precision.compute.unit_roundoff();
    let u_out = output_roundoff::<T::Out>();
    // Weights and products below the accumulator's smallest normal number (scores far apart)
    // lose up to half its smallest subnormal each, whatever their size.
    let tiny = smallest_subnormal(match precision.compute {
        Compute::F64 => DType::F64,
        _ => DType::F32,
    }) / 2.0;
    let (aq, ak, av) = (abs_dense(q)?, abs_dense(k)?, abs_dense(v)?);
    let ado = abs_dense(d_o)?;
    let ao = abs_dense(o)?;
    let mut col_len = vec![0usize; a.cols()];
    for &c in a.col_idx() {
        col_len[c.to_usize()] += 1;
    }
    let mut tol_q = vec![0.0; a.rows() * heads * d];
    let mut tol_k = vec![0.0; a.cols() * heads * d];
    let mut tol_v = vec![0.0; a.cols() * heads * dv];
    let mut tol_b = vec![0.0; a.nnz()];
    let magnitudes = score_magnitudes(a, q, k, shape)?;
    for i in 0..a.rows() {
        let cols = a.row(i).0;
        let entries = a.row_range(i);
        let n = cols.len();
        for h in 0..heads {
            let p = reference::attention_probabilities(a, q, k, shape, i, h);
            let score_error = magnitudes[i * heads + h] * gamma(d + 3, u);
            let rel_p = (2.0 * score_error).exp_m1() + gamma(2 * n + 4, u);
            let dp: Vec<f64> = cols
                .iter()
                .map(|&c| {
                    (0..dv)
                        .map(|t| {
                            d_o.at(i, h * dv + t).to_f64() * v.at(c.to_usize(), h * dv + t).to_f64()
                        })
                        .sum()
                })
                .collect();
            let dp_err: Vec<f64> = cols
                .iter()
                .map(|&c| {
                    gamma(dv + 2, u)
                        * (0..dv)
                            .map(|t| ado.at(i, h * dv + t) * av.at(c.to_usize(), h * dv + t))
                            .sum::<f64>()
                })
                .collect();
            let mean: f64 = p.iter().zip(&dp).map(|(p, dp)| p * dp).sum();
            let mean_err: f64 = (0..dv)
                .map(|t| {
                    let at = i * heads * dv + h * dv + t;
                    let o_err = forward.tolerance[at] + u_out * ao.at(i, h * dv + t);
                    gamma(dv + 2, u) * ado.at(i, h * dv + t) * ao.at(i, h * dv + t)
                        + ado.at(i, h * dv + t) * o_err
                })
                .sum();
            for (m, &c) in cols.iter().enumerate() {
                let j = c.to_usize();
                let ds = p[m] * (dp[m] - mean);
                let ds_err = rel_p * p[m] * (dp[m].abs() + mean.abs())
                    + p[m] * (dp_err[m] + mean_err)
                    + tiny * (1.0 + dp[m].abs() + mean.abs());
                let row_terms = ds_err + gamma(n + 2, u) * ds.abs();
                let col_terms = ds_err + gamma(col_len[j] + 2, u) * ds.abs();
                for t in 0..d {
                    let col = h * d + t;
                    tol_q[i * heads * d + col] +=
                        shape.scale.abs() * row_terms * ak.at(j, col) + tiny;
                    tol_k[j * heads * d + col] +=
                        shape.scale.abs() * col_terms * aq.at(i, col) + tiny;
                }
                for t in 0..dv {
                    let col = h * dv + t;
                    tol_v[j * heads * dv + col] +=
                        (rel_p + gamma(col_len[j] + 2, u)) * p[m] * ado.at(i, col) + tiny;
                }
                if shape.bias {
                    tol_b[entries.start + m] += ds_err + gamma(heads + 1, u) * ds.abs();
                }
            }
        }
    }
    let expectation = |values: Vec<f64>, tolerance: Vec<f64>| Expectation {
        values,
        tolerance: tolerance.into_iter().map(|t| SAFETY * t).collect(),
        output_roundoff: u_out,
        output_underflow: smallest_subnormal(<T::Out as Scalar>::DTYPE) / 2.0,
    };
    Ok(AttentionGradsExpectation {
        dq: expectation(grads.dq.into_host_vec()?, tol_q),
        dk: expectation(grads.dk.into_host_vec()?, tol_k),
        dv: expectation(grads.dv.into_host_vec()?, tol_v),
        dbias: expectation(grads.dbias, tol_b),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_formats::Csr;

    fn expectation() -> Expectation {
        let a = Csr::<f32>::from_triplets(2, 3, &[(0, 0, 0.1), (0, 2, 0.3), (1, 1, 1e7)]).unwrap();
        let x = [1.0f32, 1e-7, 3.0];
        spmv(
            a.as_ref(),
            Precision::F32,
            1.0,
            DenseRef::vector(&x),
            0.0,
            None,
        )
        .unwrap()
    }

    #[test]
    fn errors_within_the_bound_pass_and_beyond_fail() {
        let e = expectation();
        let close: Vec<f64> = e
            .values
            .iter()
            .map(|v| v * (1.0 + 2.0 * f64::from(f32::EPSILON)))
            .collect();
        assert!(e.check(&close).unwrap().passed());
        let far: Vec<f64> = e.values.iter().map(|v| v * (1.0 + 1e-4)).collect();
        let verdict = e.check(&far).unwrap();
        assert_eq!(verdict.failures, 2);
        assert!(verdict.max_ratio > 1.0);
    }

    #[test]
    fn nan_must_meet_nan() {
        let e = Expectation {
            values: vec![f64::NAN, 1.0],
            tolerance: vec![0.0, 0.0],
            output_roundoff: 0.0,
            output_underflow: 0.0,
        };
        assert!(e.check(&[f64::NAN, 1.0]).unwrap().passed());
        assert!(!e.check(&[0.0, 1.0]).unwrap().passed());
        assert!(!e.check(&[f64::NAN, f64::NAN]).unwrap().passed());
    }

    #[test]
    fn integer_paths_must_be_exact() {
        let a = Csr::<i8>::from_triplets(1, 2, &[(0, 0, 100), (0, 1, -128)]).unwrap();
        let x = [127i8, 127];
        let e = spmv(
            a.as_ref(),
            Precision::I8,
            1.0,
            DenseRef::vector(&x),
            0.0,
            None,
        )
        .unwrap();
        assert_eq!(e.values, vec![-3556.0]);
        assert!(e.check(&[-3556.0]).unwrap().passed());
        assert!(!e.check(&[-3555.0]).unwrap().passed());
    }
}
