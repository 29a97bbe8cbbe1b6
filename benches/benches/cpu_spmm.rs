//! CSR SpMM `C = A*B` with B of N = 32 and 128 columns, B and C both row-major or both
//! column-major: the cpu backend's rayon kernel (planned once) against sprs's serial kernels,
//! and faer's dense GEMM on the densified matrix as the dense crossover reference wherever the
//! dense copy stays within `DENSE_LIMIT_BYTES`. Throughput is the minimal bytes of the sparse
//! product for every contender, so criterion's GB/s compare like its times do.

use std::hint::black_box;

use benches::{
    assert_close, bench_bandwidth, corpus_matrix, label, min_bytes, operand, sprs_view, BenchValue,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use faer::linalg::matmul::matmul;
use faer::traits::ComplexField;
use faer::{Accum, Mat, MatRef, Par};
use sparse_blas::{Backend, Csr, Dense, Executor, Layout, SpmmDesc};

/// A FEM matrix (bcsstk16, also the dense reference), a GNN graph with rows of up to 9,458
/// entries (musae_github), a web graph whose B and C at N = 128 exceed the L3 (NotreDame_www) and
/// a half-dense pruned layer where dense GEMM should win (dlmc_rn50_mp50_proj_g4).
const CORPUS: [&str; 4] = [
    "bcsstk16",
    "musae_github",
    "NotreDame_www",
    "dlmc_rn50_mp50_proj_g4",
];

const WIDTHS: [usize; 2] = [32, 128];

/// Largest dense copy of A that faer multiplies: bcsstk16 in f64 (191 MB) is just inside it.
const DENSE_LIMIT_BYTES: usize = 200 << 20;

/// A as a dense faer matrix, when it stays within `DENSE_LIMIT_BYTES`.
fn densify<T: BenchValue + ComplexField>(a: &Csr<T>) -> Option<Mat<T>> {
    if a.rows() * a.cols() * std::mem::size_of::<T>() > DENSE_LIMIT_BYTES {
        return None;
    }
    let mut dense = Mat::<T>::zeros(a.rows(), a.cols());
    let a_ref = a.as_ref();
    for i in 0..a.rows() {
        let (cols, vals) = a_ref.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            dense[(i, j as usize)] = v;
        }
    }
    Some(dense)
}

fn bench_spmm<T: BenchValue + ComplexField>(
    c: &mut Criterion,
    name: &str,
    a: &Csr<T>,
    dense: Option<&Mat<T>>,
    n: usize,
    layout: Layout,
) {
    let backend = Backend::from_name("cpu").expect("the cpu backend is always built");
    let mut plan = backend
        .plan_spmm(a.as_ref(), &SpmmDesc::new(T::PRECISION).max_width(n))
        .expect("the cpu backend plans f64 and f32 CSR");
    let (one, zero) = (T::from_f64(1.0), T::zero());
    let values = operand::<T>(a.cols() * n);
    let b = Dense::from_fn(a.cols(), n, layout, |i, j| values[i * n + j]);
    let mut c_ours = Dense::<T>::zeros(a.rows(), n, layout);
    // sprs only accumulates (C += A*B): its C starts at zero for the check, then keeps growing
    // in the timed loop, the cheapest call sprs offers (no zeroing pass, no allocation).
    let mut c_sprs = Dense::<T>::zeros(a.rows(), n, layout);
    let view = sprs_view(a);
    let b_nd = b.as_ref().to_ndarray().expect("host memory");
    let mut c_nd = c_sprs.as_mut().into_ndarray().expect("host memory");
    plan.run(one, b.as_ref(), zero, c_ours.as_mut())
        .expect("shapes match");
    // For N >= 8, `&CsMat * &Array2` runs this kernel whatever the layouts.
    sprs::prod::csr_mulacc_dense_rowmaj(view, b_nd, c_nd.view_mut());
    let ours = c_ours.as_ref().host("C").expect("host memory");
    assert_close(
        ours,
        c_nd.as_slice_memory_order().expect("contiguous"),
        name,
    );

    let id = label(name, a);
    let mut group = c.benchmark_group(format!("spmm_{}_n{n}_{layout}", T::PRECISION));
    group
        .sampling_mode(SamplingMode::Flat)
        .throughput(min_bytes(a, n));
    group.bench_function(BenchmarkId::new("ours", &id), |bench| {
        bench.iter(|| {
            plan.run(one, b.as_ref(), zero, c_ours.as_mut())
                .expect("shapes match");
            black_box(&mut c_ours);
        })
    });
    group.bench_function(BenchmarkId::new("sprs", &id), |bench| {
        bench.iter(|| {
            sprs::prod::csr_mulacc_dense_rowmaj(view, b_nd, c_nd.view_mut());
            black_box(&mut c_nd);
        })
    });
    if layout == Layout::ColMajor {
        // sprs's column-by-column kernel (what `*` picks for N < 8) reads B and C contiguously
        // in this layout, so it is the other candidate for the best sprs can do here.
        group.bench_function(BenchmarkId::new("sprs-colmaj", &id), |bench| {
            bench.iter(|| {
                sprs::prod::csr_mulacc_dense_colmaj(view, b_nd, c_nd.view_mut());
                black_box(&mut c_nd);
            })
        });
        if let Some(dense) = dense {
            let b_faer = MatRef::from_column_major_slice(
                b.as_ref().host("B").expect("host memory"),
                a.cols(),
                n,
            );
            let mut c_faer = Mat::<T>::zeros(a.rows(), n);
            group.bench_function(BenchmarkId::new("faer-dense", &id), |bench| {
                bench.iter(|| {
                    matmul(
                        c_faer.as_mut(),
                        Accum::Replace,
                        dense.as_ref(),
                        b_faer,
                        one,
                        Par::rayon(0),
                    );
                    black_box(&mut c_faer);
                })
            });
        }
    }
    group.finish();
}

fn bench_typed<T: BenchValue + ComplexField>(c: &mut Criterion, name: &str, a: &Csr<T>) {
    let dense = densify(a);
    for n in WIDTHS {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            bench_spmm(c, name, a, dense.as_ref(), n, layout);
        }
    }
}

fn spmm(c: &mut Criterion) {
    bench_bandwidth(c);
    for name in CORPUS {
        if let Some(a) = corpus_matrix(name) {
            bench_typed(c, name, &a);
            bench_typed(c, name, &a.cast::<f32>());
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = spmm
}
criterion_main!(benches);
