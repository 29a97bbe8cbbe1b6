//! `spblas`: the command-line face of sparse-blas.
//!
//! With no arguments it runs the main job: SpMV, SpMM, SDDMM and attention on generated
//! problems, on the `auto` backend, each checked against the oracle. The subcommands run one
//! operation on Matrix Market files; `solve` solves a linear system. Bad input prints one line on
//! stderr and exits 2; a result outside the error bound under `--check`, or a solve that did not
//! converge, exits 1.

mod capabilities;
mod commands;
mod info;
mod main_job;
mod measure;
mod solve;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use sparse_blas::{
    Algorithm, Backend, BackendKind, BackendRequest, BlockShape, Format, OpKind, Precision,
};

#[derive(Parser)]
#[command(
    name = "spblas",
    version,
    about = "Sparse BLAS on the CPU or the GPU, checked against a serial oracle"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// The main job on a given matrix: every operation, timed and checked.
    Demo {
        #[arg(long)]
        matrix: PathBuf,
        #[arg(long, default_value = "auto")]
        backend: BackendRequest,
        #[arg(long, default_value = "f64")]
        precision: Precision,
    },
    /// Shape, row statistics, symmetry and bytes per format of a matrix.
    Info { matrix: PathBuf },
    /// What each backend runs: one line per operation, format and precision.
    Capabilities {
        /// Only this backend (cpu, cuda, cusparse).
        #[arg(long)]
        backend: Option<BackendKind>,
        /// Only this operation (spmv, spmm, sddmm, attention).
        #[arg(long)]
        op: Option<OpKind>,
    },
    /// Solve A x = b by conjugate gradient or BiCGSTAB (b = A·1 when no B is given).
    Solve(solve::SolveArgs),
    #[command(flatten)]
    Op(Box<OpCommand>),
}

/// One operation on Matrix Market files.
#[derive(Subcommand)]
enum OpCommand {
    /// y = alpha*A*x + beta*y
    Spmv {
        a: PathBuf,
        x: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// C = alpha*A*B + beta*C
    Spmm {
        a: PathBuf,
        b: PathBuf,
        #[command(flatten)]
        common: Common,
    },
    /// C = alpha*(X*Y^T) ∘ spy(S) + beta*C, written with S's pattern
    Sddmm {
        s: PathBuf,
        x: PathBuf,
        y: PathBuf,
        /// Multiply each entry by S's value.
        #[arg(long)]
        scale_by_values: bool,
        #[command(flatten)]
        common: Common,
    },
    /// O = softmax_row(scale*(Q*K^T) ∘ spy(A)) * V, per head
    Attention {
        a: PathBuf,
        q: PathBuf,
        k: PathBuf,
        v: PathBuf,
        /// Score scale; default 1/sqrt(width of one head of Q).
        #[arg(long)]
        scale: Option<f64>,
        /// Heads: the columns of Q, K and V split into this many consecutive groups.
        #[arg(long, default_value_t = 1)]
        heads: usize,
        /// Add A's values to the scaled scores (an edge bias).
        #[arg(long)]
        bias: bool,
        #[command(flatten)]
        common: Common,
    },
}

/// Options every operation takes.
#[derive(Args)]
struct Common {
    /// Output file (Matrix Market).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    #[arg(long, default_value = "csr")]
    format: Format,
    /// Block shape ROWSxCOLS of a blocked format (bsr: the block; me-bcrs: window x vectors per
    /// block; sr-bcrs: vector length x stride); the backend chooses when absent.
    #[arg(long)]
    block: Option<BlockShape>,
    /// cpu, cuda, cusparse or auto (default: $SPARSE_BACKEND, else auto).
    #[arg(long)]
    backend: Option<BackendRequest>,
    #[arg(long, default_value = "f64")]
    precision: Precision,
    #[arg(long, default_value = "auto")]
    algorithm: Algorithm,
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    alpha: f64,
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    beta: f64,
    /// Prior output, read when beta is not zero.
    #[arg(long)]
    y0: Option<PathBuf>,
    /// Timed runs (the median is reported).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Compare with the oracle; exit 1 when an entry is outside its error bound.
    #[arg(long)]
    check: bool,
}

impl Common {
    fn backend(&self) -> sparse_blas::Result<Backend> {
        match self.backend {
            Some(request) => Backend::new(request),
            None => Backend::from_env_or("auto"),
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.render().to_string();
            eprintln!(
                "spblas: {}",
                text.lines()
                    .next()
                    .unwrap_or("invalid arguments")
                    .trim_start_matches("error: ")
            );
            return ExitCode::from(2);
        }
    };
    let outcome = match cli.command {
        None => main_job::run(None, BackendRequest::Auto, Precision::F64),
        Some(Command::Demo {
            matrix,
            backend,
            precision,
        }) => main_job::run(Some(&matrix), backend, precision),
        Some(Command::Info { matrix }) => info::run(&matrix).map(|()| true),
        Some(Command::Capabilities { backend, op }) => {
            capabilities::run(backend, op).map(|()| true)
        }
        Some(Command::Solve(args)) => solve::run(&args),
        Some(Command::Op(command)) => commands::run(*command),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("spblas: {e}");
            ExitCode::from(2)
        }
    }
}
