//! `solvebench`: time to solution of conjugate gradient on SPD systems (3D Poisson matrices and
//! the SPD corpus matrices), in f64, in f32 and by f64 refinement of f32 solves, on each
//! backend asked for; with one SpMV and the vector operations timed apart, so that the time per
//! iteration can be held against one SpMV plus five vector operations (two dots, three axpys).
//!
//! b = A·1 and x starts at 0, as in `scripts/solve-baselines.py`, whose CuPy and SciPy rows
//! this binary's CSV sits beside. Planning (the SpMV plan, the diagonal, the workspace) is not
//! in the time to solution; the first solve of each case is a warm-up.
//!
//! `solvebench [--matrices DIR] [--poisson 128,160] [--backends cuda,cpu] [--tol 1e-8]
//! [--precond none,jacobi] [--check-every 1] [--repeat 3] [--out solve.csv]`

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use benches::matrix_dir;
use clap::Parser;
use sparse_blas::io::{read_csr, read_header, MtxField, MtxSymmetry};
use sparse_blas::solve::{refine, Precond, RefineOptions, SolveOptions, SolveReport, Solver};
use sparse_blas::{
    generate, Backend, BackendRequest, Coef, Csr, Dense, DenseRef, Executor, Real, Result,
    VectorOps,
};

#[derive(Parser)]
#[command(about = "Conjugate gradient's time to solution on SPD systems, per backend")]
struct Args {
    /// The corpus directory (`*.mtx.gz`); its real symmetric matrices with a positive diagonal
    /// are solved. Default: $SPARSE_CORPUS, else ../shared/matrices.
    #[arg(long)]
    matrices: Option<PathBuf>,
    /// Skip the corpus.
    #[arg(long)]
    no_corpus: bool,
    /// Grid sizes n of the 3D Poisson matrices (n³ rows).
    #[arg(long, value_delimiter = ',', default_value = "128,160")]
    poisson: Vec<usize>,
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    backends: Vec<BackendRequest>,
    /// Relative residual to reach: ‖b - Ax‖ <= tol·‖b‖.
    #[arg(long, default_value_t = 1e-8)]
    tol: f64,
    #[arg(long, default_value_t = 20_000)]
    max_iter: usize,
    #[arg(long, value_delimiter = ',', default_value = "none,jacobi")]
    precond: Vec<Precond>,
    /// Convergence tests every this many iterations (each is one host read).
    #[arg(long, value_delimiter = ',', default_value = "1")]
    check_every: Vec<usize>,
    /// Timed solves after the warm-up (the fastest is kept).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// The CSV written (also printed).
    #[arg(long, default_value = "solve.csv")]
    out: PathBuf,
}

const HEADER: &str = "matrix,rows,nnz,backend,precision,precond,check_every,tol,iterations,\
converged,relative_residual,time_s,plan_s,per_iter_us,spmv_us,dot_us,axpy_us,bound_us,\
per_iter_over_bound,spmv_share,refinements,note";

/// One row of the CSV.
#[derive(Default)]
struct Row {
    precision: &'static str,
    precond: Precond,
    check_every: usize,
    iterations: usize,
    converged: bool,
    relative_residual: f64,
    time: Duration,
    plan: Duration,
    per_iter: Duration,
    spmv: Duration,
    dot: Duration,
    axpy: Duration,
    spmv_share: f64,
    refinements: Option<usize>,
    note: String,
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

impl Row {
    fn line(&self, case: &Case, backend: &str, tol: f64) -> String {
        let bound = self.spmv + 2 * self.dot + 3 * self.axpy;
        let over = if bound.is_zero() || self.per_iter.is_zero() {
            f64::NAN
        } else {
            self.per_iter.as_secs_f64() / bound.as_secs_f64()
        };
        format!(
            "{},{},{},{backend},{},{},{},{tol:e},{},{},{:.3e},{:.6},{:.6},{:.2},{:.2},{:.2},{:.2},\
             {:.2},{:.3},{:.3},{},{}",
            case.name,
            case.a.rows(),
            case.a.nnz(),
            self.precision,
            self.precond,
            self.check_every,
            self.iterations,
            self.converged,
            self.relative_residual,
            self.time.as_secs_f64(),
            self.plan.as_secs_f64(),
            us(self.per_iter),
            us(self.spmv),
            us(self.dot),
            us(self.axpy),
            us(bound),
            over,
            self.spmv_share,
            self.refinements.map_or(String::new(), |r| r.to_string()),
            self.note
        )
    }
}

struct Case {
    name: String,
    a: Csr<f64>,
    b: Vec<f64>,
}

impl Case {
    fn new(name: String, a: Csr<f64>) -> Self {
        let b = (0..a.rows())
            .map(|i| a.as_ref().row(i).1.iter().sum())
            .collect();
        Case { name, a, b }
    }
}

/// The corpus's real symmetric matrices whose diagonal is positive: SPD candidates (CG says
/// when one is not).
fn corpus(dir: &std::path::Path) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| sparse_blas::Error::io(Some(dir.to_path_buf()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".mtx.gz"))
        .collect();
    files.sort();
    for path in files {
        let header = read_header(&path)?;
        let real = matches!(header.field, MtxField::Real | MtxField::Integer);
        if !real || header.symmetry != MtxSymmetry::Symmetric || header.rows != header.cols {
            continue;
        }
        let a: Csr<f64> = read_csr(&path)?;
        let positive_diagonal = (0..a.rows()).all(|i| {
            let (cols, values) = a.as_ref().row(i);
            cols.iter()
                .position(|&c| c as usize == i)
                .is_some_and(|k| values[k] > 0.0)
        });
        if positive_diagonal {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            cases.push(Case::new(name.trim_end_matches(".mtx.gz").to_string(), a));
        }
    }
    Ok(cases)
}

/// One vector operation's time on n elements of T: the mean of many, waited for.
fn vector_op_times<T: Real>(backend: &Backend, n: usize) -> Result<(Duration, Duration)> {
    let runs = 20;
    let ones = vec![T::one(); n];
    let x = backend.upload(DenseRef::vector(&ones))?;
    let mut y = backend.upload(DenseRef::vector(&ones))?;
    let mut s: Dense<f64> = backend.upload(DenseRef::vector(&[0.0, 0.0]))?;
    let time = |op: &mut dyn FnMut() -> Result<()>| -> Result<Duration> {
        op()?;
        backend.synchronize()?;
        let start = Instant::now();
        for _ in 0..runs {
            op()?;
        }
        backend.synchronize()?;
        Ok(start.elapsed() / runs)
    };
    let dot = time(&mut || backend.dot(x.as_ref(), y.as_ref(), None, s.as_mut(), [0, 0]))?;
    let axpy = time(&mut || backend.axpy(Coef::ratio(1, 0), x.as_ref(), y.as_mut(), s.as_ref()))?;
    Ok((dot, axpy))
}

/// CG in T on `backend`: the fastest of the timed solves.
fn cg<T: Real>(
    backend: &Backend,
    case: &Case,
    options: &SolveOptions,
    repeat: usize,
) -> Result<(SolveReport, Duration)> {
    let a = case.a.cast::<T>();
    let b: Vec<T> = case.b.iter().map(|&v| T::from_f64(v)).collect();
    let b = backend.upload(DenseRef::vector(&b))?;
    let zero = vec![T::zero(); a.rows()];
    let start = Instant::now();
    let mut solver = Solver::new(backend, a.as_ref(), options)?;
    backend.synchronize()?;
    let plan = start.elapsed();
    let mut best: Option<SolveReport> = None;
    for _ in 0..=repeat {
        let mut x = backend.upload(DenseRef::vector(&zero))?;
        let report = solver.solve(b.as_ref(), x.as_mut())?;
        // The first solve (a warm-up) is kept only when it is the only one.
        if best.as_ref().is_none_or(|b| report.time < b.time) || repeat == 0 {
            best = Some(report);
        }
    }
    best.map(|r| (r, plan))
        .ok_or_else(|| sparse_blas::Error::internal("no solve ran"))
}

/// f64 refinement around f32 CG: the fastest of the timed refinements.
fn mixed(
    backend: &Backend,
    case: &Case,
    options: &SolveOptions,
    tol: f64,
    repeat: usize,
) -> Result<Row> {
    let a32 = case.a.cast::<f32>();
    let b = backend.upload(DenseRef::vector(&case.b))?;
    let zero = vec![0.0; case.a.rows()];
    let refine_options = RefineOptions {
        tol,
        inner: options.clone().tol(RefineOptions::default().inner.tol),
        ..RefineOptions::default()
    };
    let mut best: Option<Row> = None;
    for _ in 0..=repeat {
        let mut x = backend.upload(DenseRef::vector(&zero))?;
        let start = Instant::now();
        let report = refine(
            backend,
            case.a.as_ref(),
            a32.as_ref(),
            b.as_ref(),
            x.as_mut(),
            &refine_options,
        )?;
        let total = start.elapsed();
        let row = Row {
            precision: "mixed",
            precond: options.precond,
            check_every: options.check_every,
            iterations: report.inner_iterations,
            converged: report.converged,
            relative_residual: report.relative_residual,
            time: report.time,
            plan: total - report.time,
            per_iter: report.time / report.inner_iterations.max(1) as u32,
            refinements: Some(report.refinements),
            note: "f32 iterations; plan_s includes the f32 solver's planning".to_string(),
            ..Row::default()
        };
        if best.as_ref().is_none_or(|b| row.time < b.time) {
            best = Some(row);
        }
    }
    best.ok_or_else(|| sparse_blas::Error::internal("no refinement ran"))
}

fn typed_row<T: Real>(
    backend: &Backend,
    case: &Case,
    options: &SolveOptions,
    repeat: usize,
    precision: &'static str,
) -> Row {
    let base = Row {
        precision,
        precond: options.precond,
        check_every: options.check_every,
        ..Row::default()
    };
    let measured = cg::<T>(backend, case, options, repeat).and_then(|(report, plan)| {
        Ok((report, plan, vector_op_times::<T>(backend, case.a.rows())?))
    });
    match measured {
        Ok((report, plan, (dot, axpy))) => Row {
            iterations: report.iterations,
            converged: report.converged,
            relative_residual: report.relative_residual,
            time: report.time,
            plan,
            per_iter: report.time_per_iteration,
            spmv: report.spmv_time,
            dot,
            axpy,
            spmv_share: report.spmv_share,
            ..base
        },
        Err(e) => Row {
            note: format!("\"{e}\""),
            ..base
        },
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut cases: Vec<Case> = Vec::new();
    for &n in &args.poisson {
        cases.push(Case::new(format!("poisson3d_{n}"), generate::poisson3d(n)?));
    }
    if !args.no_corpus {
        cases.extend(corpus(&args.matrices.clone().unwrap_or_else(matrix_dir))?);
    }
    let mut csv = format!("{HEADER}\n");
    println!("{HEADER}");
    for request in &args.backends {
        let backend = Backend::new(*request)?;
        let name = backend.kind().to_string();
        eprintln!("{}", backend.description());
        for case in &cases {
            for &precond in &args.precond {
                for &check_every in &args.check_every {
                    let options = SolveOptions::default()
                        .precond(precond)
                        .tol(args.tol)
                        .max_iter(args.max_iter)
                        .check_every(check_every);
                    let rows = [
                        typed_row::<f64>(&backend, case, &options, args.repeat, "f64"),
                        typed_row::<f32>(&backend, case, &options, args.repeat, "f32"),
                        mixed(&backend, case, &options, args.tol, args.repeat).unwrap_or_else(
                            |e| Row {
                                precision: "mixed",
                                precond,
                                check_every,
                                note: format!("\"{e}\""),
                                ..Row::default()
                            },
                        ),
                    ];
                    for row in rows {
                        let line = row.line(case, &name, args.tol);
                        println!("{line}");
                        let _ = writeln!(csv, "{line}");
                    }
                }
            }
        }
    }
    std::fs::write(&args.out, csv).map_err(|e| sparse_blas::Error::io(Some(args.out.clone()), e))
}
