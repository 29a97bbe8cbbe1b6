//! One graph convolutional layer forward, `H' = ReLU(Â·H·W)` with the normalised adjacency
//! `Â = D^-1/2 (A + I) D^-1/2` (Kipf and Welling): a dense `H·W` on the host, then one SpMM with
//! Â on the backend, checked against the serial oracle.
//!
//! `cargo run --release --example gcn_layer [GRAPH.mtx.gz]`: the Cora citation graph from
//! `../shared/matrices` when it is there and no file is given, else an R-MAT graph of 2^12
//! vertices.

use std::path::Path;

use sparse_blas::{
    bound, generate, io, Backend, Csr, Dense, Executor, Layout, Precision, SpmmDesc,
};

const IN_FEATURES: usize = 64;
const OUT_FEATURES: usize = 16;

/// `D^-1/2 (A + I) D^-1/2` of the pattern of `a` (values ignored: an edge weighs 1).
fn normalised_adjacency(a: &Csr<f64>) -> Result<Csr<f64>, sparse_blas::Error> {
    let mut edges: Vec<(usize, usize, f64)> = Vec::with_capacity(a.nnz() + a.rows());
    for i in 0..a.rows() {
        edges.extend(
            a.as_ref()
                .row(i)
                .0
                .iter()
                .filter(|&&j| j as usize != i)
                .map(|&j| (i, j as usize, 1.0)),
        );
        edges.push((i, i, 1.0));
    }
    let mut degree = vec![0.0f64; a.rows()];
    for &(i, _, _) in &edges {
        degree[i] += 1.0;
    }
    for (i, j, v) in &mut edges {
        *v = 1.0 / (degree[*i] * degree[*j]).sqrt();
    }
    Csr::from_triplets(a.rows(), a.cols(), &edges)
}

fn main() -> Result<(), sparse_blas::Error> {
    let cora = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/matrices/cora.mtx.gz");
    let (name, graph): (String, Csr<f64>) = match std::env::args().nth(1) {
        Some(path) => (path.clone(), io::read_csr(path)?),
        None if cora.exists() => ("cora".to_string(), io::read_csr(&cora)?),
        None => ("rmat 2^12".to_string(), generate::rmat(12, 8, 1)?),
    };
    let a_hat = normalised_adjacency(&graph)?;
    let n = a_hat.rows();

    // Features and weights, deterministic; H·W on the host (a small dense product).
    let h = Dense::from_fn(n, IN_FEATURES, Layout::RowMajor, |i, k| {
        ((i * 31 + k * 7) % 17) as f64 / 17.0 - 0.4
    });
    let w = Dense::from_fn(IN_FEATURES, OUT_FEATURES, Layout::RowMajor, |k, j| {
        ((k * 13 + j * 5) % 11) as f64 / 11.0 - 0.5
    });
    let hw = Dense::from_fn(n, OUT_FEATURES, Layout::RowMajor, |i, j| {
        (0..IN_FEATURES).map(|k| h.at(i, k) * w.at(k, j)).sum()
    });

    let backend = Backend::from_env_or("auto")?;
    let desc = SpmmDesc::new(Precision::F64).max_width(OUT_FEATURES);
    let mut plan = backend.plan_spmm(a_hat.as_ref(), &desc)?;
    let b = backend.upload(hw.as_ref())?;
    let mut out = backend.zeros::<f64>(n, OUT_FEATURES, Layout::RowMajor)?;
    let start = std::time::Instant::now();
    plan.run(1.0, b.as_ref(), 0.0, out.as_mut())?;
    backend.synchronize()?;
    let elapsed = start.elapsed();
    let mut next = backend.download(&out)?.into_host_vec()?;

    let expected = bound::spmm(a_hat.as_ref(), Precision::F64, 1.0, hw.as_ref(), 0.0, None)?;
    let verdict = expected.check(&next)?;
    for v in &mut next {
        *v = v.max(0.0);
    }
    let active = next.iter().filter(|&&v| v > 0.0).count();
    println!(
        "GCN layer on {name} ({n} vertices, {} entries of Â) on {}: SpMM {:.1} us ({}), \
         {active} of {} outputs active, within the oracle's bound: {}",
        a_hat.nnz(),
        backend.description(),
        elapsed.as_secs_f64() * 1e6,
        plan.info().algorithm,
        n * OUT_FEATURES,
        verdict.passed()
    );
    assert!(verdict.passed(), "{verdict:?}");
    Ok(())
}
