//! intbench: the integer path on one GPU, every kernel in one process on the same matrices.
//!
//! SpMM (N = 128, 256, 512) and SDDMM (K = 128, 256, 512) on DLMC-like matrices: V = 8
//! vector-sparse 2048 x 2048 and 8192 x 8192 at 70, 80, 90 and 95% sparsity, and the corpus's
//! `dlmc_*` layers. Kernels: Magicube in i8 (SR-BCRS, 8 x 1 vectors) and in f32-i8 (f32 in and
//! out, B quantized on the device each run), FlashSparse in f16 (ME-BCRS), cuSPARSE's CSR SpMM
//! in f16, cuSPARSE's Blocked-ELL SpMM in i8 (the fastest of 8 x 8, 16 x 16 and 32 x 32 blocks
//! that tile the matrix, B column-major; the CSV notes the block and the values stored per
//! entry), and cuBLAS's
//! dense i8 GEMM on A made dense (where sparsity stops paying); and Magicube in the precisions
//! with widths (`i4`, `l8-r4` ... `l16-r16`), against its i8. Each time
//! is the median of 15 samples of 10 calls after 10 warm-up calls (operands warm in L2 when
//! they fit), by CUDA events on the one stream every backend shares.
//!
//! Usage: `intbench OUT_DIR [--quick] [--corpus DIR]`; writes OUT_DIR/intbench.csv and
//! OUT_DIR/intbench.md (the device's s8 and s4 MMA rates, the table, the geometric-mean ratios
//! and the dense crossover per N). `--quick`: the 2048 matrices and N = K = 128 only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use conformance::corpus::{self, Loaded};
use sparse_blas::magicube::mma_rates;
use sparse_blas::{
    f16, generate, Algorithm, BlockShape, Csr, CudaBackend, CusparseBackend, Dense, DeviceTimer,
    Error, Executor, Format, Layout, Precision, Result, Scalar, SddmmDesc, SpmmDesc,
};

const WARMUP: usize = 10;
const SAMPLES: usize = 15;
const BATCH: usize = 10;
/// Largest dense A (bytes of i8) the GEMM baseline makes.
const DENSE_LIMIT: usize = 1 << 28;

/// One timed kernel: its name and time, or why it did not run, and what it ran with.
struct Timed {
    kernel: &'static str,
    time: std::result::Result<Duration, String>,
    note: String,
}

struct Line {
    matrix: String,
    rows: usize,
    cols: usize,
    nnz: usize,
    op: &'static str,
    width: usize,
    times: Vec<Timed>,
}

impl Line {
    fn time(&self, kernel: &str) -> Option<f64> {
        self.times
            .iter()
            .find(|t| t.kernel == kernel)
            .and_then(|t| t.time.as_ref().ok())
            .map(|d| d.as_secs_f64() * 1e6)
    }

    fn sparsity(&self) -> f64 {
        1.0 - self.nnz as f64 / (self.rows as f64 * self.cols as f64).max(1.0)
    }
}

/// The median device time of one call of `call`.
fn median(timer: &DeviceTimer, mut call: impl FnMut() -> Result<()>) -> Result<Duration> {
    for _ in 0..WARMUP {
        call()?;
    }
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        timer.start()?;
        for _ in 0..BATCH {
            call()?;
        }
        samples.push(timer.stop()? / BATCH as u32);
    }
    samples.sort();
    Ok(samples[SAMPLES / 2])
}

fn record(kernel: &'static str, time: Result<Duration>) -> Timed {
    noted(kernel, time.map(|t| (t, String::new())))
}

fn noted(kernel: &'static str, timed: Result<(Duration, String)>) -> Timed {
    let (time, note) = match timed {
        Ok((t, note)) => (Ok(t), note),
        Err(e) => (Err(e.to_string()), String::new()),
    };
    Timed { kernel, time, note }
}

/// A `rows x cols` dense operand with small integer values (exact in every type used).
fn dense<T: Scalar>(rows: usize, cols: usize, layout: Layout) -> Dense<T> {
    Dense::from_fn(rows, cols, layout, |i, j| {
        T::from_f64(((i * 7 + j * 3) % 7) as f64 - 3.0)
    })
}

/// `a` with values in -3..=3.
fn integer_valued(a: &Csr<f64>) -> Csr<f64> {
    let mut a = a.clone();
    for (k, v) in a.values_mut().iter_mut().enumerate() {
        *v = (k % 7) as f64 - 3.0;
    }
    a
}

struct Bench {
    cuda: CudaBackend,
    vendor: CusparseBackend,
    timer: DeviceTimer,
}

impl Bench {
    fn spmm(&self, a: &Csr<f64>, n: usize) -> Vec<Timed> {
        let (rows, cols) = a.shape();
        let i8s = integer_valued(a).cast::<i8>();
        let f16s = a.cast::<f16>();
        let f32s = a.cast::<f32>();
        let (cuda, timer) = (&self.cuda, &self.timer);
        let magicube = || -> Result<Duration> {
            let desc = SpmmDesc::new(Precision::I8)
                .format(Format::SrBcrs)
                .block(BlockShape::new(8, 32))
                .max_width(n);
            let mut plan = cuda.plan_spmm(i8s.as_ref(), &desc)?;
            let b = cuda.upload(dense::<i8>(cols, n, Layout::RowMajor).as_ref())?;
            let mut c = cuda.zeros::<i32>(rows, n, Layout::RowMajor)?;
            median(timer, || plan.run(1, b.as_ref(), 0, c.as_mut()))
        };
        // The precisions with widths: A's values and B's within each side's width.
        let mode = |precision: Precision, algorithm: Algorithm, kernel: &'static str| -> Timed {
            let desc = SpmmDesc::new(precision)
                .format(Format::SrBcrs)
                .algorithm(algorithm)
                .block(BlockShape::new(8, 32))
                .max_width(n);
            let time = match precision.storage {
                sparse_blas::DType::I8 => mode_time::<i8>(cuda, timer, a, &desc),
                _ => mode_time::<i16>(cuda, timer, a, &desc),
            };
            record(kernel, time)
        };
        let quantized = || -> Result<Duration> {
            let desc = SpmmDesc::new(Precision::F32_VIA_I8)
                .format(Format::SrBcrs)
                .max_width(n);
            let mut plan = cuda.plan_spmm(f32s.as_ref(), &desc)?;
            let b = cuda.upload(dense::<f32>(cols, n, Layout::RowMajor).as_ref())?;
            let mut c = cuda.zeros::<f32>(rows, n, Layout::RowMajor)?;
            median(timer, || plan.run(1.0, b.as_ref(), 0.0, c.as_mut()))
        };
        let f16_plan = |backend: &dyn Fn(&SpmmDesc) -> Result<Duration>, format| {
            backend(
                &SpmmDesc::new(Precision::F16)
                    .format(format)
                    .algorithm(Algorithm::Auto)
                    .max_width(n),
            )
        };
        let flashsparse = |desc: &SpmmDesc| -> Result<Duration> {
            let mut plan = cuda.plan_spmm(f16s.as_ref(), desc)?;
            let b = cuda.upload(dense::<f16>(cols, n, Layout::RowMajor).as_ref())?;
            let mut c = cuda.zeros::<f16>(rows, n, Layout::RowMajor)?;
            median(timer, || plan.run(1.0, b.as_ref(), 0.0, c.as_mut()))
        };
        let cusparse = |desc: &SpmmDesc| -> Result<Duration> {
            let mut plan = self.vendor.plan_spmm(f16s.as_ref(), desc)?;
            let b = cuda.upload(dense::<f16>(cols, n, Layout::RowMajor).as_ref())?;
            let mut c = cuda.zeros::<f16>(rows, n, Layout::RowMajor)?;
            median(timer, || plan.run(1.0, b.as_ref(), 0.0, c.as_mut()))
        };
        // The fastest block size that tiles the matrix, with the block and the values stored per
        // entry (padding included) as its note. B column-major: cuSPARSE's i8 Blocked-ELL takes
        // no other.
        let blocked_ell = || -> Result<(Duration, String)> {
            let b = cuda.upload(dense::<i8>(cols, n, Layout::ColMajor).as_ref())?;
            let mut c = cuda.zeros::<i32>(rows, n, Layout::RowMajor)?;
            let mut best: Option<(Duration, String)> = None;
            let mut last_error = None;
            for block in [8, 16, 32] {
                let timed = self
                    .vendor
                    .blocked_ell_spmm(i8s.as_ref(), block)
                    .and_then(|mut p| {
                        let stored = p.stored_values() as f64 / i8s.nnz().max(1) as f64;
                        let t = median(timer, || p.run(1, b.as_ref(), 0, c.as_mut()))?;
                        Ok((
                            t,
                            format!("{block}x{block} blocks; {stored:.2} values stored per entry"),
                        ))
                    });
                match timed {
                    Ok(t) if best.as_ref().is_none_or(|b| t.0 < b.0) => best = Some(t),
                    Ok(_) => {}
                    Err(e) => last_error = Some(e),
                }
            }
            best.ok_or_else(|| last_error.unwrap_or_else(|| Error::invalid("no block size")))
        };
        let gemm = || -> Result<Duration> {
            if rows * cols > DENSE_LIMIT {
                return Err(Error::invalid("dense A past the limit"));
            }
            // cuBLAS's fast integer GEMM is "TN" in its column-major terms: C row-major as
            // C^T = B^T A^T with B column-major and A row-major; A's and B's leading dimensions
            // padded to 4 (N, C's, is a multiple of 4 here).
            let ld = cols.next_multiple_of(4);
            let mut dense_a = vec![0i8; rows * ld];
            for i in 0..rows {
                let (cs, vs) = i8s.as_ref().row(i);
                for (&j, &v) in cs.iter().zip(vs) {
                    dense_a[i * ld + j as usize] = v;
                }
            }
            let a_host = Dense::from_vec(dense_a, rows, cols, ld, Layout::RowMajor)?;
            let b_host = Dense::from_vec(vec![1i8; ld * n], cols, n, ld, Layout::ColMajor)?;
            let (ad, bd) = (cuda.upload(a_host.as_ref())?, cuda.upload(b_host.as_ref())?);
            let mut c = cuda.zeros::<i32>(rows, n, Layout::RowMajor)?;
            median(timer, || {
                self.vendor
                    .gemm::<i8>(1, ad.as_ref(), bd.as_ref(), 0, c.as_mut())
            })
        };
        let mut times = vec![
            record("magicube i8", magicube()),
            record("magicube f32-i8", quantized()),
            record("flashsparse f16", f16_plan(&flashsparse, Format::MeBcrs)),
            record("cusparse f16", f16_plan(&cusparse, Format::Csr)),
            noted("cusparse blocked-ell i8", blocked_ell()),
            record("cublas i8 dense", gemm()),
        ];
        times.extend(MODE_KERNELS.iter().map(|&(p, alg, k)| mode(p, alg, k)));
        times
    }

    fn sddmm(&self, s: &Csr<f64>, k: usize) -> Vec<Timed> {
        let (rows, cols) = s.shape();
        let i8s = integer_valued(s).cast::<i8>();
        let f16s = s.cast::<f16>();
        let (cuda, timer) = (&self.cuda, &self.timer);
        let magicube = || -> Result<Duration> {
            let desc = SddmmDesc::new(Precision::I8)
                .format(Format::SrBcrs)
                .block(BlockShape::new(8, 32))
                .max_width(k);
            let mut plan = cuda.plan_sddmm(i8s.as_ref(), &desc)?;
            let slots = plan.value_order().map_or(s.nnz(), |o| o.len());
            let x = cuda.upload(dense::<i8>(rows, k, Layout::RowMajor).as_ref())?;
            let y = cuda.upload(dense::<i8>(cols, k, Layout::RowMajor).as_ref())?;
            let mut c = cuda.zeros::<i32>(slots, 1, Layout::ColMajor)?;
            median(timer, || plan.run(1, x.as_ref(), y.as_ref(), 0, c.as_mut()))
        };
        let flashsparse = || -> Result<Duration> {
            let desc = SddmmDesc::new(Precision::F16)
                .format(Format::MeBcrs)
                .max_width(k);
            let mut plan = cuda.plan_sddmm(f16s.as_ref(), &desc)?;
            let slots = plan.value_order().map_or(s.nnz(), |o| o.len());
            let x = cuda.upload(dense::<f16>(rows, k, Layout::RowMajor).as_ref())?;
            let y = cuda.upload(dense::<f16>(cols, k, Layout::RowMajor).as_ref())?;
            let mut c = cuda.zeros::<f16>(slots, 1, Layout::ColMajor)?;
            median(timer, || {
                plan.run(1.0, x.as_ref(), y.as_ref(), 0.0, c.as_mut())
            })
        };
        vec![
            record("magicube i8", magicube()),
            record("flashsparse f16", flashsparse()),
        ]
    }
}

/// The matrices: generated vector-sparse layers, then the corpus's `dlmc_*` files.
fn matrices(quick: bool, corpus_dir: &Path) -> Vec<(String, Csr<f64>)> {
    let mut list = Vec::new();
    let sizes: &[usize] = if quick { &[2048] } else { &[2048, 8192] };
    for &n in sizes {
        for sparsity in [0.70, 0.80, 0.90, 0.95] {
            let seed = (n as u64) ^ (sparsity * 100.0) as u64;
            match generate::vector_sparse(n, n, 8, 1.0 - sparsity, seed) {
                Ok(a) => list.push((format!("vectors8-{n}-s{:.0}", sparsity * 100.0), a)),
                Err(e) => eprintln!("intbench: vectors {n} {sparsity}: {e}"),
            }
        }
    }
    let files = corpus::files(corpus_dir).unwrap_or_default();
    for path in files {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !name.starts_with("dlmc_") {
            continue;
        }
        match corpus::load(&path, None) {
            Ok(Loaded::Matrix(a)) => list.push((name.trim_end_matches(".mtx.gz").to_string(), a)),
            Ok(Loaded::TooLarge(_)) => {}
            Err(e) => eprintln!("intbench: {name}: {e}"),
        }
    }
    list
}

const KERNELS: [&str; 6] = [
    "magicube i8",
    "magicube f32-i8",
    "flashsparse f16",
    "cusparse f16",
    "cusparse blocked-ell i8",
    "cublas i8 dense",
];

/// The SpMM of the integer precisions with widths, timed beside i8: by `magicube`, and the
/// 4-bit ones by `magicube-s4` too (s4 MMAs, which sm_90 runs at a fraction of the s8 rate).
const MODE_KERNELS: [(Precision, Algorithm, &str); 8] = [
    (Precision::I4, Algorithm::Magicube, "magicube i4"),
    (Precision::L8_R4, Algorithm::Magicube, "magicube l8-r4"),
    (Precision::L12_R4, Algorithm::Magicube, "magicube l12-r4"),
    (Precision::L16_R4, Algorithm::Magicube, "magicube l16-r4"),
    (Precision::L16_R8, Algorithm::Magicube, "magicube l16-r8"),
    (Precision::L16_R16, Algorithm::Magicube, "magicube l16-r16"),
    (Precision::I4, Algorithm::MagicubeS4, "magicube-s4 i4"),
    (Precision::L8_R4, Algorithm::MagicubeS4, "magicube-s4 l8-r4"),
];

/// The median time of a Magicube SpMM in `desc`'s precision, A's values small integers and B's
/// spread over the right operand's width (a 16-bit B needs its high byte).
fn mode_time<T: Scalar<Acc = i32, Out = i32>>(
    cuda: &CudaBackend,
    timer: &DeviceTimer,
    a: &Csr<f64>,
    desc: &SpmmDesc,
) -> Result<Duration> {
    let (rows, cols) = a.shape();
    let n = desc.reserved_width();
    let a = integer_valued(a).cast::<T>();
    let mut plan = cuda.plan_spmm(a.as_ref(), desc)?;
    let step = f64::from(desc.precision.value_range(true).1) / 3.0;
    let b = Dense::<T>::from_fn(cols, n, Layout::RowMajor, |i, j| {
        T::from_f64((((i * 7 + j * 3) % 7) as f64 - 3.0) * step)
    });
    let b = cuda.upload(b.as_ref())?;
    let mut c = cuda.zeros::<i32>(rows, n, Layout::RowMajor)?;
    median(timer, || plan.run(1, b.as_ref(), 0, c.as_mut()))
}

fn report(lines: &[Line], device: &str, rates: &str) -> (String, String) {
    let mut csv = String::from("matrix,rows,cols,nnz,sparsity,op,width,kernel,us,error,note\n");
    for l in lines {
        for t in &l.times {
            let (us, err) = match &t.time {
                Ok(d) => (format!("{:.3}", d.as_secs_f64() * 1e6), String::new()),
                Err(e) => (String::new(), e.replace([',', '\n'], ";")),
            };
            let _ = writeln!(
                csv,
                "{},{},{},{},{:.4},{},{},{},{us},{err},{}",
                l.matrix,
                l.rows,
                l.cols,
                l.nnz,
                l.sparsity(),
                l.op,
                l.width,
                t.kernel,
                t.note.replace(',', ";")
            );
        }
    }
    let mut md = format!(
        "# intbench on {device}\n\nInteger MMA rates: {rates}.\n\nTimes in µs (median device \
         time per call).\n\n"
    );
    md.push_str(
        "| matrix | sparsity | op | N/K | magicube i8 | f32-i8 | flashsparse f16 | cusparse f16 \
         | cusparse blocked-ell i8 | cublas i8 dense | vs flashsparse | vs cusparse | \
         vs blocked-ell | vs dense |\n",
    );
    md.push_str("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => format!("{:.2}x", b / a),
        _ => "-".to_string(),
    };
    for l in lines {
        let m = l.time("magicube i8");
        let _ = writeln!(
            md,
            "| {} | {:.1}% | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            l.matrix,
            l.sparsity() * 100.0,
            l.op,
            l.width,
            cell(m),
            cell(l.time(KERNELS[1])),
            cell(l.time(KERNELS[2])),
            cell(l.time(KERNELS[3])),
            cell(l.time(KERNELS[4])),
            cell(l.time(KERNELS[5])),
            ratio(m, l.time(KERNELS[2])),
            ratio(m, l.time(KERNELS[3])),
            ratio(m, l.time(KERNELS[4])),
            ratio(m, l.time(KERNELS[5])),
        );
    }
    md.push_str("\n## Geometric means of the speed-ups of magicube i8\n\n");
    for op in ["spmm", "sddmm"] {
        for other in &KERNELS[1..] {
            let logs: Vec<f64> = lines
                .iter()
                .filter(|l| l.op == op)
                .filter_map(|l| Some((l.time(other)? / l.time("magicube i8")?).ln()))
                .collect();
            if !logs.is_empty() {
                let gm = (logs.iter().sum::<f64>() / logs.len() as f64).exp();
                let _ = writeln!(md, "- {op}: {gm:.2}x over {other} ({} cases)", logs.len());
            }
        }
    }
    md.push_str(
        "\n## The precisions with widths against i8 (SpMM time over magicube i8's, geomean)\n\n",
    );
    for (_, _, kernel) in MODE_KERNELS {
        let logs: Vec<f64> = lines
            .iter()
            .filter(|l| l.op == "spmm")
            .filter_map(|l| Some((l.time(kernel)? / l.time("magicube i8")?).ln()))
            .collect();
        if !logs.is_empty() {
            let gm = (logs.iter().sum::<f64>() / logs.len() as f64).exp();
            let _ = writeln!(md, "- {kernel}: {gm:.2}x the time ({} cases)", logs.len());
        }
    }
    md.push_str("\n## Dense crossover (generated matrices)\n\n");
    let generated: Vec<&Line> = lines
        .iter()
        .filter(|l| l.op == "spmm" && l.matrix.starts_with("vectors8"))
        .collect();
    let mut groups: Vec<(usize, usize)> = generated.iter().map(|l| (l.rows, l.width)).collect();
    groups.sort();
    groups.dedup();
    for (rows, n) in groups {
        let mut cases: Vec<&&Line> = generated
            .iter()
            .filter(|l| l.rows == rows && l.width == n)
            .collect();
        cases.sort_by(|a, b| b.sparsity().total_cmp(&a.sparsity()));
        // The lowest sparsity from which the sparse kernel wins at every sparsity above it.
        let from = cases
            .iter()
            .take_while(|l| {
                matches!((l.time("magicube i8"), l.time(KERNELS[5])), (Some(m), Some(d)) if m < d)
            })
            .last();
        let _ = match from {
            Some(l) => writeln!(
                md,
                "- {rows}x{rows}, N = {n}: magicube i8 beats cuBLAS's dense i8 GEMM from {:.0}% sparsity up",
                l.sparsity() * 100.0
            ),
            None => writeln!(
                md,
                "- {rows}x{rows}, N = {n}: cuBLAS's dense i8 GEMM is faster at the highest sparsity measured"
            ),
        };
    }
    (csv, md)
}

fn run(out: &Path, quick: bool, corpus_dir: &Path) -> Result<()> {
    let cuda = CudaBackend::new(0)?;
    let bench = Bench {
        vendor: CusparseBackend::sharing(&cuda)?,
        timer: DeviceTimer::new(&cuda)?,
        cuda,
    };
    let device = bench.cuda.description();
    let rates = match mma_rates(&bench.cuda) {
        Ok(r) => format!(
            "s8 m16n8k32 {:.0} TOPS, s4 m16n8k64 {:.0} TOPS (s4/s8 = {:.2})",
            r.s8 / 1e12,
            r.s4 / 1e12,
            r.s4 / r.s8
        ),
        Err(e) => format!("not measured ({e})"),
    };
    eprintln!("intbench: {rates}");
    let widths: &[usize] = if quick { &[128] } else { &[128, 256, 512] };
    let mut lines = Vec::new();
    for (name, a) in matrices(quick, corpus_dir) {
        eprintln!(
            "intbench: {name} ({}x{}, {} entries)",
            a.rows(),
            a.cols(),
            a.nnz()
        );
        for &w in widths {
            for (op, times) in [("spmm", bench.spmm(&a, w)), ("sddmm", bench.sddmm(&a, w))] {
                lines.push(Line {
                    matrix: name.clone(),
                    rows: a.rows(),
                    cols: a.cols(),
                    nnz: a.nnz(),
                    op,
                    width: w,
                    times,
                });
            }
        }
    }
    let (csv, md) = report(&lines, &device, &rates);
    std::fs::create_dir_all(out).map_err(|e| Error::io(Some(out.to_path_buf()), e))?;
    for (file, text) in [("intbench.csv", csv), ("intbench.md", md)] {
        let path = out.join(file);
        std::fs::write(&path, text).map_err(|e| Error::io(Some(path), e))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut out, mut quick, mut corpus_dir) = (None, false, corpus::default_dir());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--corpus" => match args.next() {
                Some(dir) => corpus_dir = PathBuf::from(dir),
                None => {
                    eprintln!("intbench: --corpus needs a directory");
                    return ExitCode::from(2);
                }
            },
            other if out.is_none() && !other.starts_with("--") => out = Some(PathBuf::from(other)),
            other => {
                eprintln!("intbench: unexpected argument '{other}' (usage: intbench OUT_DIR [--quick] [--corpus DIR])");
                return ExitCode::from(2);
            }
        }
    }
    let Some(out) = out else {
        eprintln!("usage: intbench OUT_DIR [--quick] [--corpus DIR]");
        return ExitCode::from(2);
    };
    match run(&out, quick, &corpus_dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("intbench: {e}");
            ExitCode::FAILURE
        }
    }
}
