//! The command line and the run configuration it resolves to.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use clap::Parser;
use sparse_blas::{Algorithm, Error, Format, Layout, OpKind, Precision, Result};

use crate::cases::Generator;
use crate::ops::Op;

/// Benchmarks every kernel of sparse-blas against cuSPARSE (on a GPU) and against sprs and faer
/// (on the CPU), each timing beside its check against the oracle.
///
/// Writes results.csv (one row per matrix x op x kernel x precision x width), summary.md and
/// SVG plots to --out; the summary is also printed to stdout.
#[derive(Parser, Debug)]
#[command(name = "spbench", version)]
pub struct Args {
    /// Matrix Market files to run besides the corpus.
    pub files: Vec<PathBuf>,

    /// cpu: our CPU kernels, sprs and faer; cuda: our CUDA kernels and cuSPARSE; all: both
    /// (the CUDA part only where a GPU can be used).
    #[arg(long, default_value = "all")]
    pub backend: BackendSet,

    /// Directory of *.mtx / *.mtx.gz files [default: $SPARSE_CORPUS, else ../shared/matrices
    /// of the source tree].
    #[arg(long)]
    pub corpus: Option<PathBuf>,

    /// Run no corpus matrix (only FILES and the generated matrices).
    #[arg(long)]
    pub no_corpus: bool,

    /// Size of each generated large matrix, as the minimal bytes of its f32 SpMV in MB; 0 skips
    /// them [default: 256, so that f32 and f64 SpMV move at least 4x a 60 MB L2; --quick: 4].
    #[arg(long, value_name = "MB")]
    pub large: Option<f64>,

    /// The generated matrices.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "poisson2d,poisson3d,rmat,uniform"
    )]
    pub generators: Vec<Generator>,

    /// Skip matrices with more stored entries (judged from the file header first).
    #[arg(long)]
    pub max_nnz: Option<usize>,

    #[arg(
        long,
        value_delimiter = ',',
        default_value = "spmv,spmm,sddmm,attention"
    )]
    pub ops: Vec<Named<OpKind>>,

    /// Precisions; a kernel runs in those its backend supports.
    #[arg(long, value_delimiter = ',', default_value = "f64,f32,f16")]
    pub precisions: Vec<Named<Precision>>,

    /// Only the kernels of these algorithms (e.g. flashsparse,vendor-alg2), without the CPU
    /// baselines; every kernel when not given.
    #[arg(long, value_delimiter = ',')]
    pub algorithms: Option<Vec<Named<Algorithm>>>,

    /// Only the kernels on these formats (e.g. ell,hyb,bsr), without the CPU baselines; every
    /// format when not given.
    #[arg(long, value_delimiter = ',')]
    pub formats: Option<Vec<Named<Format>>>,

    /// SpMM widths N (columns of B and C) [default: 32,128,256; --quick: 32].
    #[arg(long, value_delimiter = ',')]
    pub n: Option<Vec<usize>>,

    /// SDDMM inner dimensions K, also the attention head width [default: 32,128; --quick: 32].
    #[arg(long, value_delimiter = ',')]
    pub k: Option<Vec<usize>>,

    /// Attention heads: Q, K, V and O hold this many heads of width K side by side (the CSV's
    /// width is K, one head's).
    #[arg(long, default_value_t = 1)]
    pub heads: usize,

    /// Time attention's backward pass too: each timed run is a forward and a backward (dQ, dK
    /// and dV from a dL/dO), while the check and the FLOP and byte floors stay the forward's.
    #[arg(long)]
    pub backward: bool,

    /// Plan `auto` SpMV, SpMM and SDDMM by timing every candidate on the matrix (`tuned()`;
    /// SpMM and SDDMM at the case's width) rather than by the backend's rule; plan_ms counts the
    /// tuning.
    #[arg(long)]
    pub tune: bool,

    /// Layout of the dense operands of SpMM and SDDMM.
    #[arg(long, default_value = "row")]
    pub layout: LayoutArg,

    /// beta of SpMV, SpMM and SDDMM (alpha is 1). With 0 the output is write-only; sprs and faer
    /// run only then.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub beta: f64,

    /// Also time the serial reference (slow).
    #[arg(long)]
    pub reference: bool,

    /// Largest dense copy of A, in MB, that faer's dense GEMM multiplies.
    #[arg(long, default_value_t = 256.0, value_name = "MB")]
    pub dense_limit: f64,

    /// Timed samples per kernel; the median is reported [default: 50; --quick: 10].
    #[arg(long)]
    pub runs: Option<usize>,

    /// Warm-up time per kernel in ms [default: 200; --quick: 10].
    #[arg(long, value_name = "MS")]
    pub warmup_ms: Option<f64>,

    /// Shortest time of one timed batch in ms: short kernels run several times per sample
    /// [default: 1; --quick: 0.1].
    #[arg(long, value_name = "MS")]
    pub batch_ms: Option<f64>,

    /// Wall-time limit of warm-up plus samples per kernel; a kernel that reaches it is reported
    /// with the samples taken so far [default: 20; --quick: 2].
    #[arg(long, value_name = "S")]
    pub time_limit_s: Option<f64>,

    /// A smoke test: few sizes, short warm-up, few samples.
    #[arg(long)]
    pub quick: bool,

    /// Output directory.
    #[arg(long, default_value = "spbench-out")]
    pub out: PathBuf,
}

/// Which backends run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendSet {
    Cpu,
    Cuda,
    All,
}

impl FromStr for BackendSet {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "cpu" => Ok(BackendSet::Cpu),
            "cuda" => Ok(BackendSet::Cuda),
            "all" => Ok(BackendSet::All),
            _ => Err(format!(
                "unknown backend set '{s}' (expected cpu, cuda or all)"
            )),
        }
    }
}

impl BackendSet {
    pub fn cpu(self) -> bool {
        self != BackendSet::Cuda
    }
    pub fn cuda(self) -> bool {
        self != BackendSet::Cpu
    }
}

#[derive(Clone, Copy, Debug)]
pub struct LayoutArg(pub Layout);

impl FromStr for LayoutArg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "row" | "row-major" => Ok(LayoutArg(Layout::RowMajor)),
            "col" | "col-major" => Ok(LayoutArg(Layout::ColMajor)),
            _ => Err(format!("unknown layout '{s}' (expected row or col)")),
        }
    }
}

/// A library enum parsed by its CLI name.
#[derive(Clone, Copy, Debug)]
pub struct Named<T>(pub T);

impl<T: FromStr<Err = Error>> FromStr for Named<T> {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        s.parse().map(Named).map_err(|e: Error| e.to_string())
    }
}

/// How each kernel is timed.
#[derive(Clone, Copy, Debug)]
pub struct Method {
    pub warmup: Duration,
    pub samples: usize,
    pub batch: Duration,
    pub time_limit: Duration,
}

/// Everything a run needs, defaults resolved.
#[derive(Debug)]
pub struct Config {
    pub backends: BackendSet,
    pub corpus: Option<PathBuf>,
    /// The corpus directory was named (flag or environment), so its absence is an error.
    pub corpus_named: bool,
    pub files: Vec<PathBuf>,
    pub large_bytes: f64,
    pub generators: Vec<Generator>,
    pub max_nnz: Option<usize>,
    pub ops: Vec<Op>,
    pub precisions: Vec<Precision>,
    /// The algorithms to run; all when `None`.
    pub algorithms: Option<Vec<Algorithm>>,
    /// The formats to run; all when `None`.
    pub formats: Option<Vec<Format>>,
    pub spmm_widths: Vec<usize>,
    pub inner_widths: Vec<usize>,
    pub heads: usize,
    pub backward: bool,
    pub tune: bool,
    pub layout: Layout,
    pub beta: f64,
    pub reference: bool,
    pub dense_limit_bytes: usize,
    pub method: Method,
    pub quick: bool,
    pub out: PathBuf,
}

fn positive_duration(what: &str, seconds: f64) -> Result<Duration> {
    if seconds.is_finite() && seconds > 0.0 {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(Error::invalid(format!(
            "{what} must be positive, got {seconds}"
        )))
    }
}

fn widths(what: &str, given: Option<Vec<usize>>, default: &[usize]) -> Result<Vec<usize>> {
    let widths = given.unwrap_or_else(|| default.to_vec());
    if widths.is_empty() || widths.contains(&0) {
        return Err(Error::invalid(format!(
            "{what} must list positive widths, got {widths:?}"
        )));
    }
    Ok(widths)
}

impl Args {
    pub fn resolve(self) -> Result<Config> {
        let quick = self.quick;
        let pick = |full: f64, smoke: f64| if quick { smoke } else { full };
        let large_mb = self.large.unwrap_or(pick(256.0, 4.0));
        if !(large_mb.is_finite() && large_mb >= 0.0) {
            return Err(Error::invalid(format!(
                "--large must be 0 or more MB, got {large_mb}"
            )));
        }
        if !(self.dense_limit.is_finite() && self.dense_limit >= 0.0) {
            return Err(Error::invalid(format!(
                "--dense-limit must be 0 or more MB, got {}",
                self.dense_limit
            )));
        }
        if !self.beta.is_finite() {
            return Err(Error::invalid("--beta must be finite"));
        }
        let samples = self.runs.unwrap_or(if quick { 10 } else { 50 });
        if samples == 0 {
            return Err(Error::invalid("--runs must be at least 1"));
        }
        let method = Method {
            warmup: positive_duration(
                "--warmup-ms",
                self.warmup_ms.unwrap_or(pick(200.0, 10.0)) / 1e3,
            )?,
            samples,
            batch: positive_duration("--batch-ms", self.batch_ms.unwrap_or(pick(1.0, 0.1)) / 1e3)?,
            time_limit: positive_duration(
                "--time-limit-s",
                self.time_limit_s.unwrap_or(pick(20.0, 2.0)),
            )?,
        };
        let corpus_named =
            self.corpus.is_some() || std::env::var_os(benches::MATRIX_DIR_ENV).is_some();
        let corpus = if self.no_corpus {
            None
        } else {
            Some(self.corpus.unwrap_or_else(benches::matrix_dir))
        };
        let mut precisions: Vec<Precision> = Vec::new();
        for Named(p) in self.precisions {
            if !precisions.contains(&p) {
                precisions.push(p);
            }
        }
        let mut ops: Vec<Op> = Vec::new();
        for Named(kind) in self.ops {
            let op = Op::from_kind(kind)?;
            if !ops.contains(&op) {
                ops.push(op);
            }
        }
        Ok(Config {
            backends: self.backend,
            corpus,
            corpus_named,
            files: self.files,
            large_bytes: large_mb * 1e6,
            generators: self.generators,
            max_nnz: self.max_nnz,
            ops,
            precisions,
            algorithms: self
                .algorithms
                .map(|list| list.into_iter().map(|Named(a)| a).collect()),
            formats: self
                .formats
                .map(|list| list.into_iter().map(|Named(f)| f).collect()),
            spmm_widths: widths("--n", self.n, if quick { &[32] } else { &[32, 128, 256] })?,
            inner_widths: widths("--k", self.k, if quick { &[32] } else { &[32, 128] })?,
            heads: self.heads,
            backward: self.backward,
            tune: self.tune,
            layout: self.layout.0,
            beta: self.beta,
            reference: self.reference,
            dense_limit_bytes: (self.dense_limit * 1e6) as usize,
            method,
            quick,
            out: self.out,
        })
    }
}
