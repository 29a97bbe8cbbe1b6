//! `conformance`: runs the conformance suite on a backend chosen at run time and prints the
//! table. Exit status: 0 when every check passes (or the backend is unavailable and
//! `SPARSE_REQUIRE_GPU` is not `1`), 1 on any failure, 2 on a usage or setup error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use conformance::{corpus, generators, run_suite, Case, Filter, Profile, Style};
use sparse_blas::{Backend, BackendKind, BackendRequest, Error, Executor, OpKind, Precision};

/// Environment variable that makes an unavailable GPU backend a failure instead of a skip.
const REQUIRE_GPU_ENV: &str = "SPARSE_REQUIRE_GPU";

/// Differential conformance of a sparse-blas backend against the CPU oracle.
#[derive(Parser, Debug)]
#[command(name = "conformance", version)]
struct Args {
    /// Backend to test: cpu, cuda, cusparse or auto [default: $SPARSE_BACKEND, else auto]
    #[arg(long, value_parser = parse::<BackendRequest>)]
    backend: Option<BackendRequest>,
    /// Directory of *.mtx and *.mtx.gz matrices [default: $SPARSE_CORPUS, else the
    /// ../shared/matrices of the workspace this binary was built in, when it exists]
    #[arg(long, conflicts_with = "no_corpus")]
    corpus: Option<PathBuf>,
    /// Run the generated cases only
    #[arg(long)]
    no_corpus: bool,
    /// One case per matrix and variant instead of every dense width and layout
    #[arg(long)]
    quick: bool,
    /// Only these operations (comma-separated: spmv,spmm,sddmm,attention)
    #[arg(long, value_delimiter = ',', value_parser = parse::<OpKind>)]
    op: Vec<OpKind>,
    /// Only these precisions (comma-separated: f64,f32,tf32,f16,bf16,i8,i4)
    #[arg(long, value_delimiter = ',', value_parser = parse::<Precision>)]
    precision: Vec<Precision>,
    /// Skip matrices with more stored entries
    #[arg(long)]
    max_nnz: Option<usize>,
    /// Also write the report, every check included, as markdown to this file
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Print every check, not only the summary and the failures
    #[arg(long)]
    verbose: bool,
}

fn parse<T: std::str::FromStr<Err = Error>>(s: &str) -> Result<T, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

/// A run that could not start or finish: the line to print and the exit status.
struct Stop {
    message: String,
    status: u8,
}

impl Stop {
    fn setup(message: impl Into<String>) -> Self {
        Stop {
            message: format!("error: {}", message.into()),
            status: 2,
        }
    }
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(status) => ExitCode::from(status),
        Err(stop) => {
            eprintln!("{}", stop.message);
            ExitCode::from(stop.status)
        }
    }
}

fn run(args: Args) -> Result<u8, Stop> {
    let require_gpu = std::env::var(REQUIRE_GPU_ENV).is_ok_and(|v| v.trim() == "1");
    let request = match args.backend {
        Some(request) => request,
        None => BackendRequest::from_env_or("auto").map_err(|e| Stop::setup(e.to_string()))?,
    };
    let backend = match Backend::new(request) {
        Ok(backend) => backend,
        Err(e @ Error::DeviceUnavailable { .. }) if require_gpu => {
            return Err(Stop {
                message: format!("error: {e} (and {REQUIRE_GPU_ENV}=1)"),
                status: 1,
            })
        }
        Err(e @ Error::DeviceUnavailable { .. }) => {
            println!("skipped: {e}");
            return Ok(0);
        }
        Err(e) => return Err(Stop::setup(e.to_string())),
    };
    if require_gpu && request == BackendRequest::Auto && backend.kind() == BackendKind::Cpu {
        return Err(Stop {
            message: format!("error: auto chose the cpu backend, but {REQUIRE_GPU_ENV}=1"),
            status: 1,
        });
    }

    let profile = if args.quick {
        Profile::Quick
    } else {
        Profile::Full
    };
    let mut cases: Vec<Case> = generators::cases(profile);
    match corpus_dir(&args)? {
        Some(dir) => {
            let files = corpus::files(&dir).map_err(|e| Stop::setup(e.to_string()))?;
            println!("corpus: {} matrices in {}", files.len(), dir.display());
            cases.extend(corpus::cases(&files, profile, corpus::CORPUS_WIDTH));
        }
        None if args.no_corpus => println!("corpus: not used (--no-corpus)"),
        None => println!(
            "corpus: skipped (no {} and no --corpus or {})",
            corpus::default_dir().display(),
            corpus::CORPUS_ENV
        ),
    }
    let filter = Filter {
        ops: args.op,
        precisions: args.precision,
        max_nnz: args.max_nnz,
    };
    println!("backend: {}; {} cases", backend.description(), cases.len());

    let report = run_suite(&backend, &cases, &filter);
    print!("{}", report.render(Style::Text, args.verbose));
    if let Some(path) = &args.markdown {
        std::fs::write(path, report.render(Style::Markdown, true))
            .map_err(|e| Stop::setup(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(if report.passed() { 0 } else { 1 })
}

/// The corpus directory: `--corpus`, else `$SPARSE_CORPUS` (both must exist), else the build's
/// default when it exists; `None` with `--no-corpus` or when there is none.
fn corpus_dir(args: &Args) -> Result<Option<PathBuf>, Stop> {
    if args.no_corpus {
        return Ok(None);
    }
    let named = args.corpus.clone().or_else(|| {
        std::env::var_os(corpus::CORPUS_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    match named {
        Some(dir) if dir.is_dir() => Ok(Some(dir)),
        Some(dir) => Err(Stop::setup(format!(
            "corpus directory {} does not exist",
            dir.display()
        ))),
        None => {
            let dir = corpus::default_dir();
            Ok(dir.is_dir().then_some(dir))
        }
    }
}
