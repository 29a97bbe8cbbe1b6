//! The oracle: serial, fixed order, f64 arithmetic, written to be obviously correct.
//!
//! Every other kernel of every backend is tested against these functions. Inputs are read as
//! stored (so f16/bf16 inputs are already rounded); results are returned in f64 for the caller
//! to compare or round. They follow the semantics of `sparse_core`: `beta == 0` never reads the
//! output, `alpha == 0` never reads A or the dense inputs.

use sparse_core::{
    AttentionShape, CsrRef, Dense, DenseRef, Error, Layout, Result, Scalar, SpIndex,
};

/// `alpha*A*x + beta*y` for `x` (cols x 1) and `y` (rows x 1, read only when `beta != 0`).
pub fn spmv<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    alpha: f64,
    x: DenseRef<'_, T>,
    beta: f64,
    y: Option<DenseRef<'_, T::Out>>,
) -> Result<Vec<f64>> {
    x.expect_shape("spmv x", (a.cols(), 1))?;
    let y0 = prior_output(y, beta, "spmv y", (a.rows(), 1))?;
    let mut out = vec![0.0; a.rows()];
    for (i, o) in out.iter_mut().enumerate() {
        let mut sum = 0.0;
        if alpha != 0.0 {
            let (cols, vals) = a.row(i);
            for (&c, &v) in cols.iter().zip(vals) {
                sum += v.to_f64() * x.at(c.to_usize(), 0).to_f64();
            }
        }
        *o = combine(alpha, sum, beta, y0.map(|y| y.at(i, 0)));
    }
    Ok(out)
}

/// `alpha*A*B + beta*C` for `b` (cols x n) and `c` (rows x n); the result is row-major.
pub fn spmm<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    alpha: f64,
    b: DenseRef<'_, T>,
    beta: f64,
    c: Option<DenseRef<'_, T::Out>>,
) -> Result<Dense<f64>> {
    let n = b.cols();
    b.expect_shape("spmm B", (a.cols(), n))?;
    let c0 = prior_output(c, beta, "spmm C", (a.rows(), n))?;
    let mut out = Dense::zeros(a.rows(), n, Layout::RowMajor);
    let mut view = out.as_mut();
    let data = view.host("reference")?;
    for i in 0..a.rows() {
        let (cols, vals) = a.row(i);
        for j in 0..n {
            let mut sum = 0.0;
            if alpha != 0.0 {
                for (&col, &v) in cols.iter().zip(vals) {
                    sum += v.to_f64() * b.at(col.to_usize(), j).to_f64();
                }
            }
            data[i * n + j] = combine(alpha, sum, beta, c0.map(|c| c.at(i, j)));
        }
    }
    Ok(out)
}

/// `alpha*(X*Y^T) ∘ spy(S) + beta*C` for `x` (rows x k), `y` (cols x k) and `c` (nnz x 1, in S's
/// entry order). With `scale_by_values` each product is multiplied by S's value.
pub fn sddmm<T: Scalar, I: SpIndex>(
    s: CsrRef<'_, T, I>,
    alpha: f64,
    x: DenseRef<'_, T>,
    y: DenseRef<'_, T>,
    beta: f64,
    c: Option<DenseRef<'_, T::Out>>,
    scale_by_values: bool,
) -> Result<Vec<f64>> {
    let k = x.cols();
    x.expect_shape("sddmm X", (s.rows(), k))?;
    y.expect_shape("sddmm Y", (s.cols(), k))?;
    let c0 = prior_output(c, beta, "sddmm C", (s.nnz(), 1))?;
    let mut out = vec![0.0; s.nnz()];
    for i in 0..s.rows() {
        for e in s.row_range(i) {
            let mut dot = 0.0;
            if alpha != 0.0 {
                let j = s.col_idx()[e].to_usize();
                for t in 0..k {
                    dot += x.at(i, t).to_f64() * y.at(j, t).to_f64();
                }
                if scale_by_values {
                    dot *= s.values()[e].to_f64();
                }
            }
            out[e] = combine(alpha, dot, beta, c0.map(|c| c.at(e, 0)));
        }
    }
    Ok(out)
}

/// `softmax_row(scale*(Q*K^T) ∘ spy(A) [+ A]) * V` for each of `shape.heads` heads, with `q`
/// (rows x heads*d), `k` (cols x heads*d) and `v` (cols x heads*dv) holding the heads side by
/// side; a row of A without entries gives a zero row. The result is rows x heads*dv, row-major.
pub fn attention<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    v: DenseRef<'_, T>,
    shape: &AttentionShape,
) -> Result<Dense<f64>> {
    let AttentionShape { heads, d, dv, .. } = *shape;
    q.expect_shape("attention Q", (a.rows(), heads * d))?;
    k.expect_shape("attention K", (a.cols(), heads * d))?;
    v.expect_shape("attention V", (a.cols(), heads * dv))?;
    let width = heads * dv;
    let mut out = Dense::zeros(a.rows(), width, Layout::RowMajor);
    let mut view = out.as_mut();
    let data = view.host("reference")?;
    for i in 0..a.rows() {
        let (cols, _) = a.row(i);
        for h in 0..heads {
            let weights = attention_weights(a, q, k, shape, i, h);
            let total: f64 = weights.iter().sum();
            for t in 0..dv {
                let mixed: f64 = cols
                    .iter()
                    .zip(&weights)
                    .map(|(&c, w)| w * v.at(c.to_usize(), h * dv + t).to_f64())
                    .sum();
                data[i * width + h * dv + t] = if cols.is_empty() { 0.0 } else { mixed / total };
            }
        }
    }
    Ok(out)
}

/// The scores of row `i` of head `h`: `scale*<q_i, k_j>`, plus A's value with a bias.
pub fn attention_scores<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    shape: &AttentionShape,
    i: usize,
    h: usize,
) -> Vec<f64> {
    let d = shape.d;
    let (cols, vals) = a.row(i);
    cols.iter()
        .zip(vals)
        .map(|(&c, &value)| {
            let dot: f64 = (0..d)
                .map(|t| q.at(i, h * d + t).to_f64() * k.at(c.to_usize(), h * d + t).to_f64())
                .sum();
            let bias = if shape.bias { value.to_f64() } else { 0.0 };
            shape.scale * dot + bias
        })
        .collect()
}

/// The unnormalised softmax weights `exp(s_j - max s)` of row `i` of head `h`.
fn attention_weights<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    shape: &AttentionShape,
    i: usize,
    h: usize,
) -> Vec<f64> {
    let scores = attention_scores(a, q, k, shape, i, h);
    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    scores.iter().map(|s| (s - max).exp()).collect()
}

/// The gradients of a loss with respect to attention's inputs, as the oracle computes them
/// (f64, row-major): dQ (rows x heads*d), dK (cols x heads*d), dV (cols x heads*dv), and the
/// gradient of A's values (one per entry, summed over the heads; zeros without a bias).
#[derive(Debug)]
pub struct AttentionGrads {
    pub dq: Dense<f64>,
    pub dk: Dense<f64>,
    pub dv: Dense<f64>,
    pub dbias: Vec<f64>,
}

/// The softmax weights of row `i` of head `h`, normalised (empty for an empty row).
pub fn attention_probabilities<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    shape: &AttentionShape,
    i: usize,
    h: usize,
) -> Vec<f64> {
    let weights = attention_weights(a, q, k, shape, i, h);
    let total: f64 = weights.iter().sum();
    weights.iter().map(|w| w / total).collect()
}

/// The gradients of a loss L given `d_o` = dL/dO (rows x heads*dv) for the attention of `q`,
/// `k`, `v`: with P the softmax weights of a row and head, dP_ij = <dO_i, V_j>,
/// dS_ij = P_ij (dP_ij - sum_l P_il dP_il), dQ_i = scale sum_j dS_ij K_j,
/// dK_j = scale sum_i dS_ij Q_i, dV_j = sum_i P_ij dO_i and d(A_ij) = sum over heads of dS_ij.
pub fn attention_backward<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    v: DenseRef<'_, T>,
    d_o: DenseRef<'_, T::Out>,
    shape: &AttentionShape,
) -> Result<AttentionGrads> {
    let AttentionShape { heads, d, dv, .. } = *shape;
    q.expect_shape("attention Q", (a.rows(), heads * d))?;
    k.expect_shape("attention K", (a.cols(), heads * d))?;
    v.expect_shape("attention V", (a.cols(), heads * dv))?;
    d_o.expect_shape("attention dO", (a.rows(), heads * dv))?;
    let mut dq = vec![0.0; a.rows() * heads * d];
    let mut dk = vec![0.0; a.cols() * heads * d];
    let mut dvv = vec![0.0; a.cols() * heads * dv];
    let mut dbias = vec![0.0; a.nnz()];
    for i in 0..a.rows() {
        let (cols, _) = a.row(i);
        let entries = a.row_range(i);
        for h in 0..heads {
            let p = attention_probabilities(a, q, k, shape, i, h);
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
            let mean: f64 = p.iter().zip(&dp).map(|(p, dp)| p * dp).sum();
            for (n, &c) in cols.iter().enumerate() {
                let j = c.to_usize();
                let ds = p[n] * (dp[n] - mean);
                if shape.bias {
                    dbias[entries.start + n] += ds;
                }
                for t in 0..d {
                    let col = h * d + t;
                    dq[i * heads * d + col] += shape.scale * ds * k.at(j, col).to_f64();
                    dk[j * heads * d + col] += shape.scale * ds * q.at(i, col).to_f64();
                }
                for t in 0..dv {
                    let col = h * dv + t;
                    dvv[j * heads * dv + col] += p[n] * d_o.at(i, col).to_f64();
                }
            }
        }
    }
    let dense =
        |values, rows, cols| Dense::from_vec(values, rows, cols, cols.max(1), Layout::RowMajor);
    Ok(AttentionGrads {
        dq: dense(dq, a.rows(), heads * d)?,
        dk: dense(dk, a.cols(), heads * d)?,
        dv: dense(dvv, a.cols(), heads * dv)?,
        dbias,
    })
}

/// The prior output, checked, when `beta` makes it an input; `None` when it is write-only.
fn prior_output<'a, T>(
    out: Option<DenseRef<'a, T>>,
    beta: f64,
    context: &str,
    shape: (usize, usize),
) -> Result<Option<DenseRef<'a, T>>> {
    if beta == 0.0 {
        return Ok(None);
    }
    let out = out.ok_or_else(|| {
        Error::invalid(format!(
            "{context}: beta is {beta} but no prior output was given"
        ))
    })?;
    out.expect_shape(context, shape)?;
    out.host(context)?;
    Ok(Some(out))
}

fn combine<O: Scalar>(alpha: f64, sum: f64, beta: f64, prior: Option<O>) -> f64 {
    let scaled = if alpha == 0.0 { 0.0 } else { alpha * sum };
    match prior {
        Some(p) => scaled + beta * p.to_f64(),
        None => scaled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_formats::Csr;

    fn matrix() -> Csr<f64> {
        // [1 0 2]
        // [0 0 0]
        // [0 3 4]
        Csr::from_triplets(3, 3, &[(0, 0, 1.0), (0, 2, 2.0), (2, 1, 3.0), (2, 2, 4.0)]).unwrap()
    }

    #[test]
    fn spmv_is_exact_on_integers() {
        let a = matrix();
        let x = [1.0, 2.0, 3.0];
        let y = [10.0, 20.0, 30.0];
        let out = spmv(
            a.as_ref(),
            2.0,
            DenseRef::vector(&x),
            -1.0,
            Some(DenseRef::vector(&y)),
        )
        .unwrap();
        assert_eq!(out, vec![2.0 * 7.0 - 10.0, -20.0, 2.0 * 18.0 - 30.0]);
    }

    #[test]
    fn beta_zero_never_reads_y_and_alpha_zero_never_reads_x() {
        let a = matrix();
        let nan = [f64::NAN; 3];
        let out = spmv(
            a.as_ref(),
            1.0,
            DenseRef::vector(&[1.0, 1.0, 1.0]),
            0.0,
            Some(DenseRef::vector(&nan)),
        )
        .unwrap();
        assert_eq!(out, vec![3.0, 0.0, 7.0]);
        let out = spmv(
            a.as_ref(),
            0.0,
            DenseRef::vector(&nan),
            2.0,
            Some(DenseRef::vector(&[1.0, 2.0, 3.0])),
        )
        .unwrap();
        assert_eq!(out, vec![2.0, 4.0, 6.0]);
    }

    #[test]
    fn spmm_matches_hand_computation_in_both_layouts() {
        let a = matrix();
        let b = Dense::from_fn(3, 2, Layout::RowMajor, |i, j| (i + 2 * j) as f64);
        let expected = [4.0, 10.0, 0.0, 0.0, 11.0, 25.0];
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let b = b.to_layout(layout).unwrap();
            let out = spmm(a.as_ref(), 1.0, b.as_ref(), 0.0, None).unwrap();
            assert_eq!(out.into_host_vec().unwrap(), expected);
        }
    }

    #[test]
    fn sddmm_samples_the_pattern() {
        let a = matrix();
        let x = Dense::from_fn(3, 2, Layout::RowMajor, |i, j| (i + j) as f64);
        let y = Dense::from_fn(3, 2, Layout::ColMajor, |i, j| (i * j + 1) as f64);
        let plain = sddmm(a.as_ref(), 1.0, x.as_ref(), y.as_ref(), 0.0, None, false).unwrap();
        // rows of X: [0 1], [1 2], [2 3]; rows of Y: [1 1], [1 2], [1 3]
        assert_eq!(plain, vec![1.0, 3.0, 8.0, 11.0]);
        let scaled = sddmm(a.as_ref(), 1.0, x.as_ref(), y.as_ref(), 0.0, None, true).unwrap();
        assert_eq!(scaled, vec![1.0, 6.0, 24.0, 44.0]);
    }

    #[test]
    fn attention_rows_are_convex_combinations_and_empty_rows_are_zero() {
        let a = matrix();
        let q = Dense::from_fn(3, 2, Layout::RowMajor, |_, _| 0.0);
        let k = Dense::from_fn(3, 2, Layout::RowMajor, |i, _| i as f64);
        let v = Dense::from_fn(3, 1, Layout::RowMajor, |i, _| (10 * i) as f64);
        let shape = AttentionShape {
            heads: 1,
            d: 2,
            dv: 1,
            scale: 1.0,
            bias: false,
        };
        let out = attention(a.as_ref(), q.as_ref(), k.as_ref(), v.as_ref(), &shape)
            .unwrap()
            .into_host_vec()
            .unwrap();
        // zero scores: uniform weights over the row's columns
        assert_eq!(out, vec![10.0, 0.0, 15.0]);
    }

    #[test]
    fn shapes_are_checked() {
        let a = matrix();
        let err = spmv(a.as_ref(), 1.0, DenseRef::vector(&[1.0; 2]), 0.0, None).unwrap_err();
        assert!(matches!(
            err,
            Error::ShapeMismatch {
                expected: (3, 1),
                found: (2, 1),
                ..
            }
        ));
        assert!(spmv(a.as_ref(), 1.0, DenseRef::vector(&[1.0; 3]), 1.0, None).is_err());
    }
}
