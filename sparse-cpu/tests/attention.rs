//! Multi-head attention with an edge bias: the oracle against a loop over single heads, the
//! rayon kernel against the oracle's bound, and the rows a careless softmax gets wrong (empty,
//! all scores negative).

use sparse_core::{
    bf16, f16, Algorithm, AttentionBackward, AttentionDesc, AttentionPlan, AttentionShape, Dense,
    Executor, Layout, Precision, Scalar,
};
use sparse_cpu::{bound, reference, CpuBackend};
use sparse_formats::{generate, Csr};

/// A power-law pattern, one with empty rows and a long row, and one row with one entry.
fn patterns() -> Vec<Csr<f64>> {
    let mut ragged: Vec<_> = (0..40)
        .filter(|r| r % 5 != 2)
        .flat_map(|r| (0..r % 4 + 1).map(move |k| (r, (r * 7 + 3 * k) % 31, 0.5 - k as f64)))
        .collect();
    ragged.extend((0..31).map(|c| (9, c, c as f64 / 8.0 - 2.0)));
    vec![
        generate::rmat::<f64, u32>(6, 6, 3).unwrap(),
        Csr::from_triplets(40, 31, &ragged).unwrap(),
        Csr::from_triplets(1, 1, &[(0, 0, 1.0)]).unwrap(),
    ]
}

fn dense<T: Scalar>(rows: usize, cols: usize, layout: Layout, seed: usize) -> Dense<T> {
    Dense::from_fn(rows, cols, layout, |i, j| {
        T::from_f64(((i * 7 + j * 3 + seed * 5) % 11) as f64 / 4.0 - 1.25)
    })
}

/// Columns `h*w .. (h+1)*w` of `d`.
fn head<T: Scalar>(d: &Dense<T>, h: usize, w: usize) -> Dense<T> {
    Dense::from_fn(d.rows(), w, Layout::RowMajor, |i, t| d.at(i, h * w + t))
}

#[test]
fn heads_are_independent_single_head_problems() {
    for a in patterns() {
        for bias in [false, true] {
            let (heads, d, dv) = (3, 5, 2);
            let q = dense::<f64>(a.rows(), heads * d, Layout::RowMajor, 1);
            let k = dense::<f64>(a.cols(), heads * d, Layout::ColMajor, 2);
            let v = dense::<f64>(a.cols(), heads * dv, Layout::RowMajor, 3);
            let desc = AttentionDesc::new(Precision::F64)
                .heads(heads)
                .bias_from_values(bias);
            let shape = desc.shape(heads * d, heads * dv).unwrap();
            let all = reference::attention(a.as_ref(), q.as_ref(), k.as_ref(), v.as_ref(), &shape)
                .unwrap();
            for h in 0..heads {
                let one = AttentionShape { heads: 1, ..shape };
                let single = reference::attention(
                    a.as_ref(),
                    head(&q, h, d).as_ref(),
                    head(&k, h, d).as_ref(),
                    head(&v, h, dv).as_ref(),
                    &one,
                )
                .unwrap();
                for i in 0..a.rows() {
                    for t in 0..dv {
                        assert_eq!(all.at(i, h * dv + t), single.at(i, t));
                    }
                }
            }
        }
    }
}

#[test]
fn the_bias_shifts_the_scores_by_the_values() {
    // One row, two entries with values 0 and ln 3: with equal scores the weights are 1/4, 3/4.
    let a = Csr::<f64>::from_triplets(1, 2, &[(0, 0, 0.0), (0, 1, 3f64.ln())]).unwrap();
    let q = Dense::from_fn(1, 1, Layout::RowMajor, |_, _| 1.0);
    let k = Dense::from_fn(2, 1, Layout::RowMajor, |_, _| 2.0);
    let v = Dense::from_fn(2, 1, Layout::RowMajor, |j, _| (4 * j) as f64);
    let shape = AttentionDesc::new(Precision::F64)
        .bias_from_values(true)
        .shape(1, 1)
        .unwrap();
    let out = reference::attention(a.as_ref(), q.as_ref(), k.as_ref(), v.as_ref(), &shape)
        .unwrap()
        .into_host_vec()
        .unwrap();
    assert!((out[0] - 3.0).abs() < 1e-12, "{out:?}");
}

fn kernel_meets_the_bound<T: Scalar>(precision: Precision) {
    for a in patterns() {
        let a: Csr<T> = a.cast();
        for (heads, d, dv, bias) in [(1, 1, 1, false), (3, 3, 4, true), (2, 33, 5, true)] {
            for layout in [Layout::RowMajor, Layout::ColMajor] {
                let q = dense::<T>(a.rows(), heads * d, layout, 4);
                let k = dense::<T>(a.cols(), heads * d, Layout::RowMajor, 5);
                let v = dense::<T>(a.cols(), heads * dv, layout, 6);
                let desc = AttentionDesc::new(precision)
                    .heads(heads)
                    .bias_from_values(bias)
                    .algorithm(Algorithm::RowSplit);
                let mut plan = CpuBackend.plan_attention(a.as_ref(), &desc).unwrap();
                let mut o = Dense::<T::Out>::zeros(a.rows(), heads * dv, Layout::RowMajor);
                plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())
                    .unwrap();
                let shape = desc.shape(heads * d, heads * dv).unwrap();
                let expected = bound::attention(
                    a.as_ref(),
                    precision,
                    q.as_ref(),
                    k.as_ref(),
                    v.as_ref(),
                    &shape,
                )
                .unwrap();
                let got: Vec<f64> = o
                    .into_host_vec()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_f64())
                    .collect();
                let verdict = expected.check(&got).unwrap();
                assert!(
                    verdict.passed(),
                    "{precision} heads {heads} d {d} dv {dv} bias {bias}: {verdict:?}"
                );
            }
        }
    }
}

#[test]
fn the_kernel_meets_the_bound_in_every_precision() {
    kernel_meets_the_bound::<f64>(Precision::F64);
    kernel_meets_the_bound::<f32>(Precision::F32);
    kernel_meets_the_bound::<f16>(Precision::F16);
    kernel_meets_the_bound::<bf16>(Precision::BF16);
}

#[test]
fn all_negative_scores_still_mix_and_empty_rows_are_zero() {
    // Row 0: scores -1000 and -1001 (a maximum started at 0 would underflow every weight);
    // row 1: no entries.
    let a = Csr::<f32>::from_triplets(2, 2, &[(0, 0, 1.0), (0, 1, 1.0)]).unwrap();
    let q = Dense::from_fn(2, 1, Layout::RowMajor, |_, _| -1000.0f32);
    let k = Dense::from_fn(2, 1, Layout::RowMajor, |j, _| 1.0 + j as f32 / 1000.0);
    let v = Dense::from_fn(2, 1, Layout::RowMajor, |j, _| (j * 2) as f32);
    let desc = AttentionDesc::new(Precision::F32).scale(1.0);
    let shape = desc.shape(1, 1).unwrap();
    let expected = reference::attention(a.as_ref(), q.as_ref(), k.as_ref(), v.as_ref(), &shape)
        .unwrap()
        .into_host_vec()
        .unwrap();
    let w = 1.0 / (1.0 + 1f64.exp());
    assert!((expected[0] - 2.0 * w).abs() < 1e-4 && expected[1] == 0.0);
    for algorithm in [Algorithm::RowSplit, Algorithm::Reference] {
        let mut plan = CpuBackend
            .plan_attention(a.as_ref(), &desc.algorithm(algorithm))
            .unwrap();
        let mut o = Dense::from_fn(2, 1, Layout::RowMajor, |_, _| f32::NAN);
        plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())
            .unwrap();
        let got = o.into_host_vec().unwrap();
        assert!((f64::from(got[0]) - expected[0]).abs() < 1e-5, "{got:?}");
        assert_eq!(got[1], 0.0);
    }
}

#[test]
fn heads_that_do_not_divide_the_widths_are_refused() {
    let a = Csr::<f32>::from_triplets(2, 2, &[(0, 0, 1.0)]).unwrap();
    let q = Dense::<f32>::zeros(2, 4, Layout::RowMajor);
    let v = Dense::<f32>::zeros(2, 3, Layout::RowMajor);
    let mut o = Dense::<f32>::zeros(2, 3, Layout::RowMajor);
    let mut plan = CpuBackend
        .plan_attention(a.as_ref(), &AttentionDesc::new(Precision::F32).heads(2))
        .unwrap();
    let err = plan
        .run(q.as_ref(), q.as_ref(), v.as_ref(), o.as_mut())
        .unwrap_err();
    assert!(err.to_string().contains("2 heads"), "{err}");
    assert!(CpuBackend
        .plan_attention(a.as_ref(), &AttentionDesc::new(Precision::F32).heads(0))
        .is_err());
}

/// L = sum of O ∘ G for a fixed G, so dL/dO = G.
fn loss(
    a: &Csr<f64>,
    q: &Dense<f64>,
    k: &Dense<f64>,
    v: &Dense<f64>,
    g: &Dense<f64>,
    shape: &AttentionShape,
) -> f64 {
    let o = reference::attention(a.as_ref(), q.as_ref(), k.as_ref(), v.as_ref(), shape).unwrap();
    (0..o.rows())
        .flat_map(|i| (0..o.cols()).map(move |t| (i, t)))
        .map(|(i, t)| o.at(i, t) * g.at(i, t))
        .sum()
}

/// `d` with entry (i, j) moved by `by`.
fn nudged(d: &Dense<f64>, i: usize, j: usize, by: f64) -> Dense<f64> {
    Dense::from_fn(d.rows(), d.cols(), Layout::RowMajor, |r, c| {
        d.at(r, c) + if (r, c) == (i, j) { by } else { 0.0 }
    })
}

#[test]
fn the_oracle_backward_matches_finite_differences() {
    let a = Csr::<f64>::from_triplets(
        4,
        5,
        &[
            (0, 0, 0.5),
            (0, 3, -1.0),
            (0, 4, 0.25),
            (1, 2, 1.5),
            (3, 0, -0.5),
            (3, 1, 0.0),
            (3, 4, 2.0),
        ],
    )
    .unwrap();
    let (heads, d, dv) = (2, 3, 2);
    let q = dense::<f64>(4, heads * d, Layout::RowMajor, 1);
    let k = dense::<f64>(5, heads * d, Layout::RowMajor, 2);
    let v = dense::<f64>(5, heads * dv, Layout::RowMajor, 3);
    let g = dense::<f64>(4, heads * dv, Layout::RowMajor, 4);
    let shape = AttentionDesc::new(Precision::F64)
        .heads(heads)
        .bias_from_values(true)
        .shape(heads * d, heads * dv)
        .unwrap();
    let grads = reference::attention_backward(
        a.as_ref(),
        q.as_ref(),
        k.as_ref(),
        v.as_ref(),
        g.as_ref(),
        &shape,
    )
    .unwrap();
    let eps = 1e-6;
    let close = |numeric: f64, analytic: f64, what: &str| {
        assert!(
            (numeric - analytic).abs() < 1e-6 * (1.0 + analytic.abs()),
            "{what}: {numeric} vs {analytic}"
        );
    };
    for (name, x, grad) in [
        ("Q", &q, &grads.dq),
        ("K", &k, &grads.dk),
        ("V", &v, &grads.dv),
    ] {
        for i in 0..x.rows() {
            for j in 0..x.cols() {
                let with = |by| match name {
                    "Q" => loss(&a, &nudged(x, i, j, by), &k, &v, &g, &shape),
                    "K" => loss(&a, &q, &nudged(x, i, j, by), &v, &g, &shape),
                    _ => loss(&a, &q, &k, &nudged(x, i, j, by), &g, &shape),
                };
                close(
                    (with(eps) - with(-eps)) / (2.0 * eps),
                    grad.at(i, j),
                    &format!("d{name}({i}, {j})"),
                );
            }
        }
    }
    for e in 0..a.nnz() {
        let with = |by: f64| {
            let mut b = a.clone();
            b.values_mut()[e] += by;
            loss(&b, &q, &k, &v, &g, &shape)
        };
        close(
            (with(eps) - with(-eps)) / (2.0 * eps),
            grads.dbias[e],
            &format!("dA entry {e}"),
        );
    }
}

fn backward_meets_the_bound<T: Scalar<Out = T>>(precision: Precision) {
    for a in patterns() {
        let a: Csr<T> = a.cast();
        for (heads, d, dv, bias) in [(1, 1, 1, false), (3, 3, 4, true), (2, 33, 5, true)] {
            let q = dense::<T>(a.rows(), heads * d, Layout::ColMajor, 4);
            let k = dense::<T>(a.cols(), heads * d, Layout::RowMajor, 5);
            let v = dense::<T>(a.cols(), heads * dv, Layout::RowMajor, 6);
            let d_o = dense::<T>(a.rows(), heads * dv, Layout::ColMajor, 7);
            let desc = AttentionDesc::new(precision)
                .heads(heads)
                .bias_from_values(bias)
                .algorithm(Algorithm::RowSplit);
            let mut plan = CpuBackend.plan_attention(a.as_ref(), &desc).unwrap();
            let mut o = Dense::<T>::zeros(a.rows(), heads * dv, Layout::RowMajor);
            let zeros = |rows, cols| Dense::<T>::zeros(rows, cols, Layout::RowMajor);
            let (mut dq, mut dk, mut dv_) = (
                zeros(a.rows(), heads * d),
                zeros(a.cols(), heads * d),
                zeros(a.cols(), heads * dv),
            );
            let mut db = zeros(a.nnz(), 1);
            let backward = |plan: &mut Box<dyn AttentionPlan<T> + '_>,
                            o: &Dense<T>,
                            dq: &mut Dense<T>,
                            dk: &mut Dense<T>,
                            dv_: &mut Dense<T>,
                            db: &mut Dense<T>| {
                plan.backward(AttentionBackward {
                    q: q.as_ref(),
                    k: k.as_ref(),
                    v: v.as_ref(),
                    o: o.as_ref(),
                    d_o: d_o.as_ref(),
                    dq: dq.as_mut(),
                    dk: dk.as_mut(),
                    dv: dv_.as_mut(),
                    dbias: Some(db.as_mut()),
                })
            };
            assert!(
                backward(&mut plan, &o, &mut dq, &mut dk, &mut dv_, &mut db).is_err(),
                "a backward before any run"
            );
            plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())
                .unwrap();
            backward(&mut plan, &o, &mut dq, &mut dk, &mut dv_, &mut db).unwrap();
            let shape = desc.shape(heads * d, heads * dv).unwrap();
            let expected = bound::attention_backward(
                a.as_ref(),
                precision,
                q.as_ref(),
                k.as_ref(),
                v.as_ref(),
                o.as_ref(),
                d_o.as_ref(),
                &shape,
            )
            .unwrap();
            let values = |x: &Dense<T>| -> Vec<f64> {
                x.as_ref()
                    .host("got")
                    .unwrap()
                    .iter()
                    .map(|v| v.to_f64())
                    .collect()
            };
            for (name, got, e) in [
                ("dQ", &dq, &expected.dq),
                ("dK", &dk, &expected.dk),
                ("dV", &dv_, &expected.dv),
                ("dbias", &db, &expected.dbias),
            ] {
                let verdict = e.check(&values(got)).unwrap();
                assert!(
                    verdict.passed(),
                    "{precision} {name} heads {heads} d {d} dv {dv} bias {bias}: {verdict:?}"
                );
            }
        }
    }
}

#[test]
fn the_backward_meets_the_bound_in_every_precision() {
    backward_meets_the_bound::<f64>(Precision::F64);
    backward_meets_the_bound::<f32>(Precision::F32);
    backward_meets_the_bound::<f16>(Precision::F16);
    backward_meets_the_bound::<bf16>(Precision::BF16);
}
