//! CSR SpMV `y = A*x`: the cpu backend's rayon kernel (planned once, run in the timed loop)
//! against sprs's serial kernel, in f64 and f32, on corpus matrices of different shapes and on a
//! generated matrix several times larger than the last-level cache. Throughput is the minimal
//! bytes, so criterion prints GB/s comparable with the `bandwidth` group.

use std::hint::black_box;

use benches::{
    assert_close, bench_bandwidth, corpus_matrix, label, min_bytes, operand, sprs_view, BenchValue,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use sparse_blas::{Backend, Csr, DenseMut, DenseRef, Executor, SpmvDesc};
use sparse_formats::generate::poisson3d;

/// FEM matrices (bcsstk16, xenon1, copter2), a dual mesh with 4 entries per row (mdual), a web
/// graph with short skewed rows (NotreDame_www) and rows of up to 5,060 entries (c-62).
const CORPUS: [&str; 6] = [
    "bcsstk16",
    "xenon1",
    "mdual",
    "NotreDame_www",
    "c-62",
    "copter2",
];

/// Grid side of the generated 7-point Poisson matrix: 160³ = 4.1M rows and 28.5M entries, i.e.
/// 0.42 GB of minimal traffic in f64 and 0.28 GB in f32. The corpus matrices all fit in the
/// 105 MB L3 of the development machine; this one is several times larger, so it measures memory.
const POISSON_SIDE: usize = 160;

fn bench_spmv<T: BenchValue>(c: &mut Criterion, name: &str, a: &Csr<T>) {
    let backend = Backend::from_name("cpu").expect("the cpu backend is always built");
    let mut plan = backend
        .plan_spmv(a.as_ref(), &SpmvDesc::new(T::PRECISION))
        .expect("the cpu backend plans f64 and f32 CSR");
    let (one, zero) = (T::from_f64(1.0), T::zero());
    let x = operand::<T>(a.cols());
    let mut y = vec![zero; a.rows()];
    // sprs only accumulates (y += A*x), so its y starts at zero for the check and then keeps
    // growing in the timed loop: the cheapest call sprs offers (no zeroing pass, no allocation).
    let mut y_sprs = vec![zero; a.rows()];
    let view = sprs_view(a);
    plan.run(one, DenseRef::vector(&x), zero, DenseMut::vector(&mut y))
        .expect("shapes match");
    sprs::prod::mul_acc_mat_vec_csr(view, x.as_slice(), y_sprs.as_mut_slice());
    assert_close(&y, &y_sprs, name);

    let id = label(name, a);
    let mut group = c.benchmark_group(format!("spmv_{}", T::PRECISION));
    group
        .sampling_mode(SamplingMode::Flat)
        .throughput(min_bytes(a, 1));
    group.bench_function(BenchmarkId::new("ours", &id), |b| {
        b.iter(|| {
            plan.run(one, DenseRef::vector(&x), zero, DenseMut::vector(&mut y))
                .expect("shapes match");
            black_box(&mut y);
        })
    });
    group.bench_function(BenchmarkId::new("sprs", &id), |b| {
        b.iter(|| {
            sprs::prod::mul_acc_mat_vec_csr(view, x.as_slice(), y_sprs.as_mut_slice());
            black_box(&mut y_sprs);
        })
    });
    group.finish();
}

fn bench_matrix(c: &mut Criterion, name: &str, a: &Csr<f64>) {
    bench_spmv(c, name, a);
    bench_spmv(c, name, &a.cast::<f32>());
}

fn spmv(c: &mut Criterion) {
    bench_bandwidth(c);
    for name in CORPUS {
        if let Some(a) = corpus_matrix(name) {
            bench_matrix(c, name, &a);
        }
    }
    let a = poisson3d::<f64, u32>(POISSON_SIDE).expect("a 160³ grid fits u32 indices");
    bench_matrix(c, &format!("poisson3d_{POISSON_SIDE}"), &a);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = spmv
}
criterion_main!(benches);
