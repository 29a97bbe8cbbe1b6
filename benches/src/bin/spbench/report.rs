//! The results: one CSV row per matrix x op x kernel x precision x width, written as each case
//! finishes (so an interrupted run keeps what it measured), and the markdown summary built from
//! them at the end.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use sparse_blas::cost::Cost;
use sparse_blas::{Algorithm, BackendKind, Error, Format, PlanTime, Precision, Result};

use crate::kernels::Kernel;
use crate::ops::Op;
use crate::timing::Timing;

/// What became of one kernel on one case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Passed its check and was timed.
    Ok,
    /// Left the error bound: no speed figure.
    Fail,
    /// The backend declined the combination at plan time (typed refusal).
    Refused,
    /// Anything else went wrong (out of memory, a device error, ...).
    Error,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Fail => "fail",
            Status::Refused => "refused",
            Status::Error => "error",
        }
    }
}

/// What a kernel's time is compared with, per case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// The fastest cuSPARSE algorithm that passed its check.
    CusparseBest,
    /// cuSPARSE's default algorithm on CSR.
    CusparseDefault,
    /// sprs's serial kernel.
    Sprs,
    /// faer's dense GEMM.
    FaerDense,
}

impl Reference {
    pub const ALL: [Reference; 4] = [
        Reference::CusparseBest,
        Reference::CusparseDefault,
        Reference::Sprs,
        Reference::FaerDense,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reference::CusparseBest => "cuSPARSE best",
            Reference::CusparseDefault => "cuSPARSE default",
            Reference::Sprs => "sprs",
            Reference::FaerDense => "faer dense",
        }
    }

    fn covers(self, kernel: &Kernel) -> bool {
        match (self, kernel) {
            (Reference::CusparseBest, Kernel::Plan { backend, .. }) => {
                *backend == BackendKind::Cusparse
            }
            (
                Reference::CusparseDefault,
                Kernel::Plan {
                    backend,
                    format,
                    algorithm,
                },
            ) => {
                *backend == BackendKind::Cusparse
                    && *format == Format::Csr
                    && *algorithm == Algorithm::VendorDefault
            }
            (Reference::Sprs, Kernel::Sprs) | (Reference::FaerDense, Kernel::FaerDense) => true,
            _ => false,
        }
    }
}

/// The matrix a row belongs to.
#[derive(Clone, Debug)]
pub struct MatrixLine {
    pub name: String,
    pub source: &'static str,
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    /// Minimal bytes of its f32 SpMV (the size `--large` asks for).
    pub spmv_bytes: f64,
    pub load: Duration,
}

/// One kernel on one case.
#[derive(Clone, Debug)]
pub struct Row {
    pub op: Op,
    pub width: usize,
    pub precision: Precision,
    pub kernel: Kernel,
    /// The algorithm the plan chose (`auto` resolved), when there is a plan.
    pub chosen: Option<Algorithm>,
    pub status: Status,
    /// Why a kernel failed or was refused.
    pub note: String,
    /// Largest |error| / bound of the check.
    pub error_ratio: Option<f64>,
    pub plan: Option<Duration>,
    /// Where the plan says planning spent its time (the baselines have no plan).
    pub plan_time: Option<PlanTime>,
    pub upload: Option<Duration>,
    pub plan_bytes: Option<usize>,
    pub deterministic: Option<bool>,
    pub timing: Option<Timing>,
    pub cost: Cost,
    /// Minimal bytes at least 4x the cache of the unit it ran on.
    pub large: bool,
    /// Copy bandwidth of the unit it ran on, bytes per second.
    pub copy_bandwidth: f64,
    /// Reference time / this time, per [`Reference::ALL`].
    pub speedups: [Option<f64>; 4],
}

impl Row {
    /// A row without timing (refused, failed or broken).
    pub fn without_timing(
        case: (Op, usize, Precision),
        kernel: Kernel,
        cost: Cost,
        status: Status,
        note: String,
    ) -> Self {
        Row {
            op: case.0,
            width: case.1,
            precision: case.2,
            kernel,
            chosen: None,
            status,
            note,
            error_ratio: None,
            plan: None,
            plan_time: None,
            upload: None,
            plan_bytes: None,
            deterministic: None,
            timing: None,
            cost,
            large: false,
            copy_bandwidth: 0.0,
            speedups: [None; 4],
        }
    }

    fn seconds(&self) -> Option<f64> {
        self.timing
            .filter(|_| self.status == Status::Ok)
            .map(|t| t.median.as_secs_f64().max(1e-12))
    }

    pub fn gflops(&self) -> Option<f64> {
        self.seconds().map(|s| self.cost.flops / s / 1e9)
    }

    pub fn gbps(&self) -> Option<f64> {
        self.seconds().map(|s| self.cost.bytes / s / 1e9)
    }

    /// Achieved minimal-bytes bandwidth over the measured copy bandwidth.
    pub fn bandwidth_fraction(&self) -> Option<f64> {
        self.seconds()
            .filter(|_| self.copy_bandwidth > 0.0)
            .map(|s| self.cost.bytes / s / self.copy_bandwidth)
    }

    /// Planning time in runs of the planned kernel.
    pub fn plan_in_runs(&self) -> Option<f64> {
        Some(self.plan?.as_secs_f64() / self.seconds()?)
    }

    /// The kernel as the summary names it: backend, format, requested algorithm.
    pub fn label(&self) -> String {
        format!(
            "{} {} {}",
            self.kernel.backend(),
            self.kernel.format(),
            self.kernel.algorithm()
        )
    }
}

/// The fastest time of a case among the rows a reference covers that passed.
fn reference_time(rows: &[Row], reference: Reference) -> Option<Duration> {
    rows.iter()
        .filter(|r| r.status == Status::Ok && reference.covers(&r.kernel))
        .filter_map(|r| r.timing.map(|t| t.median))
        .min()
}

fn speedups(time: Option<Duration>, references: &[Option<Duration>; 4]) -> [Option<f64>; 4] {
    references.map(|r| Some(r?.as_secs_f64() / time?.as_secs_f64().max(1e-12)))
}

/// What the summary aggregates: a kernel on a case, or the best of one backend's kernels.
#[derive(Clone, Debug)]
pub struct Entry {
    pub nnz: usize,
    pub op: Op,
    pub precision: Precision,
    pub label: String,
    /// Where the kernel's line goes in a table: our CPU kernels, the CPU baselines, our CUDA
    /// kernels, cuSPARSE, then the best-of lines.
    pub rank: u8,
    pub status: Status,
    pub speedups: [Option<f64>; 4],
    pub gflops: Option<f64>,
    pub fraction: Option<f64>,
    pub large: bool,
    pub plan_in_runs: Option<f64>,
    pub plan_time: Option<PlanTime>,
}

const CSV_COLUMNS: usize = 43;
const CSV_HEADER: &str = "matrix,source,rows,cols,nnz,op,width,precision,backend,format,\
algorithm,chosen,status,error_ratio,plan_ms,plan_host_ms,plan_transfer_ms,plan_device_ms,\
plan_kernels_ms,upload_ms,plan_bytes,plan_bytes_per_nnz,deterministic,cache,batch,\
samples,time_limited,median_ms,q1_ms,q3_ms,min_ms,gflops,gbps,bw_fraction,large,min_bytes,flops,\
plan_in_runs,vs_cusparse_best,vs_cusparse_default,vs_sprs,vs_faer,note";

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn csv_field(s: &str) -> String {
    let s = s.replace(['\n', '\r'], " ");
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map(f).unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.6}", d.as_secs_f64() * 1e3)
}

const BEST_RANK: u8 = 5;

fn rank(kernel: &Kernel) -> u8 {
    match kernel {
        Kernel::Plan {
            backend: BackendKind::Cuda,
            ..
        } => 3,
        Kernel::Plan {
            backend: BackendKind::Cusparse,
            ..
        } => 4,
        Kernel::Plan { .. } => 0,
        Kernel::Sprs => 1,
        Kernel::FaerDense => 2,
    }
}

fn entry(row: &Row, matrix: &MatrixLine) -> Entry {
    Entry {
        nnz: matrix.nnz,
        op: row.op,
        precision: row.precision,
        label: row.label(),
        rank: rank(&row.kernel),
        status: row.status,
        speedups: row.speedups,
        gflops: row.gflops(),
        fraction: row.bandwidth_fraction(),
        large: row.large,
        plan_in_runs: row.plan_in_runs(),
        plan_time: row.plan_time,
    }
}

/// The CSV file and what the summary needs, gathered as cases finish.
pub struct Report {
    csv: BufWriter<File>,
    pub matrices: Vec<MatrixLine>,
    /// Matrices not run, with the reason.
    pub skipped: Vec<(String, String)>,
    pub entries: Vec<Entry>,
    /// Failed checks and errors, one line each.
    pub problems: Vec<String>,
}

impl Report {
    /// Creates `results.csv` in `dir` and writes its header.
    pub fn create(dir: &Path) -> Result<Self> {
        let path = dir.join("results.csv");
        let file = File::create(&path).map_err(|e| Error::io(Some(path.clone()), e))?;
        let mut csv = BufWriter::new(file);
        writeln!(csv, "{CSV_HEADER}").map_err(|e| Error::io(Some(path), e))?;
        Ok(Report {
            csv,
            matrices: Vec::new(),
            skipped: Vec::new(),
            entries: Vec::new(),
            problems: Vec::new(),
        })
    }

    /// Records the rows of one case: speedups against the case's references, the CSV lines,
    /// and the summary's entries (each row's, plus the best of each of our backends).
    pub fn add_case(&mut self, matrix: &MatrixLine, mut rows: Vec<Row>) -> Result<()> {
        let references = Reference::ALL.map(|r| reference_time(&rows, r));
        for row in &mut rows {
            row.speedups = speedups(row.timing.map(|t| t.median), &references);
        }
        for row in &rows {
            self.write_row(matrix, row)?;
            if matches!(row.status, Status::Fail | Status::Error) {
                self.problems.push(format!(
                    "{} {} {}{} {}: {} ({})",
                    matrix.name,
                    row.op.name(),
                    width_text(row.op, row.width),
                    row.precision,
                    row.label(),
                    row.status.name(),
                    row.note
                ));
            }
            self.entries.push(entry(row, matrix));
        }
        for own in [BackendKind::Cuda, BackendKind::Cpu] {
            let best = rows
                .iter()
                .filter(|r| {
                    r.status == Status::Ok
                        && matches!(r.kernel, Kernel::Plan { backend, algorithm, .. }
                            if backend == own && algorithm != Algorithm::Reference)
                })
                .min_by_key(|r| r.timing.map(|t| t.median));
            if let Some(best) = best {
                self.entries.push(Entry {
                    label: format!("best of {own}"),
                    rank: BEST_RANK,
                    plan_in_runs: None,
                    plan_time: None,
                    ..entry(best, matrix)
                });
            }
        }
        self.csv
            .flush()
            .map_err(|e| Error::io(Some("results.csv".into()), e))
    }

    fn write_row(&mut self, m: &MatrixLine, r: &Row) -> Result<()> {
        let t = r.timing.filter(|_| r.status == Status::Ok);
        let fields: [String; CSV_COLUMNS] = [
            csv_field(&m.name),
            m.source.to_string(),
            m.rows.to_string(),
            m.cols.to_string(),
            m.nnz.to_string(),
            r.op.name().to_string(),
            r.width.to_string(),
            r.precision.to_string(),
            r.kernel.backend().to_string(),
            r.kernel.format().to_string(),
            r.kernel.algorithm().to_string(),
            opt(r.chosen, |a| a.name().to_string()),
            r.status.name().to_string(),
            opt(r.error_ratio, |v| format!("{v:.4}")),
            opt(r.plan, ms),
            opt(r.plan_time, |t| ms(t.host)),
            opt(r.plan_time, |t| ms(t.transfer)),
            opt(r.plan_time, |t| ms(t.device)),
            opt(r.plan_time, |t| ms(t.kernels)),
            opt(r.upload, ms),
            opt(r.plan_bytes, |b| b.to_string()),
            opt(r.plan_bytes.filter(|_| m.nnz > 0), |b| {
                format!("{:.3}", b as f64 / m.nnz as f64)
            }),
            opt(r.deterministic, |d| d.to_string()),
            opt(t, |t| {
                if t.flushed { "flushed" } else { "warm" }.to_string()
            }),
            opt(t, |t| t.batch.to_string()),
            opt(t, |t| t.samples.to_string()),
            opt(t, |t| t.limited.to_string()),
            opt(t, |t| ms(t.median)),
            opt(t, |t| ms(t.q1)),
            opt(t, |t| ms(t.q3)),
            opt(t, |t| ms(t.min)),
            opt(r.gflops(), |v| format!("{v:.4}")),
            opt(r.gbps(), |v| format!("{v:.4}")),
            opt(r.bandwidth_fraction(), |v| format!("{v:.4}")),
            r.large.to_string(),
            format!("{:.0}", r.cost.bytes),
            format!("{:.0}", r.cost.flops),
            opt(r.plan_in_runs(), |v| format!("{v:.2}")),
            opt(r.speedups[0], |v| format!("{v:.4}")),
            opt(r.speedups[1], |v| format!("{v:.4}")),
            opt(r.speedups[2], |v| format!("{v:.4}")),
            opt(r.speedups[3], |v| format!("{v:.4}")),
            csv_field(&r.note),
        ];
        writeln!(self.csv, "{}", fields.join(","))
            .map_err(|e| Error::io(Some("results.csv".into()), e))
    }
}

/// `N=128 ` for SpMM, nothing for SpMV.
pub fn width_text(op: Op, width: usize) -> String {
    if op == Op::Spmv {
        String::new()
    } else {
        format!("{}={width} ", op.width_name())
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn geomean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

/// The header of the summary: how the run was made.
pub struct RunInfo {
    pub command: String,
    pub date: String,
    pub lines: Vec<String>,
}

impl Report {
    /// The markdown summary: per operation and precision, one line per kernel.
    pub fn summary(&self, info: &RunInfo, ops: &[Op], precisions: &[Precision]) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# spbench\n");
        let _ = writeln!(md, "`{}` ({})\n", info.command, info.date);
        for line in &info.lines {
            let _ = writeln!(md, "- {line}");
        }
        let _ = writeln!(
            md,
            "\nSpeedup = reference time / kernel time on the same case (matrix, op, width, \
             precision), geometric mean over the cases where both passed their checks; W/L = \
             cases faster / slower. \"best of X\" takes, per case, the fastest of backend X's \
             kernels. The bandwidth column is the median, over large cases only (minimal bytes \
             >= 4x the cache), of (minimal bytes / time) / copy bandwidth."
        );
        for &op in ops {
            for &precision in precisions {
                let entries: Vec<&Entry> = self
                    .entries
                    .iter()
                    .filter(|e| e.op == op && e.precision == precision)
                    .collect();
                if !entries.is_empty() {
                    self.table(&mut md, op, precision, &entries);
                }
            }
        }
        let _ = writeln!(md, "\n## Matrices\n");
        let _ = writeln!(
            md,
            "| matrix | source | rows | cols | nnz | f32 SpMV bytes (MB) | load (s) |\n|---|---|--:|--:|--:|--:|--:|"
        );
        for m in &self.matrices {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {:.1} | {:.2} |",
                m.name,
                m.source,
                m.rows,
                m.cols,
                m.nnz,
                m.spmv_bytes / 1e6,
                m.load.as_secs_f64()
            );
        }
        if !self.skipped.is_empty() {
            let _ = writeln!(md, "\n## Not run\n");
            for (name, why) in &self.skipped {
                let _ = writeln!(md, "- {name}: {why}");
            }
        }
        let _ = writeln!(md, "\n## Failed checks and errors\n");
        if self.problems.is_empty() {
            let _ = writeln!(md, "None.");
        }
        for p in &self.problems {
            let _ = writeln!(md, "- {p}");
        }
        md
    }

    fn table(&self, md: &mut String, op: Op, precision: Precision, entries: &[&Entry]) {
        let references: Vec<usize> = (0..Reference::ALL.len())
            .filter(|&i| entries.iter().any(|e| e.speedups[i].is_some()))
            .collect();
        let _ = writeln!(md, "\n## {} {precision}\n", op.name());
        let mut header = "| kernel | ok | fail | refused | error |".to_string();
        let mut rule = "|---|--:|--:|--:|--:|".to_string();
        for &i in &references {
            let _ = write!(header, " vs {} (W/L) |", Reference::ALL[i].name());
            rule.push_str("--:|");
        }
        header.push_str(" median GFLOP/s | median BW fraction (large) | median plan (runs) |");
        rule.push_str("--:|--:|--:|");
        // SpMV is where a plan is made once for thousands of runs, so where planning spends
        // its time matters most.
        let split = op == Op::Spmv;
        if split {
            header.push_str(" median plan ms: host / transfer / device / kernels |");
            rule.push_str("--:|");
        }
        let _ = writeln!(md, "{header}\n{rule}");
        let mut labels: Vec<(u8, &str)> = Vec::new();
        for e in entries {
            if !labels.iter().any(|(_, l)| *l == e.label) {
                labels.push((e.rank, &e.label));
            }
        }
        labels.sort_by_key(|(rank, _)| *rank);
        for (_, label) in labels {
            let group: Vec<&&Entry> = entries.iter().filter(|e| e.label == label).collect();
            let count = |s: Status| group.iter().filter(|e| e.status == s).count();
            let _ = write!(
                md,
                "| {label} | {} | {} | {} | {} |",
                count(Status::Ok),
                count(Status::Fail),
                count(Status::Refused),
                count(Status::Error)
            );
            for &i in &references {
                let s: Vec<f64> = group.iter().filter_map(|e| e.speedups[i]).collect();
                let wins = s.iter().filter(|&&x| x > 1.0).count();
                let losses = s.iter().filter(|&&x| x < 1.0).count();
                match geomean(&s) {
                    Some(g) => {
                        let _ = write!(md, " {g:.2}x ({wins}/{losses}) |");
                    }
                    None => md.push_str(" - |"),
                }
            }
            let gflops = median(group.iter().filter_map(|e| e.gflops).collect());
            let fraction = median(
                group
                    .iter()
                    .filter(|e| e.large)
                    .filter_map(|e| e.fraction)
                    .collect(),
            );
            let plan = median(group.iter().filter_map(|e| e.plan_in_runs).collect());
            let _ = write!(
                md,
                " {} | {} | {} |",
                fmt_opt(gflops, 1),
                fmt_opt(fraction, 3),
                fmt_opt(plan, 1)
            );
            if split {
                let times: Vec<PlanTime> = group.iter().filter_map(|e| e.plan_time).collect();
                let part = |f: fn(&PlanTime) -> Duration| {
                    fmt_opt(
                        median(times.iter().map(|t| f(t).as_secs_f64() * 1e3).collect()),
                        3,
                    )
                };
                let _ = write!(
                    md,
                    " {} / {} / {} / {} |",
                    part(|t| t.host),
                    part(|t| t.transfer),
                    part(|t| t.device),
                    part(|t| t.kernels)
                );
            }
            md.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a, b"), "\"a, b\"");
        assert_eq!(csv_field("say \"x\"\n"), "\"say \"\"x\"\" \"");
    }

    #[test]
    fn the_header_names_every_field() {
        assert_eq!(CSV_HEADER.split(',').count(), CSV_COLUMNS);
    }

    #[test]
    fn statistics() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert!((geomean(&[2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(geomean(&[]), None);
    }
}
