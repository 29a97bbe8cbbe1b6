//! spbench: every kernel of sparse-blas on every matrix, each timing beside its check against
//! the oracle, against cuSPARSE (GPU) and sprs and faer (CPU). `spbench --help` lists the
//! flags; docs/benchmarks.md says how to run it on a GPU machine and how to read the output.

mod args;
mod cases;
mod check;
mod kernels;
mod ops;
mod progress;
mod report;
mod svg;
mod timing;

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use conformance::bound::round_to_tf32;
use sparse_blas::cost::{self, Cost, SparseShape};
use sparse_blas::{
    bf16, f16, Backend, Compute, CpuBackend, Csr, CudaBackend, CusparseBackend, DType, DeviceTimer,
    Error, Executor, Precision, Result,
};

use args::{Args, BackendSet, Config};
use cases::{Matrix, Source};
use check::Oracle;
use kernels::{Extras, Kernel};
use ops::{Baselines, Case, Op};
use progress::Progress;
use report::{MatrixLine, Report, Row, RunInfo, Status};
use timing::Clock;

fn main() -> ExitCode {
    let args = Args::parse();
    match args.resolve().and_then(run) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("spbench: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the benchmark; `Ok(false)` when a kernel failed its check or broke.
fn run(config: Config) -> Result<bool> {
    let out = config.out.clone();
    std::fs::create_dir_all(&out).map_err(|e| Error::io(Some(out.clone()), e))?;
    let mut progress = Progress::new();
    let sources = sources(&config, &mut progress)?;
    let mut bench = Bench::new(config, &mut progress)?;
    for (i, source) in sources.iter().enumerate() {
        bench.matrix(i + 1, sources.len(), source, &mut progress)?;
    }
    progress.clear();

    let plots = svg::write_plots(&out, &bench.report.entries, &bench.config.ops)?;
    let info = bench.run_info(&plots);
    let summary = bench
        .report
        .summary(&info, &bench.config.ops, &bench.config.precisions);
    let path = out.join("summary.md");
    std::fs::write(&path, &summary).map_err(|e| Error::io(Some(path.clone()), e))?;
    println!("{summary}");
    eprintln!(
        "spbench: wrote {} (results.csv, summary.md and {} plots)",
        out.display(),
        plots.len()
    );
    Ok(bench.report.problems.is_empty())
}

/// A run in progress: the backends, their clocks and ceilings, and the report.
struct Bench {
    config: Config,
    backends: Vec<Backend>,
    host: Clock,
    device: Option<Clock>,
    host_bandwidth: f64,
    device_bandwidth: f64,
    report: Report,
    /// What the summary's header says about the GPU when it was asked for and is missing.
    missing_gpu: Option<String>,
}

impl Bench {
    fn new(config: Config, progress: &mut Progress) -> Result<Self> {
        let mut backends = Vec::new();
        if config.backends.cpu() {
            backends.push(Backend::Cpu(CpuBackend::new()));
        }
        let mut device = None;
        let mut missing_gpu = None;
        if config.backends.cuda() {
            match cuda_pair() {
                Ok((cuda, cusparse, timer)) => {
                    backends.push(Backend::Cuda(cuda));
                    backends.push(Backend::Cusparse(cusparse));
                    device = Some(Clock::Device(timer));
                }
                Err(e) if config.backends == BackendSet::All => {
                    progress.note(&format!("spbench: no GPU run ({e}); running the cpu side"));
                    missing_gpu = Some(e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        progress.note("spbench: measuring copy bandwidth");
        let mut host = Clock::host();
        let host_bandwidth = if config.backends.cpu() {
            host.copy_bandwidth(config.quick)?
        } else {
            0.0
        };
        let device_bandwidth = match device.as_mut() {
            Some(clock) => clock.copy_bandwidth(config.quick)?,
            None => 0.0,
        };
        let report = Report::create(&config.out)?;
        Ok(Bench {
            config,
            backends,
            host,
            device,
            host_bandwidth,
            device_bandwidth,
            report,
            missing_gpu,
        })
    }

    fn matrix(
        &mut self,
        index: usize,
        total: usize,
        source: &Source,
        progress: &mut Progress,
    ) -> Result<()> {
        progress.matrix(index, total, &source.name, source.origin.kind());
        progress.status(&format!("[{index}/{total}] loading {}", source.name));
        let start = Instant::now();
        let a = match source.load(self.config.max_nnz) {
            Ok(Matrix::Ready(a)) => a,
            Ok(Matrix::TooLarge(nnz)) => {
                let why = format!("{nnz} entries, past --max-nnz");
                self.report.skipped.push((source.name.clone(), why));
                return Ok(());
            }
            Err(e) => {
                progress.note(&format!("spbench: {}: {e}", source.name));
                self.report
                    .skipped
                    .push((source.name.clone(), e.to_string()));
                self.report
                    .problems
                    .push(format!("{}: not loaded: {e}", source.name));
                return Ok(());
            }
        };
        let spmv = SparseShape {
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            value: DType::F32,
            index_bytes: 4,
        };
        let line = MatrixLine {
            name: source.name.clone(),
            source: source.origin.kind(),
            rows: a.rows(),
            cols: a.cols(),
            nnz: a.nnz(),
            spmv_bytes: cost::spmv(spmv, DType::F32, false).bytes,
            load: start.elapsed(),
        };
        self.report.matrices.push(line.clone());
        let here = format!("[{index}/{total} {}]", source.name);
        for precision in self.config.precisions.clone() {
            let mut run = Typed {
                bench: self,
                progress,
                matrix: &line,
                here: &here,
            };
            match precision.storage {
                DType::F64 => run.cases::<f64>(&a.cast(), precision)?,
                DType::F32 => run.cases::<f32>(&tf32_valued(&a, precision).cast(), precision)?,
                DType::F16 => run.cases::<f16>(&a.cast(), precision)?,
                DType::BF16 => run.cases::<bf16>(&a.cast(), precision)?,
                DType::I8 => run.cases::<i8>(&integer_valued(&a).cast(), precision)?,
                _ => {
                    let why = format!("spbench has no {precision} operands");
                    if !self.report.skipped.iter().any(|s| s.1 == why) {
                        self.report.skipped.push((precision.to_string(), why));
                    }
                }
            }
        }
        Ok(())
    }

    fn run_info(&self, plots: &[String]) -> RunInfo {
        let c = &self.config;
        let m = &c.method;
        let mut lines: Vec<String> = self
            .backends
            .iter()
            .map(|b| format!("backend: {}", b.description()))
            .collect();
        if let Some(why) = &self.missing_gpu {
            lines.push(format!("no GPU run: {why}"));
        }
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        if self.host_bandwidth > 0.0 {
            lines.push(format!(
                "host: copy bandwidth {:.1} GB/s (parallel memcpy, bytes read + written), \
                 last-level cache {:.0} MiB; {}",
                self.host_bandwidth / 1e9,
                mib(self.host.cache_bytes()),
                self.host.describe()
            ));
        }
        if let Some(device) = &self.device {
            lines.push(format!(
                "device: copy bandwidth {:.1} GB/s (device-to-device copy, bytes read + written), \
                 L2 {:.0} MiB; {}",
                self.device_bandwidth / 1e9,
                mib(device.cache_bytes()),
                device.describe()
            ));
        }
        lines.push(format!(
            "timing per kernel: warm-up >= {:.0} ms (at least 100 runs for kernels under {:.1} ms), \
             then the median of {} samples, each a batch of calls lasting >= {:.2} ms; at most \
             {:.0} s per kernel (rows with time_limited = true in the CSV have fewer samples)",
            m.warmup.as_secs_f64() * 1e3,
            m.warmup.as_secs_f64() * 10.0,
            m.samples,
            m.batch.as_secs_f64() * 1e3,
            m.time_limit.as_secs_f64()
        ));
        if self.device.is_some() {
            lines.push(
                "L2: GPU cases whose minimal bytes are at most 2x the L2 are timed one call per \
                 sample, right after writing 2x the L2 (outside the events), so they read from \
                 device memory (cache = flushed in the CSV); larger ones run in batches (warm)"
                    .to_string(),
            );
        }
        let rounded = if c.beta.fract() != 0.0 {
            " (rounded to an integer in i8)"
        } else {
            ""
        };
        lines.push(format!(
            "operands: alpha = 1, beta = {}{rounded}; SpMM and SDDMM dense operands {}, \
             attention row-major; values uniform in [-1, 1) (i8: integers -3..=3); file \
             matrices scaled by a power of two into (0.5, 1]",
            c.beta, c.layout
        ));
        if c.beta == 0.0 && self.device.is_some() {
            lines.push(
                "beta = 0: the cusparse backend zeroes the output before calling cuSPARSE (one \
                 extra write of the output per call, inside its times); --beta 1 compares \
                 without it"
                    .to_string(),
            );
        }
        lines.push(
            "check: each kernel's first run is compared entry by entry with the serial \
             reference and its error bound before any timing; a kernel outside the bound gets \
             no time (status fail)"
                .to_string(),
        );
        lines.push(
            "plan (runs): planning (analysis, format conversion, matrix upload) in runs of the \
             kernel; SpMV tables also split the plan's own account of its time into host work, \
             transfers, device analysis and kernel compilation or loading; the CSV has plan_ms, \
             that split (plan_host_ms, plan_transfer_ms, plan_device_ms, plan_kernels_ms) and \
             upload_ms (dense operands)"
                .to_string(),
        );
        lines.push(format!(
            "files: results.csv, summary.md{}",
            plots.iter().map(|p| format!(", {p}")).collect::<String>()
        ));
        RunInfo {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            date: utc_now(),
            lines,
        }
    }
}

/// The matrices of the run; a default corpus directory that does not exist is skipped with a
/// note, a named one (or a named file) that does not exist is an error.
fn sources(c: &Config, progress: &mut Progress) -> Result<Vec<Source>> {
    let corpus = match &c.corpus {
        Some(dir) if !dir.is_dir() && !c.corpus_named => {
            progress.note(&format!(
                "spbench: no corpus at {} (name one with --corpus DIR); running without",
                dir.display()
            ));
            None
        }
        other => other.as_deref(),
    };
    if let Some(missing) = c.files.iter().find(|f| !f.is_file()) {
        return Err(Error::invalid(format!(
            "{} is not a file",
            missing.display()
        )));
    }
    let sources = cases::sources(corpus, &c.files, &c.generators, c.large_bytes)?;
    if sources.is_empty() {
        return Err(Error::invalid(
            "no matrices: give files, a corpus directory, or --large above 0",
        ));
    }
    Ok(sources)
}

/// The cuda backend, the cusparse backend on its device and stream (so both are timed by one
/// pair of events and share operands), and the timer.
fn cuda_pair() -> Result<(CudaBackend, CusparseBackend, DeviceTimer)> {
    let cuda = CudaBackend::new(0)?;
    let cusparse = CusparseBackend::sharing(&cuda)?;
    let timer = DeviceTimer::new(&cuda)?;
    Ok((cuda, cusparse, timer))
}

/// The same pattern with values in -3..=3, for integer precisions (results stay exact).
fn integer_valued(a: &Csr<f64>) -> Csr<f64> {
    let mut a = a.clone();
    for (k, v) in a.values_mut().iter_mut().enumerate() {
        *v = (k % 7) as f64 - 3.0;
    }
    a
}

/// `a` with its values rounded to tf32 when `precision` computes in tf32, as the conformance
/// suite does: the kernels round their inputs so, and the oracle then sees the same values.
fn tf32_valued(a: &Csr<f64>, precision: Precision) -> Csr<f64> {
    let mut a = a.clone();
    if precision.compute == Compute::Tf32 {
        for v in a.values_mut() {
            *v = f64::from(round_to_tf32(*v as f32));
        }
    }
    a
}

/// The cases of one matrix in one storage type.
struct Typed<'r> {
    bench: &'r mut Bench,
    progress: &'r mut Progress,
    matrix: &'r MatrixLine,
    here: &'r str,
}

impl Typed<'_> {
    fn cases<T: Baselines>(&mut self, a: &Csr<T>, precision: Precision) -> Result<()> {
        for (op_index, op) in self.bench.config.ops.clone().into_iter().enumerate() {
            let widths = match op {
                Op::Spmv => vec![1],
                Op::Spmm => self.bench.config.spmm_widths.clone(),
                Op::Sddmm | Op::Attention => self.bench.config.inner_widths.clone(),
            };
            for width in widths {
                let c = &self.bench.config;
                let seed = (op_index as u64) << 32 | width as u64;
                let mut case = Case::new(a, op, width, c.heads, precision, c.layout, c.beta, seed);
                case.backward = c.backward && op == Op::Attention;
                case.tune = c.tune;
                let dense_bytes = a.rows() as f64 * a.cols() as f64 * size_of::<T>() as f64;
                let extras = Extras {
                    reference: c.reference,
                    baselines: case.alpha == 1.0 && case.beta == 0.0,
                    dense_fits: dense_bytes <= c.dense_limit_bytes as f64,
                };
                let mut kernels =
                    kernels::kernels(&self.bench.backends, op.kind(), precision, &extras);
                if let Some(only) = &c.algorithms {
                    kernels.retain(
                        |k| matches!(k, Kernel::Plan { algorithm, .. } if only.contains(algorithm)),
                    );
                }
                if let Some(only) = &c.formats {
                    kernels.retain(
                        |k| matches!(k, Kernel::Plan { format, .. } if only.contains(format)),
                    );
                }
                if kernels.is_empty() {
                    continue;
                }
                let cost = case.cost();
                let mut oracle = Oracle::new(&case);
                let mut rows = Vec::with_capacity(kernels.len());
                for kernel in kernels {
                    self.progress.status(&format!(
                        "{} {} {}{precision} {} {} {}",
                        self.here,
                        op.name(),
                        report::width_text(op, width),
                        kernel.backend(),
                        kernel.format(),
                        kernel.algorithm()
                    ));
                    rows.push(self.bench.measure(kernel, &case, &mut oracle, cost));
                }
                self.bench.report.add_case(self.matrix, rows)?;
            }
        }
        Ok(())
    }
}

/// A plan-time error that is the backend declining the combination rather than a fault.
fn is_refusal(e: &Error) -> bool {
    matches!(
        e,
        Error::Unsupported { .. }
            | Error::FillLimit { .. }
            | Error::IndexOverflow { .. }
            | Error::InvalidArgument { .. }
    )
}

impl Bench {
    /// Plans, checks and (when the check passes) times one kernel on one case.
    fn measure<T: Baselines>(
        &mut self,
        kernel: Kernel,
        case: &Case<'_, T>,
        oracle: &mut Oracle<'_, '_, T>,
        cost: Cost,
    ) -> Row {
        let key = (case.op, case.width, case.precision);
        let prepared = match kernel {
            Kernel::Plan {
                backend,
                format,
                algorithm,
            } => match self.backends.iter().find(|b| b.kind() == backend) {
                Some(b) => ops::prepare_plan(b, format, algorithm, case),
                None => Err(Error::invalid(format!("backend {backend} is not running"))),
            },
            baseline => T::prepare_baseline(baseline, case),
        };
        let mut prepared = match prepared {
            Ok(p) => p,
            Err(e) => {
                let status = if is_refusal(&e) {
                    Status::Refused
                } else {
                    Status::Error
                };
                return Row::without_timing(key, kernel, cost, status, e.to_string());
            }
        };
        let note = if case.backward {
            "times forward and backward; FLOPs and bytes are the forward's"
        } else {
            ""
        };
        let mut row = Row::without_timing(key, kernel, cost, Status::Ok, note.to_string());
        row.plan = Some(prepared.plan);
        row.upload = Some(prepared.upload);

        let runner = &mut prepared.runner;
        let verdict = runner
            .run()
            .and_then(|()| runner.output())
            .and_then(|got| oracle.check(&got));
        // After the first run: a plan that picks its kernel by the operands (attention's
        // `auto`) reports the one that ran.
        if let Some(info) = runner.info() {
            row.chosen = Some(info.algorithm);
            row.plan_bytes = Some(info.bytes);
            row.deterministic = Some(info.deterministic);
            row.plan_time = Some(info.plan_time);
            if (info.backend.name(), info.format.name()) != (kernel.backend(), kernel.format()) {
                row.note = format!("ran on {} {}", info.backend, info.format);
            }
        }
        let verdict = match verdict {
            Ok(v) => v,
            Err(e) => {
                row.status = Status::Error;
                row.note = e.to_string();
                return row;
            }
        };
        row.error_ratio = Some(verdict.max_ratio);
        if !verdict.passed() {
            row.status = Status::Fail;
            row.note = match verdict.first_failure {
                Some((entry, got, expected)) => format!(
                    "{} of {} entries outside the bound; entry {entry} is {got:e}, expected {expected:e}",
                    verdict.failures, verdict.entries
                ),
                None => format!("{} entries outside the bound", verdict.failures),
            };
            return row;
        }

        let (clock, bandwidth) = match (kernel.on_host(), self.device.as_mut()) {
            (true, _) => (&mut self.host, self.host_bandwidth),
            (false, Some(device)) => (device, self.device_bandwidth),
            (false, None) => {
                row.status = Status::Error;
                row.note = "no device clock".to_string();
                return row;
            }
        };
        let cache = clock.cache_bytes() as f64;
        let flush = clock.flushes() && cost.bytes <= 2.0 * cache;
        row.large = cost.bytes >= 4.0 * cache;
        row.copy_bandwidth = bandwidth;
        match timing::time(clock, &self.config.method, flush, &mut || runner.run()) {
            Ok(t) => row.timing = Some(t),
            Err(e) => {
                row.status = Status::Error;
                row.note = e.to_string();
            }
        }
        row
    }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        let date = utc_now();
        assert_eq!(date.len(), 20, "{date}");
        assert!(date.starts_with("20") && date.ends_with('Z'), "{date}");
    }

    #[test]
    fn refusals_are_told_apart_from_faults() {
        assert!(is_refusal(&Error::invalid("no such algorithm")));
        assert!(!is_refusal(&Error::OutOfMemory {
            device: "cuda:0".into(),
            requested: Some(1),
            free: None,
        }));
    }

    #[test]
    fn integer_values_are_small() {
        let a = sparse_blas::generate::poisson2d::<f64, u32>(4).unwrap();
        assert!(integer_valued(&a)
            .values()
            .iter()
            .all(|v| v.fract() == 0.0 && v.abs() <= 3.0));
    }
}
