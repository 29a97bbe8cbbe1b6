//! Planning on the GPU: how long the first plan of each kernel family takes with an empty kernel
//! cache (NVRTC compiles what it launches), how long it takes with the cache filled (modules
//! loaded from disk, per module), where planning SpMV on a large 3D Poisson matrix spends its
//! time (host, transfer, device analysis, kernels), and what `update_values` costs against the
//! raw upload of the values. Prints markdown tables; needs a GPU.
//!
//! `plantime [--side N]` (the Poisson grid side of the large matrix, default 156: 26.4M entries).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use sparse_blas::{
    f16, generate, Algorithm, Csr, CsrRef, CudaBackend, CusparseBackend, DType, DenseRef, Executor,
    Format, OpKind, PlanInfo, Precision, Result, Scalar, SddmmDesc, SpmmDesc, SpmvDesc,
    KERNEL_CACHE_DIR_ENV,
};

/// A plan whose first making is timed.
#[derive(Clone, Copy)]
enum Case {
    Spmv(Precision, Algorithm),
    Spmm(Format, Precision, Algorithm),
    Sddmm(Format, Precision, Algorithm),
    CusparseSpmv(Precision),
}

const CASES: &[Case] = &[
    Case::Spmv(Precision::F64, Algorithm::Auto),
    Case::Spmv(Precision::F32, Algorithm::MergePath),
    Case::Spmv(Precision::F32, Algorithm::VectorSplit),
    Case::Spmm(Format::Csr, Precision::F32, Algorithm::Vector),
    Case::Spmm(Format::Csr, Precision::F32, Algorithm::RodeDeterministic),
    Case::Sddmm(Format::Csr, Precision::F32, Algorithm::Vector),
    Case::Sddmm(Format::Csr, Precision::F32, Algorithm::Rode),
    Case::Spmm(Format::MeBcrs, Precision::F16, Algorithm::FlashSparse),
    Case::Sddmm(Format::MeBcrs, Precision::F16, Algorithm::FlashSparse),
    Case::Spmm(Format::MeBcrs, Precision::TF32, Algorithm::FlashSparse),
    Case::CusparseSpmv(Precision::F64),
];

impl Case {
    fn name(self) -> String {
        match self {
            Case::Spmv(p, a) => format!("spmv csr {p} {a}"),
            Case::Spmm(f, p, a) => format!("spmm {f} {p} {a}"),
            Case::Sddmm(f, p, a) => format!("sddmm {f} {p} {a}"),
            Case::CusparseSpmv(p) => format!("spmv csr {p} cusparse"),
        }
    }

    fn precision(self) -> Precision {
        match self {
            Case::Spmv(p, _)
            | Case::Spmm(_, p, _)
            | Case::Sddmm(_, p, _)
            | Case::CusparseSpmv(p) => p,
        }
    }

    /// Makes the plan on a new backend (so its modules come from the disk cache or NVRTC, not
    /// from an earlier backend of this process) and returns its description, the wall time and
    /// the modules it loaded.
    fn plan(self, small: &Matrices) -> Result<(PlanInfo, Duration, usize)> {
        let started = Instant::now();
        let cuda = CudaBackend::new(0)?;
        let info = match self.precision().storage {
            DType::F64 => plan_on(&cuda, self, small.f64.as_ref()),
            DType::F16 => plan_on(&cuda, self, small.f16.as_ref()),
            _ => plan_on(&cuda, self, small.f32.as_ref()),
        }?;
        Ok((info, started.elapsed(), cuda.loaded_kernels()))
    }
}

fn plan_on<T: Scalar>(cuda: &CudaBackend, case: Case, m: CsrRef<'_, T>) -> Result<PlanInfo> {
    Ok(match case {
        Case::Spmv(p, a) => cuda
            .plan_spmv(m, &SpmvDesc::new(p).algorithm(a))?
            .info()
            .clone(),
        Case::Spmm(f, p, a) => cuda
            .plan_spmm(m, &SpmmDesc::new(p).format(f).algorithm(a))?
            .info()
            .clone(),
        Case::Sddmm(f, p, a) => cuda
            .plan_sddmm(m, &SddmmDesc::new(p).format(f).algorithm(a))?
            .info()
            .clone(),
        Case::CusparseSpmv(p) => CusparseBackend::sharing(cuda)?
            .plan_spmv(m, &SpmvDesc::new(p))?
            .info()
            .clone(),
    })
}

/// The small matrix in each storage type the cases use.
struct Matrices {
    f64: Csr<f64>,
    f32: Csr<f32>,
    f16: Csr<f16>,
}

impl Matrices {
    fn poisson(side: usize) -> Result<Self> {
        Ok(Matrices {
            f64: generate::poisson3d(side)?,
            f32: generate::poisson3d(side)?,
            f16: generate::poisson3d(side)?,
        })
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Cold (an empty cache per case) and warm (the cache filled) first plans.
fn first_plans(small: &Matrices) -> Result<()> {
    let root = std::env::temp_dir().join(format!("plantime-{}", std::process::id()));
    println!("## First plan of a process, small Poisson 3D (32^3)\n");
    println!("| plan | cold: wall ms | cold: kernels ms | warm: wall ms | warm: kernels ms | modules | warm ms per module |");
    println!("|---|--:|--:|--:|--:|--:|--:|");
    for (i, case) in CASES.iter().enumerate() {
        let cache: PathBuf = root.join(i.to_string());
        std::env::set_var(KERNEL_CACHE_DIR_ENV, &cache);
        let (cold, cold_wall, modules) = case.plan(small)?;
        let (warm, warm_wall, _) = case.plan(small)?;
        println!(
            "| {} | {:.0} | {:.0} | {:.1} | {:.2} | {modules} | {:.3} |",
            case.name(),
            ms(cold_wall),
            ms(cold.plan_time.kernels),
            ms(warm_wall),
            ms(warm.plan_time.kernels),
            ms(warm.plan_time.kernels) / modules.max(1) as f64
        );
    }
    let _ = std::fs::remove_dir_all(root);
    Ok(())
}

/// The median of three timings of `f`, each waiting for the device.
fn median(cuda: &CudaBackend, mut f: impl FnMut() -> Result<()>) -> Result<Duration> {
    let mut times = (0..3)
        .map(|_| {
            let started = Instant::now();
            f()?;
            cuda.synchronize()?;
            Ok(started.elapsed())
        })
        .collect::<Result<Vec<_>>>()?;
    times.sort();
    Ok(times[1])
}

/// What `update_values` costs against copying the values alone: CSR (values in CSR order,
/// copied in place) and ME-BCRS (scattered into the plan's order on the device).
fn updates(side: usize) -> Result<()> {
    let cuda = CudaBackend::new(0)?;
    let f32m: Csr<f32> = generate::poisson3d(side)?;
    let f16m: Csr<f16> = generate::poisson3d(side)?;
    println!("\n## update_values on Poisson 3D {side}^3 against the raw upload of the values (median of 3)\n");
    println!("| plan | values MB | upload ms | update ms | update / upload |");
    println!("|---|--:|--:|--:|--:|");
    let mut spmv = cuda.plan_spmv(f32m.as_ref(), &SpmvDesc::new(Precision::F32))?;
    update_row(&cuda, "spmv csr f32", f32m.values(), |v| {
        spmv.update_values(v)
    })?;
    let desc = SpmmDesc::new(Precision::F16).format(Format::MeBcrs);
    let mut spmm = cuda.plan_spmm(f16m.as_ref(), &desc)?;
    update_row(&cuda, "spmm me-bcrs f16", f16m.values(), |v| {
        spmm.update_values(v)
    })?;
    Ok(())
}

fn update_row<T: Scalar>(
    cuda: &CudaBackend,
    name: &str,
    values: &[T],
    mut update: impl FnMut(DenseRef<'_, T>) -> Result<()>,
) -> Result<()> {
    let upload = median(cuda, || cuda.upload(DenseRef::vector(values)).map(drop))?;
    let updated = median(cuda, || update(DenseRef::vector(values)))?;
    println!(
        "| {name} | {:.1} | {:.2} | {:.2} | {:.2} |",
        std::mem::size_of_val(values) as f64 / 1e6,
        ms(upload),
        ms(updated),
        updated.as_secs_f64() / upload.as_secs_f64()
    );
    Ok(())
}

/// Planning SpMV on a large matrix, `auto` and each algorithm of the table in f64 and f32, the
/// median of three plans.
fn large_spmv(side: usize) -> Result<()> {
    let cuda = CudaBackend::new(0)?;
    let f64m: Csr<f64> = generate::poisson3d(side)?;
    let f32m: Csr<f32> = generate::poisson3d(side)?;
    println!(
        "\n## Planning SpMV on Poisson 3D {side}^3 ({} rows, {} entries), median of 3\n",
        f64m.rows(),
        f64m.nnz()
    );
    println!("| precision | algorithm (chosen) | total ms | host ms | transfer ms | device ms | kernels ms |");
    println!("|---|---|--:|--:|--:|--:|--:|");
    for precision in [Precision::F64, Precision::F32] {
        for algorithm in conformance::algorithms(&cuda, OpKind::Spmv, Format::Csr, precision) {
            match precision {
                Precision::F64 => large_row(&cuda, f64m.as_ref(), precision, algorithm)?,
                _ => large_row(&cuda, f32m.as_ref(), precision, algorithm)?,
            }
        }
    }
    Ok(())
}

fn large_row<T: Scalar>(
    cuda: &CudaBackend,
    a: CsrRef<'_, T>,
    precision: Precision,
    algorithm: Algorithm,
) -> Result<()> {
    let desc = SpmvDesc::new(precision).algorithm(algorithm);
    // The kernels are compiled or loaded by the first plan; the timed ones find them loaded.
    drop(cuda.plan_spmv(a, &desc)?);
    let mut runs: Vec<(Duration, PlanInfo)> = (0..3)
        .map(|_| {
            let started = Instant::now();
            let plan = cuda.plan_spmv(a, &desc)?;
            cuda.synchronize()?;
            Ok((started.elapsed(), plan.info().clone()))
        })
        .collect::<Result<_>>()?;
    runs.sort_by_key(|(d, _)| *d);
    let (total, info) = &runs[1];
    let t = info.plan_time;
    println!(
        "| {precision} | {algorithm} ({}) | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} |",
        info.algorithm,
        ms(*total),
        ms(t.host),
        ms(t.transfer),
        ms(t.device),
        ms(t.kernels)
    );
    Ok(())
}

fn main() {
    let mut side = 156;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--side", Some(v)) => side = v,
            _ => {
                eprintln!("usage: plantime [--side N]");
                std::process::exit(2);
            }
        }
    }
    let outcome = Matrices::poisson(32)
        .and_then(|small| first_plans(&small))
        .and_then(|()| large_spmv(side))
        .and_then(|()| updates(side));
    if let Err(e) = outcome {
        eprintln!("plantime: {e}");
        std::process::exit(1);
    }
}
