//! A graph-transformer attention layer trained for a few steps on a citation graph.
//!
//! Node features X (n x F) are projected to queries, keys and values of H heads
//! (Q = X Wq, K = X Wk, V = X Wv, each n x H*d); sparse attention over the graph's edges gives
//! O = softmax_row(Q Kᵀ / sqrt(d) ∘ spy(A)) V per head; the loss is ½‖O − Y‖² for a fixed target
//! Y. The backward gives dQ, dK and dV, from which the weight gradients dW = Xᵀ dQ (and so on)
//! follow, and plain gradient descent lowers the loss. The attention runs on the GPU when there
//! is one (`SPARSE_BACKEND=cpu` forces the CPU).
//!
//! `cargo run --release --example graph_attention [GRAPH.mtx.gz]` (default: the corpus's Cora).

use std::time::Instant;

use sparse_blas::generate::SplitMix64;
use sparse_blas::{
    io, AttentionBackward, AttentionDesc, Backend, BackendRequest, Dense, Executor, Layout,
    Precision, Result,
};

const FEATURES: usize = 16;
const HEADS: usize = 4;
const HEAD_WIDTH: usize = 8;
const STEPS: usize = 5;
const LEARNING_RATE: f32 = 0.5;

/// A row-major host matrix with values in [-scale, scale).
fn random(rows: usize, cols: usize, scale: f32, rng: &mut SplitMix64) -> Dense<f32> {
    Dense::from_fn(rows, cols, Layout::RowMajor, |_, _| {
        scale * (2.0 * rng.next_f64() as f32 - 1.0)
    })
}

/// `a * b`, or `aᵀ * b` with `transpose_a`, on the host.
fn matmul(a: &Dense<f32>, b: &Dense<f32>, transpose_a: bool) -> Dense<f32> {
    let (rows, inner) = if transpose_a {
        (a.cols(), a.rows())
    } else {
        (a.rows(), a.cols())
    };
    Dense::from_fn(rows, b.cols(), Layout::RowMajor, |i, j| {
        (0..inner)
            .map(|t| {
                let x = if transpose_a { a.at(t, i) } else { a.at(i, t) };
                x * b.at(t, j)
            })
            .sum()
    })
}

fn main() -> Result<()> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/matrices/cora.mtx.gz"
        )
        .to_string()
    });
    let graph = io::read_csr::<f32, u32>(&path)?;
    let n = graph.rows();
    let backend = Backend::new(BackendRequest::from_env_or("auto")?)?;
    println!(
        "{path}: {n} nodes, {} edges; {HEADS} heads of width {HEAD_WIDTH}; {}",
        graph.nnz(),
        backend.description()
    );

    let mut rng = SplitMix64::new(7);
    let x = random(n, FEATURES, 1.0, &mut rng);
    let target = random(n, HEADS * HEAD_WIDTH, 0.5, &mut rng);
    let mut weights: Vec<Dense<f32>> = (0..3)
        .map(|_| random(FEATURES, HEADS * HEAD_WIDTH, 0.5, &mut rng))
        .collect();

    let desc = AttentionDesc::new(Precision::F32).heads(HEADS);
    let mut plan = backend.plan_attention(graph.as_ref(), &desc)?;
    println!(
        "planned {} on {} ({} bytes)",
        plan.info().algorithm,
        plan.info().backend,
        plan.info().bytes
    );
    let width = HEADS * HEAD_WIDTH;
    let zeros = |rows| backend.zeros::<f32>(rows, width, Layout::RowMajor);
    for step in 0..STEPS {
        let projected: Vec<Dense<f32>> = weights.iter().map(|w| matmul(&x, w, false)).collect();
        let [q, k, v] = [0, 1, 2].map(|i| backend.upload(projected[i].as_ref()));
        let (q, k, v) = (q?, k?, v?);
        let mut o = zeros(n)?;
        let started = Instant::now();
        plan.run(q.as_ref(), k.as_ref(), v.as_ref(), o.as_mut())?;
        backend.synchronize()?;
        let forward = started.elapsed();

        let o_host = backend.download(&o)?;
        let d_o = Dense::from_fn(n, width, Layout::RowMajor, |i, j| {
            o_host.at(i, j) - target.at(i, j)
        });
        let loss: f32 = (0..n)
            .flat_map(|i| (0..width).map(move |j| (i, j)))
            .map(|(i, j)| 0.5 * d_o.at(i, j).powi(2))
            .sum();
        let d_o = backend.upload(d_o.as_ref())?;
        let (mut dq, mut dk, mut dv) = (zeros(n)?, zeros(n)?, zeros(n)?);
        let started = Instant::now();
        plan.backward(AttentionBackward {
            q: q.as_ref(),
            k: k.as_ref(),
            v: v.as_ref(),
            o: o.as_ref(),
            d_o: d_o.as_ref(),
            dq: dq.as_mut(),
            dk: dk.as_mut(),
            dv: dv.as_mut(),
            dbias: None,
        })?;
        backend.synchronize()?;
        let backward = started.elapsed();
        println!(
            "step {step}: loss {loss:.4}, forward {:.3} ms, backward {:.3} ms",
            forward.as_secs_f64() * 1e3,
            backward.as_secs_f64() * 1e3
        );

        for (w, grad) in weights.iter_mut().zip([dq, dk, dv]) {
            let dw = matmul(&x, &backend.download(&grad)?, true);
            *w = Dense::from_fn(FEATURES, width, Layout::RowMajor, |i, j| {
                w.at(i, j) - LEARNING_RATE / n as f32 * dw.at(i, j)
            });
        }
    }
    Ok(())
}
