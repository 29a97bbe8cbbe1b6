//! Shared pieces of the CPU benchmarks (`benches/cpu_spmv.rs`, `benches/cpu_spmm.rs`) and the
//! `spbench` binary: corpus loading, the minimal-bytes floor, the bandwidth references and the
//! sprs baseline's view.
//!
//! Results are filed by criterion under `target/criterion/<group>/<function>/<matrix>`;
//! `run-cpu-benches.sh` runs both benches and `cpu_bench_table.py` turns them into tables.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput};
use rayon::prelude::*;
use sparse_blas::cost::SparseShape;
use sparse_blas::{Csr, Precision, Scalar, SpIndex};
use sprs::CsMatViewI;

/// The environment variable that names the directory of the `*.mtx.gz` corpus (the same one the
/// conformance binary reads); unset, the corpus is looked for in `../shared/matrices` next to the
/// workspace.
pub const MATRIX_DIR_ENV: &str = "SPARSE_CORPUS";

pub fn matrix_dir() -> PathBuf {
    std::env::var_os(MATRIX_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/matrices"
            ))
        })
}

/// The corpus matrix `<name>.mtx.gz`, or `None` when the file is absent, so the benches still
/// run (on the generated matrices) in a checkout without the corpus. A file that is present
/// but unreadable panics: silently benchmarking fewer matrices would hide it.
pub fn corpus_matrix(name: &str) -> Option<Csr<f64>> {
    let path = matrix_dir().join(format!("{name}.mtx.gz"));
    if !path.is_file() {
        eprintln!(
            "skipping {name}: {} not found (set {MATRIX_DIR_ENV})",
            path.display()
        );
        return None;
    }
    let a = sparse_blas::io::read_csr::<f64, u32>(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Some(a)
}

/// The name results are filed under: the matrix and its size, so every line criterion prints
/// and every table row says what was measured.
pub fn label<T: Scalar, I: SpIndex>(name: &str, a: &Csr<T, I>) -> String {
    format!("{name} {}x{} nnz={}", a.rows(), a.cols(), a.nnz())
}

/// Minimal bytes of `C = A*B` with `rhs_cols` columns in B (1 for SpMV) and `beta = 0`: A's
/// arrays, B read once and C written once. Criterion divides it by the time, so it prints the
/// GB/s that the bandwidth floor of DESIGN.md is stated in.
pub fn min_bytes<T: Scalar, I: SpIndex>(a: &Csr<T, I>, rhs_cols: usize) -> Throughput {
    let shape = SparseShape {
        rows: a.rows(),
        cols: a.cols(),
        nnz: a.nnz(),
        value: T::DTYPE,
        index_bytes: std::mem::size_of::<I>(),
    };
    let cost = if rhs_cols == 1 {
        sparse_blas::cost::spmv(shape, T::DTYPE, false)
    } else {
        sparse_blas::cost::spmm(shape, rhs_cols, T::DTYPE, false)
    };
    Throughput::Bytes(cost.bytes as u64)
}

/// The value types both our kernels and sprs multiply natively (no widening).
pub trait BenchValue: Scalar<Acc = Self, Out = Self> + sprs::MulAcc + num_traits::Zero {
    const PRECISION: Precision;
}

impl BenchValue for f64 {
    const PRECISION: Precision = Precision::F64;
}

impl BenchValue for f32 {
    const PRECISION: Precision = Precision::F32;
}

/// `len` varied nonzero values, since timing on zeros can flatter a kernel (DESIGN.md).
pub fn operand<T: Scalar>(len: usize) -> Vec<T> {
    (0..len)
        .map(|i| T::from_f64(1.0 + (i % 8) as f64 / 8.0))
        .collect()
}

/// Panics unless our result and the baseline's agree to well within rounding differences: the
/// timings of a wrong result would mean nothing. (Exact agreement is not expected: the order of
/// additions differs where our kernels split a row.)
pub fn assert_close<T: Scalar>(ours: &[T], theirs: &[T], what: &str) {
    assert_eq!(ours.len(), theirs.len(), "{what}: lengths differ");
    for (i, (o, t)) in ours.iter().zip(theirs).enumerate() {
        let (o, t) = (o.to_f64(), t.to_f64());
        assert!(
            (o - t).abs() <= 1e-3 * o.abs().max(t.abs()).max(1.0),
            "{what}: element {i} is {o} here and {t} in the baseline"
        );
    }
}

/// The same matrix as a sprs view over our arrays. sprs then reads exactly the bytes our kernels
/// read (u32 indices rather than the usize of sprs's default `CsMat`), so the ratio compares the
/// kernels, not the index width.
pub fn sprs_view<T: BenchValue>(a: &Csr<T, u32>) -> CsMatViewI<'_, T, u32> {
    CsMatViewI::new(a.shape(), a.row_ptr(), a.col_idx(), a.values())
}

/// Bytes each buffer of the bandwidth references holds: far beyond any cache of the machine.
const BANDWIDTH_BYTES: usize = 256 << 20;

/// Wrapping sum of a slice in 8 independent lanes, so the loop vectorises and one core issues
/// loads as fast as memory serves them: a read-bandwidth probe, not a computation.
fn read_all(data: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    for chunk in data.chunks_exact(8) {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = lane.wrapping_add(v);
        }
    }
    lanes.iter().fold(0, |a, &b| a ^ b)
}

/// Registers the group `bandwidth`, the ceilings figures are stated against:
/// - `copy-serial` and `copy-rayon`: a 256 MiB `copy_from_slice` on one thread and split over
///   the rayon pool, counted as bytes read plus bytes written. Whether memcpy streams its
///   stores past the cache depends on the size of each thread's chunk against a threshold glibc
///   derives from the L3 size, so the copy figure is only comparable between runs on one machine;
/// - `read-serial` and `read-rayon`: reading 256 MiB, counted as bytes read. SpMV moves almost
///   only reads, and a core's reads are limited by the misses it keeps in flight, so on a few
///   cores this, not the copy, is the ceiling SpMV can approach.
pub fn bench_bandwidth(c: &mut Criterion) {
    let len = BANDWIDTH_BYTES / std::mem::size_of::<u64>();
    // Written, not zero-allocated: untouched pages all map the one zero page, and reading it
    // would measure the cache instead of memory.
    let src: Vec<u64> = (0..len as u64).collect();
    let mut dst = src.clone();
    let chunk = len.div_ceil(rayon::current_num_threads());
    let mut group = c.benchmark_group("bandwidth");
    group.throughput(Throughput::Bytes(2 * BANDWIDTH_BYTES as u64));
    group.bench_function("copy-serial", |b| {
        b.iter(|| black_box(&mut dst).copy_from_slice(&src))
    });
    group.bench_function("copy-rayon", |b| {
        b.iter(|| parallel_copy(black_box(&mut dst), &src))
    });
    group.throughput(Throughput::Bytes(BANDWIDTH_BYTES as u64));
    group.bench_function("read-serial", |b| b.iter(|| read_all(black_box(&src))));
    group.bench_function("read-rayon", |b| {
        b.iter(|| {
            black_box(&src)
                .par_chunks(chunk)
                .map(read_all)
                .reduce(|| 0, |a, b| a ^ b)
        })
    });
    group.finish();
}

/// `dst.copy_from_slice(src)` split into one chunk per rayon thread.
fn parallel_copy(dst: &mut [u64], src: &[u64]) {
    let chunk = src.len().div_ceil(rayon::current_num_threads()).max(1);
    dst.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// Host copy bandwidth in bytes per second, counting bytes read plus bytes written: the median
/// of `copies` copies of a `bytes` buffer split over the rayon pool (after one untimed copy).
/// The same measurement as `copy-rayon` of [`bench_bandwidth`], for callers outside criterion.
pub fn host_copy_bandwidth(bytes: usize, copies: usize) -> f64 {
    let len = (bytes / std::mem::size_of::<u64>()).max(1);
    // Written, not zero-allocated, for the reason given in `bench_bandwidth`.
    let src: Vec<u64> = (0..len as u64).collect();
    let mut dst = src.clone();
    parallel_copy(&mut dst, &src);
    let mut times: Vec<f64> = (0..copies.max(1))
        .map(|_| {
            let start = std::time::Instant::now();
            parallel_copy(black_box(&mut dst), &src);
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    2.0 * (len * std::mem::size_of::<u64>()) as f64 / times[times.len() / 2].max(1e-9)
}
