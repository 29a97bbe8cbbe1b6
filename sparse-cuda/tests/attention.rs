//! Attention on the `cuda` backend against the oracle's bound: every algorithm of the table in
//! f32, f16 and bf16, one and three heads, head widths 1, 3, 33, 100 (V 120) and 130, with and
//! without the edge bias, on rows with no entry, one entry, past the long-row limit and 100k
//! entries, on columns past that limit, and on scores that are all far below zero. Operands are
//! padded (NaN past every leading dimension) and mix layouts; runs are compared bit for bit with
//! a second run. The backward (dQ, dK, dV, the bias gradient) of every algorithm that has one is
//! checked the same way against the oracle's backward bound. The graph and GNN matrices of the
//! corpus (`kind` graph or gnn in its MANIFEST.tsv; `$SPARSE_CORPUS`, else ../shared/matrices)
//! run forward and backward too, with two heads and the bias. Skips without a GPU (fails under
//! `SPARSE_REQUIRE_GPU=1`). `auto` in f32 must take `fused` for heads of up to 256 columns and
//! the unfused pipeline past them, and the unfused pipeline on a large graph of short rows and
//! columns, forward and backward.

mod common;

use common::{available, collect, value, Failures, Host};
use sparse_core::{
    bf16, f16, Algorithm, AttentionBackward, AttentionDesc, BackendKind, Dense, Error, Executor,
    Format, Layout, OpKind, Precision, Scalar,
};
use sparse_cpu::bound;
use sparse_cuda::CudaBackend;
use sparse_formats::{generate, mtx, Csr};

/// The patterns, with values in [-2, 2) for the bias.
fn matrices() -> Vec<(&'static str, Csr<f64>)> {
    let mut edges: Vec<(usize, usize, f64)> = Vec::new();
    for r in 0..50usize {
        let len = match r {
            0 | 13 => 0,
            1 | 2 => 1,
            7 => 40,
            _ => r % 6,
        };
        edges.extend((0..len).map(|k| (r, (r * 11 + 7 * k) % 40, 0.0)));
    }
    let mut long: Vec<(usize, usize, f64)> = (0..100_000).map(|c| (0, c, 0.0)).collect();
    long.push((1, 99_999, 0.0));
    let mut past_limit: Vec<(usize, usize, f64)> = Vec::new();
    for r in 0..20usize {
        let len = [0, 1, 256, 257, 300, 511, 600][r % 7];
        past_limit.extend((0..len).map(|c| (r, (c * 7 + r) % 600, 0.0)));
    }
    past_limit.sort_by_key(|&(r, c, _)| (r, c));
    past_limit.dedup_by_key(|&mut (r, c, _)| (r, c));
    // Columns past the limit, for the backward's column pass: every row has column 0, rows
    // r < 300 column 1 too, and one more of eight.
    let mut long_columns: Vec<(usize, usize, f64)> = Vec::new();
    for r in 0..600usize {
        long_columns.push((r, 0, 0.0));
        if r < 300 {
            long_columns.push((r, 1, 0.0));
        }
        long_columns.push((r, 2 + r % 8, 0.0));
    }
    let mut out = vec![
        ("edge rows", Csr::from_triplets(50, 40, &edges).unwrap()),
        (
            "a row of 100k",
            Csr::from_triplets(3, 100_000, &long).unwrap(),
        ),
        (
            "rows past the limit",
            Csr::from_triplets(20, 600, &past_limit).unwrap(),
        ),
        (
            "columns past the limit",
            Csr::from_triplets(600, 10, &long_columns).unwrap(),
        ),
        ("power law", generate::rmat::<f64, u32>(10, 8, 5).unwrap()),
        // The gradients of K and V are all zero, and still written.
        ("no rows", Csr::from_triplets(0, 17, &[]).unwrap()),
    ];
    for (_, a) in &mut out {
        for (e, v) in a.values_mut().iter_mut().enumerate() {
            *v = (e % 16) as f64 / 4.0 - 2.0;
        }
    }
    out
}

/// How Q and K are filled: ordinary scores, or scores all far below zero.
#[derive(Clone, Copy, Debug)]
enum Scores {
    Mixed,
    AllNegative,
}

/// An operand's value at (row, column).
type Fill = fn(usize, usize) -> f64;

/// dQ, dK, dV and dbias as downloaded.
type Grads<T> = [Dense<T>; 4];
/// The forward's output and the gradients of two backward runs.
type Backward<T> = (Dense<T>, Grads<T>, Grads<T>);

/// One run: its operands on the host and what it asks for.
struct Run<'a, T: Scalar> {
    a: &'a Csr<T>,
    desc: AttentionDesc,
    q: Host<T>,
    k: Host<T>,
    v: Host<T>,
    o: Host<T>,
}

impl<'a, T: Scalar<Out = T>> Run<'a, T> {
    fn new(
        a: &'a Csr<T>,
        desc: AttentionDesc,
        (d, dv): (usize, usize),
        scores: Scores,
        seed: usize,
    ) -> Self {
        let h = desc.heads;
        let layout = |k: usize| {
            if (seed + k) % 2 == 0 {
                Layout::RowMajor
            } else {
                Layout::ColMajor
            }
        };
        let (qf, kf): (Fill, Fill) = match scores {
            Scores::Mixed => (value, |i, j| value(j, i)),
            Scores::AllNegative => (|i, j| -4.0 - value(i, j), |i, j| 4.0 + value(j, i)),
        };
        Run {
            a,
            desc,
            q: Host::new((a.rows(), h * d), layout(0), 1, qf),
            k: Host::new((a.cols(), h * d), layout(1), 2, kf),
            v: Host::new((a.cols(), h * dv), layout(2), 0, |i, j| value(i + 3, j)),
            o: Host::new((a.rows(), h * dv), layout(3), 3, |_, _| f64::NAN),
        }
    }

    /// Plans, runs the forward once and the backward twice on `backend`, and checks the
    /// gradients against the oracle (given the forward's output as the GPU stored it) and the
    /// second backward against the first, bit for bit. A plan whose backward is `Unsupported`
    /// is skipped.
    fn check_backward(&self, backend: &CudaBackend, what: &str, failures: &mut Failures) {
        let (rows, cols, w, wv) = (
            self.a.rows(),
            self.a.cols(),
            self.q.view().cols(),
            self.v.view().cols(),
        );
        let nan = |shape, layout, pad| Host::<T>::new(shape, layout, pad, |_, _| f64::NAN);
        let d_o = Host::<T>::new((rows, wv), Layout::ColMajor, 1, |i, j| value(j + 5, i));
        let (hq, hk, hv, hb) = (
            nan((rows, w), Layout::RowMajor, 1),
            nan((cols, w), Layout::ColMajor, 2),
            nan((cols, wv), Layout::RowMajor, 0),
            nan((self.a.nnz(), 1), Layout::ColMajor, 0),
        );
        let ran = || -> Result<Option<Backward<T>>, Error> {
            let mut plan = backend.plan_attention(self.a.as_ref(), &self.desc)?;
            let up = |h: &Host<T>| backend.upload(h.view());
            let (q, k, v, g) = (up(&self.q)?, up(&self.k)?, up(&self.v)?, up(&d_o)?);
            let mut o = up(&self.o)?;
            plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())?;
            let mut once = || -> Result<Grads<T>, Error> {
                let (mut dq, mut dk, mut dv, mut db) = (up(&hq)?, up(&hk)?, up(&hv)?, up(&hb)?);
                plan.backward(AttentionBackward {
                    q: q.as_ref(),
                    k: k.as_ref(),
                    v: v.as_ref(),
                    o: o.as_ref(),
                    d_o: g.as_ref(),
                    dq: dq.as_mut(),
                    dk: dk.as_mut(),
                    dv: dv.as_mut(),
                    dbias: Some(db.as_mut()),
                })?;
                Ok([
                    backend.download(&dq)?,
                    backend.download(&dk)?,
                    backend.download(&dv)?,
                    backend.download(&db)?,
                ])
            };
            let first = match once() {
                Err(Error::Unsupported { .. }) => return Ok(None),
                other => other?,
            };
            let second = once()?;
            Ok(Some((backend.download(&o)?, first, second)))
        };
        let (o, first, second) = match ran() {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => return failures.error(what, e),
        };
        let o_host: Vec<T> = {
            let view = o.as_ref();
            (0..rows)
                .flat_map(|i| (0..wv).map(move |j| (i, j)))
                .map(|(i, j)| view.at(i, j))
                .collect()
        };
        let o_dense = Dense::from_vec(o_host, rows, wv, wv.max(1), Layout::RowMajor).unwrap();
        let shape = self.desc.shape(w, wv).unwrap();
        let expected = bound::attention_backward(
            self.a.as_ref(),
            self.desc.precision,
            self.q.view(),
            self.k.view(),
            self.v.view(),
            o_dense.as_ref(),
            d_o.view(),
            &shape,
        )
        .unwrap();
        let bits = |d: &Dense<T>| -> Vec<u64> {
            d.as_ref()
                .host("bits")
                .unwrap()
                .iter()
                .map(|x| x.to_f64().to_bits())
                .collect()
        };
        let [dq, dk, dv, db] = first;
        if second
            .iter()
            .zip([&dq, &dk, &dv, &db])
            .any(|(s, f)| bits(s) != bits(f))
        {
            failures
                .0
                .push(format!("{what}: a second backward differs"));
        }
        failures.check_run(&format!("{what} dQ"), &expected.dq, &hq, Ok(dq));
        failures.check_run(&format!("{what} dK"), &expected.dk, &hk, Ok(dk));
        failures.check_run(&format!("{what} dV"), &expected.dv, &hv, Ok(dv));
        failures.check_run(&format!("{what} dbias"), &expected.dbias, &hb, Ok(db));
    }

    /// Plans, runs twice on `backend` and checks the first run against the oracle and the
    /// second against the first, bit for bit.
    fn check(&self, backend: &CudaBackend, what: &str, failures: &mut Failures) {
        let ran = || -> Result<(Dense<T>, Dense<T>), Error> {
            let mut plan = backend.plan_attention(self.a.as_ref(), &self.desc)?;
            let (q, k, v) = (
                backend.upload(self.q.view())?,
                backend.upload(self.k.view())?,
                backend.upload(self.v.view())?,
            );
            let mut o = backend.upload(self.o.view())?;
            plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())?;
            let first = backend.download(&o)?;
            plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())?;
            Ok((first, backend.download(&o)?))
        };
        let shape = self
            .desc
            .shape(self.q.view().cols(), self.v.view().cols())
            .unwrap();
        let expected = bound::attention(
            self.a.as_ref(),
            self.desc.precision,
            self.q.view(),
            self.k.view(),
            self.v.view(),
            &shape,
        )
        .unwrap();
        match ran() {
            Ok((first, second)) => {
                let bits = |d: &Dense<T>| -> Vec<u64> {
                    d.as_ref()
                        .host("bits")
                        .unwrap()
                        .iter()
                        .map(|x| x.to_f64().to_bits())
                        .collect()
                };
                if bits(&first) != bits(&second) {
                    failures.0.push(format!("{what}: a second run differs"));
                }
                failures.check_run(what, &expected, &self.o, Ok(first));
            }
            Err(e) => failures.error(what, e),
        }
    }
}

/// Every case on the matrices of up to `max_nnz` entries.
fn every_case<T: Scalar<Out = T>>(
    backend: &CudaBackend,
    precision: Precision,
    max_nnz: usize,
    f: &mut Failures,
) {
    let algorithms = CudaBackend::table(OpKind::Attention, Format::Csr, precision);
    assert!(!algorithms.is_empty(), "{precision}: no attention kernel");
    for (name, a) in matrices().into_iter().filter(|(_, a)| a.nnz() <= max_nnz) {
        let a: Csr<T> = a.cast();
        let long = a.cols() >= 100_000;
        for offer in &algorithms {
            let mut seed = 0;
            // (6, 6): K's rows, padded to 8 elements, take 16-byte accesses with a ragged end.
            for &(d, dv) in &[
                (1, 1),
                (3, 3),
                (6, 6),
                (33, 33),
                (100, 120),
                (130, 130),
                (33, 5),
            ] {
                for heads in [1, 3] {
                    for bias in [false, true] {
                        seed += 1;
                        // The 100k row's K and V are large: fewer shapes there.
                        if long && (heads == 3 && d > 33 || bias && d != 3) {
                            continue;
                        }
                        let desc = AttentionDesc::new(precision)
                            .algorithm(offer.algorithm)
                            .heads(heads)
                            .bias_from_values(bias);
                        let run = Run::new(&a, desc, (d, dv), Scores::Mixed, seed);
                        let what = format!(
                            "{} {precision} on {name}: d {d} dv {dv} heads {heads} bias {bias}",
                            offer.algorithm
                        );
                        run.check(backend, &what, f);
                        run.check_backward(backend, &what, f);
                    }
                }
            }
            let desc = AttentionDesc::new(precision)
                .algorithm(offer.algorithm)
                .heads(3)
                .scale(1.0);
            let what = format!(
                "{} {precision} on {name}: all scores negative",
                offer.algorithm
            );
            let run = Run::new(&a, desc, (33, 4), Scores::AllNegative, 1);
            run.check(backend, &what, f);
            run.check_backward(backend, &what, f);
        }
    }
}

#[test]
fn auto_in_f32_takes_unfused_past_the_columns_fused_holds_and_on_short_rows() {
    let backend = available(BackendKind::Cuda, CudaBackend::new(0));
    collect(backend, |b, f| {
        let (name, a) = matrices().swap_remove(0);
        // 1,056,160 entries, none in a row or column of more than 5; then with a column of 200.
        let mesh = generate::poisson2d::<f64, u32>(460).expect("a stencil");
        let mut triplets: Vec<(usize, usize, f64)> = (0..mesh.rows())
            .flat_map(|i| {
                let (cols, values) = mesh.as_ref().row(i);
                let row: Vec<_> = cols
                    .iter()
                    .zip(values)
                    .map(|(&c, &v)| (i, c as usize, v))
                    .collect();
                row
            })
            .collect();
        triplets.extend((0..200).map(|i| (i * 1000 + 7, 0, 0.5)));
        let hub = Csr::from_triplets(mesh.rows(), mesh.cols(), &triplets).expect("valid matrix");
        for (name, a, width, heads, expected) in [
            (name, &a, 256, 1, Algorithm::Fused),
            (name, &a, 257, 1, Algorithm::Unfused),
            (name, &a, 300, 2, Algorithm::Unfused),
            ("poisson2d-460", &mesh, 32, 1, Algorithm::Unfused),
            ("poisson2d-460", &mesh, 32, 4, Algorithm::Unfused),
            (
                "poisson2d-460 with a column of 200",
                &hub,
                32,
                1,
                Algorithm::Fused,
            ),
        ] {
            let a: Csr<f32> = a.cast();
            let desc = AttentionDesc::new(Precision::F32)
                .heads(heads)
                .bias_from_values(true);
            let run = Run::new(&a, desc, (width, width), Scores::Mixed, width);
            let what = format!("auto f32 on {name}: d {width} heads {heads}");
            run.check(b, &what, f);
            run.check_backward(b, &what, f);
            let ran = || -> Result<Algorithm, Error> {
                let mut plan = b.plan_attention(a.as_ref(), &desc)?;
                let up = |h: &Host<f32>| b.upload(h.view());
                let (q, k, v) = (up(&run.q)?, up(&run.k)?, up(&run.v)?);
                let mut o = up(&run.o)?;
                plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())?;
                Ok(plan.info().algorithm)
            };
            match ran() {
                Ok(algorithm) if algorithm == expected => {}
                Ok(algorithm) => {
                    f.0.push(format!("{what}: ran {algorithm}, expected {expected}"))
                }
                Err(e) => f.error(&what, e),
            }
        }
    });
}

#[test]
fn attention_meets_the_oracle_on_every_edge_case() {
    let backend = available(BackendKind::Cuda, CudaBackend::new(0));
    collect(backend, |b, f| {
        every_case::<f32>(b, Precision::F32, usize::MAX, f);
        every_case::<f16>(b, Precision::F16, usize::MAX, f);
        every_case::<bf16>(b, Precision::BF16, usize::MAX, f);
    });
}

/// The corpus's graph and GNN matrices, with values in [-2, 2) for the bias; none (and a line
/// saying so) without a corpus, unless `$SPARSE_CORPUS` names one, which must then have them.
fn corpus_graphs() -> Vec<(String, Csr<f64>)> {
    let named = std::env::var_os("SPARSE_CORPUS");
    let dir = named.clone().map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/matrices"),
        std::path::PathBuf::from,
    );
    let Ok(manifest) = std::fs::read_to_string(dir.join("MANIFEST.tsv")) else {
        assert!(
            named.is_none(),
            "SPARSE_CORPUS={} has no MANIFEST.tsv",
            dir.display()
        );
        eprintln!("no corpus manifest at {}", dir.display());
        return Vec::new();
    };
    manifest
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            matches!(fields.get(4), Some(&"graph" | &"gnn")).then(|| fields[0].to_string())
        })
        .map(|file| {
            let mut a = mtx::read_csr::<f64, u32>(&dir.join(&file)).expect("a corpus matrix");
            for (e, v) in a.values_mut().iter_mut().enumerate() {
                *v = (e % 16) as f64 / 4.0 - 2.0;
            }
            (file, a)
        })
        .collect()
}

/// Every algorithm forward and backward on each corpus graph: d = dv = 32, two heads, the bias.
fn corpus_cases<T: Scalar<Out = T>>(
    backend: &CudaBackend,
    precision: Precision,
    graphs: &[(String, Csr<f64>)],
    f: &mut Failures,
) {
    for (name, a) in graphs {
        let a: Csr<T> = a.cast();
        for offer in CudaBackend::table(OpKind::Attention, Format::Csr, precision) {
            let desc = AttentionDesc::new(precision)
                .algorithm(offer.algorithm)
                .heads(2)
                .bias_from_values(true);
            let run = Run::new(&a, desc, (32, 32), Scores::Mixed, 1);
            let what = format!("{} {precision} on {name}", offer.algorithm);
            run.check(backend, &what, f);
            run.check_backward(backend, &what, f);
        }
    }
}

/// One test per precision, so that the harness checks them against the oracle side by side.
fn every_corpus_graph<T: Scalar<Out = T>>(precision: Precision) {
    let backend = available(BackendKind::Cuda, CudaBackend::new(0));
    collect(backend, |b, f| {
        let graphs = corpus_graphs();
        println!("{} corpus graphs", graphs.len());
        corpus_cases::<T>(b, precision, &graphs, f);
    });
}

#[test]
fn every_corpus_graph_meets_the_oracle_forward_and_backward_in_f32() {
    every_corpus_graph::<f32>(Precision::F32);
}

#[test]
fn every_corpus_graph_meets_the_oracle_forward_and_backward_in_f16() {
    every_corpus_graph::<f16>(Precision::F16);
}

#[test]
fn every_corpus_graph_meets_the_oracle_forward_and_backward_in_bf16() {
    every_corpus_graph::<bf16>(Precision::BF16);
}

/// The small matrices only, in f32 and f16: quick enough under compute-sanitizer
/// (`compute-sanitizer --tool racecheck test-attention small`).
#[test]
fn small_cases_for_the_sanitizers() {
    let backend = available(BackendKind::Cuda, CudaBackend::new(0));
    collect(backend, |b, f| {
        every_case::<f32>(b, Precision::F32, 20_000, f);
        every_case::<f16>(b, Precision::F16, 20_000, f);
    });
}

#[test]
fn heads_that_do_not_divide_the_widths_are_refused_before_a_launch() {
    let backend = available(BackendKind::Cuda, CudaBackend::new(0));
    collect(backend, |b, f| {
        let a = Csr::<f32>::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 1.0)]).unwrap();
        let desc = AttentionDesc::new(Precision::F32)
            .heads(2)
            .algorithm(Algorithm::Fused);
        let mut plan = match b.plan_attention(a.as_ref(), &desc) {
            Ok(p) => p,
            Err(e) => return f.error("planning", e),
        };
        let q = b.zeros::<f32>(2, 4, Layout::RowMajor).unwrap();
        let v = b.zeros::<f32>(2, 3, Layout::RowMajor).unwrap();
        let mut o = b.zeros::<f32>(2, 3, Layout::RowMajor).unwrap();
        match plan.run(q.as_ref(), q.as_ref(), v.as_ref(), o.as_mut()) {
            Err(Error::InvalidArgument { .. }) => {}
            other => f.0.push(format!("3 V columns over 2 heads: {other:?}")),
        }
        if b.plan_attention(a.as_ref(), &desc.heads(0)).is_ok() {
            f.0.push("0 heads planned".into());
        }
    });
}

/// V's row 37 (a column of A that row 7 has and the other rows of its 16-row window lack)
/// holds +inf: the rows with that entry give +inf, the others stay finite, on every algorithm.
#[test]
fn an_infinite_v_row_reaches_only_the_rows_that_have_its_column() {
    fn check<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, f: &mut Failures) {
        let (_, a) = matrices().swap_remove(0);
        let a: Csr<T> = a.cast();
        for offer in CudaBackend::table(OpKind::Attention, Format::Csr, precision) {
            for (seed, layout) in [Layout::RowMajor, Layout::ColMajor].into_iter().enumerate() {
                let desc = AttentionDesc::new(precision).algorithm(offer.algorithm);
                let mut run = Run::new(&a, desc, (16, 72), Scores::Mixed, seed);
                run.v = Host::new((a.cols(), 72), layout, 0, |i, j| {
                    if i == 37 {
                        f64::INFINITY
                    } else {
                        value(i + 3, j)
                    }
                });
                let what = format!(
                    "{} {precision}: V row 37 infinite, {layout:?}",
                    offer.algorithm
                );
                run.check(b, &what, f);
            }
        }
    }
    let backend = available(BackendKind::Cuda, CudaBackend::new(0));
    collect(backend, |b, f| {
        check::<f32>(b, Precision::F32, f);
        check::<f16>(b, Precision::F16, f);
        check::<bf16>(b, Precision::BF16, f);
    });
}

/// A NaN in Q's row 3 (a row of A with 3 of the 40 columns) or in K's row 37 (a column of A
/// that row 7 has and the other rows of its 16-row window lack) reaches, forward and backward,
/// only what depends on it: the tensor-core backward must not let it into the rows or columns
/// that share a block with it.
#[test]
fn a_nan_q_or_k_row_reaches_only_the_gradients_that_depend_on_it() {
    fn check<T: Scalar<Out = T>>(b: &CudaBackend, precision: Precision, f: &mut Failures) {
        let (_, a) = matrices().swap_remove(0);
        let a: Csr<T> = a.cast();
        for offer in CudaBackend::table(OpKind::Attention, Format::Csr, precision) {
            let desc = AttentionDesc::new(precision).algorithm(offer.algorithm);
            // (operand, its row, its padding, its fill as Run::new has it)
            let cases: [(&str, usize, usize, Fill); 2] =
                [("Q", 3, 1, value), ("K", 37, 2, |i, j| value(j, i))];
            for (operand, row, pad, fill) in cases {
                let mut run = Run::new(&a, desc, (16, 72), Scores::Mixed, 0);
                let host = if operand == "Q" {
                    &mut run.q
                } else {
                    &mut run.k
                };
                let (shape, layout) = (host.view().shape(), host.view().layout());
                *host = Host::new(shape, layout, pad, |i, j| {
                    if i == row && j == 5 {
                        f64::NAN
                    } else {
                        fill(i, j)
                    }
                });
                let what = format!("{} {precision}: {operand} row {row} NaN", offer.algorithm);
                run.check(b, &what, f);
                run.check_backward(b, &what, f);
            }
        }
    }
    let backend = available(BackendKind::Cuda, CudaBackend::new(0));
    collect(backend, |b, f| {
        check::<f32>(b, Precision::F32, f);
        check::<f16>(b, Precision::F16, f);
        check::<bf16>(b, Precision::BF16, f);
    });
}
