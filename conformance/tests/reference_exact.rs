//! The oracle against naive dense computations on small integer-valued matrices, where f64
//! arithmetic is exact: SpMV, SpMM and SDDMM must match bit for bit, attention (which needs
//! exp) to within a few ulps of an independent dense masked softmax.

use conformance::generators::{self, with_values, Rng};
use conformance::Fill;
use sparse_blas::{
    dense_from_csr, reference, AttentionDesc, Csr, Dense, DenseRef, Layout, Precision,
};

/// The generated patterns small enough for dense loops, with integer values in [-4, 4].
fn integer_matrices() -> Vec<(&'static str, Csr<f64>)> {
    generators::patterns()
        .into_iter()
        .filter(|(_, a)| a.rows() * a.cols() <= 200_000)
        .enumerate()
        .map(|(k, (name, a))| (name, with_values(&a, &Fill::Ints, k as u64)))
        .collect()
}

/// A `rows x cols` matrix of integers in [-4, 4] in `layout`.
fn integers(rows: usize, cols: usize, layout: Layout, seed: u64) -> Dense<f64> {
    let mut rng = Rng::new(seed);
    Dense::from_fn(rows, cols, layout, |_, _| rng.below(9) as f64 - 4.0)
}

/// The layouts in turn, so every matrix meets both.
fn layout(k: usize) -> Layout {
    if k % 2 == 0 {
        Layout::RowMajor
    } else {
        Layout::ColMajor
    }
}

#[test]
fn spmv_and_spmm_equal_dense_loops() {
    for (k, (name, a)) in integer_matrices().into_iter().enumerate() {
        let dense = dense_from_csr(&a, Layout::RowMajor);
        for n in [1, 5] {
            let b = integers(a.cols(), n, layout(k), 1);
            let c = integers(a.rows(), n, layout(k + 1), 2);
            let (alpha, beta) = (2.0, -3.0);
            let mut expected = vec![0.0; a.rows() * n];
            for i in 0..a.rows() {
                for j in 0..n {
                    let dot: f64 = (0..a.cols()).map(|t| dense.at(i, t) * b.at(t, j)).sum();
                    expected[i * n + j] = alpha * dot + beta * c.at(i, j);
                }
            }
            let spmm = reference::spmm(a.as_ref(), alpha, b.as_ref(), beta, Some(c.as_ref()))
                .unwrap()
                .into_host_vec()
                .unwrap();
            assert_eq!(spmm, expected, "spmm on {name}, n = {n}");
            if n == 1 {
                let spmv =
                    reference::spmv(a.as_ref(), alpha, b.as_ref(), beta, Some(c.as_ref())).unwrap();
                assert_eq!(spmv, expected, "spmv on {name}");
            }
        }
    }
}

#[test]
fn sddmm_equals_the_sampled_dense_product() {
    for (k, (name, s)) in integer_matrices().into_iter().enumerate() {
        let dense_s = dense_from_csr(&s, Layout::ColMajor);
        let width = 3;
        let x = integers(s.rows(), width, layout(k), 3);
        let y = integers(s.cols(), width, layout(k + 1), 4);
        let c: Vec<f64> = (0..s.nnz()).map(|e| (e % 7) as f64 - 3.0).collect();
        let product = Dense::from_fn(s.rows(), s.cols(), Layout::RowMajor, |i, j| {
            (0..width).map(|t| x.at(i, t) * y.at(j, t)).sum::<f64>()
        });
        for by_values in [false, true] {
            let (alpha, beta) = (-2.0, 0.5);
            let mut expected = Vec::with_capacity(s.nnz());
            for i in 0..s.rows() {
                for &j in s.as_ref().row(i).0 {
                    let j = j as usize;
                    let factor = if by_values { dense_s.at(i, j) } else { 1.0 };
                    let entry = expected.len();
                    expected.push(alpha * product.at(i, j) * factor + beta * c[entry]);
                }
            }
            let got = reference::sddmm(
                s.as_ref(),
                alpha,
                x.as_ref(),
                y.as_ref(),
                beta,
                Some(DenseRef::vector(&c)),
                by_values,
            )
            .unwrap();
            assert_eq!(got, expected, "sddmm on {name}, by values: {by_values}");
        }
    }
}

#[test]
fn attention_equals_a_dense_masked_softmax() {
    for (k, (name, a)) in integer_matrices().into_iter().enumerate() {
        let ones = with_values(&a, &Fill::Cycle(vec![1.0].into()), 0);
        let mask = dense_from_csr(&ones, Layout::RowMajor);
        let (d, scale) = (4, 0.5);
        let q = integers(a.rows(), d, layout(k), 5);
        let kk = integers(a.cols(), d, layout(k + 1), 6);
        let v = integers(a.cols(), d, layout(k), 7);
        let shape = AttentionDesc::new(Precision::F64)
            .scale(scale)
            .shape(d, d)
            .unwrap();
        let got =
            reference::attention(a.as_ref(), q.as_ref(), kk.as_ref(), v.as_ref(), &shape).unwrap();
        for i in 0..a.rows() {
            let scores: Vec<Option<f64>> = (0..a.cols())
                .map(|j| {
                    (mask.at(i, j) != 0.0)
                        .then(|| scale * (0..d).map(|t| q.at(i, t) * kk.at(j, t)).sum::<f64>())
                })
                .collect();
            let max = scores
                .iter()
                .flatten()
                .fold(f64::NEG_INFINITY, |m, &s| m.max(s));
            let weights: Vec<f64> = scores
                .iter()
                .map(|s| s.map_or(0.0, |s| (s - max).exp()))
                .collect();
            let total: f64 = weights.iter().sum();
            for t in 0..d {
                let expected = if total == 0.0 {
                    0.0
                } else {
                    (0..a.cols()).map(|j| weights[j] * v.at(j, t)).sum::<f64>() / total
                };
                // |v| <= 4, and both sides sum a few hundred terms in f64.
                let err = (got.at(i, t) - expected).abs();
                assert!(
                    err <= 4.0 * 1e-13,
                    "attention on {name}: O({i}, {t}) = {}, dense softmax gives {expected}",
                    got.at(i, t)
                );
            }
        }
    }
}
