//! The generic suite on every backend: the generated cases and the small corpus matrices, on
//! the `cpu` backend always and on `cuda` and `cusparse` where a GPU is usable. Without one
//! their tests print `skipped: <reason>` and pass, unless `SPARSE_REQUIRE_GPU=1`.

use std::time::Instant;

use conformance::{corpus, generators, run_suite, Case, Filter, Profile, Report, Style};
use sparse_blas::{Backend, BackendKind, BackendRequest, Error, Executor};

/// Largest corpus matrix the tests run (the binary runs them all).
const CORPUS_MAX_NNZ: usize = 200_000;
/// Dense width of the corpus cases here: narrower than the binary's, to keep the tests fast on
/// two cores, and not a multiple of 8 so that column blocks are ragged.
const CORPUS_WIDTH: usize = 7;
/// Environment variable that turns a missing GPU into a failure.
const REQUIRE_GPU_ENV: &str = "SPARSE_REQUIRE_GPU";

/// The backend of `kind`, or `None` after printing why it is skipped. Only an unusable device
/// skips, and not under `SPARSE_REQUIRE_GPU=1`.
fn backend(kind: BackendKind) -> Option<Backend> {
    match Backend::new(BackendRequest::Kind(kind)) {
        Ok(backend) => Some(backend),
        Err(e @ Error::DeviceUnavailable { .. }) => {
            assert!(
                std::env::var(REQUIRE_GPU_ENV).as_deref() != Ok("1"),
                "{REQUIRE_GPU_ENV}=1 but {e}"
            );
            println!("skipped: {e}");
            None
        }
        Err(e) => panic!("{kind} fails with another error than DeviceUnavailable: {e}"),
    }
}

fn passes(backend: &Backend, what: &str, cases: &[Case], filter: &Filter) -> Report {
    let started = Instant::now();
    let report = run_suite(backend, cases, filter);
    println!(
        "{} {what}: {} in {:.1?}",
        backend.kind(),
        report.totals(),
        started.elapsed()
    );
    assert!(report.passed(), "{}", report.render(Style::Text, false));
    report
}

/// The generated cases (quick profile); `None` when the backend is skipped.
fn generated(kind: BackendKind) -> Option<Report> {
    let backend = backend(kind)?;
    let cases = generators::cases(Profile::Quick);
    let report = passes(&backend, "generated", &cases, &Filter::default());
    assert!(report.totals().checks > 1000);
    Some(report)
}

/// The corpus matrices up to [`CORPUS_MAX_NNZ`] entries, when the corpus is there.
fn small_corpus(kind: BackendKind) {
    let dir = corpus::default_dir();
    if !dir.is_dir() {
        println!("skipped: no corpus at {}", dir.display());
        return;
    }
    let Some(backend) = backend(kind) else {
        return;
    };
    let files = corpus::files(&dir).expect("the corpus directory is readable");
    let filter = Filter {
        max_nnz: Some(CORPUS_MAX_NNZ),
        ..Filter::default()
    };
    let cases = corpus::cases(&files, Profile::Quick, CORPUS_WIDTH);
    passes(&backend, "corpus", &cases, &filter);
}

#[test]
fn cpu_generated_cases_pass() {
    let report = generated(BackendKind::Cpu).expect("the cpu backend is always available");
    assert!(report.refused > 0, "tf32 and i4 are unsupported on the cpu");
}

#[test]
fn cpu_small_corpus_matrices_pass() {
    small_corpus(BackendKind::Cpu);
}

#[test]
fn cuda_generated_cases_pass() {
    generated(BackendKind::Cuda);
}

#[test]
fn cuda_small_corpus_matrices_pass() {
    small_corpus(BackendKind::Cuda);
}

#[test]
fn cusparse_generated_cases_pass() {
    generated(BackendKind::Cusparse);
}

#[test]
fn cusparse_small_corpus_matrices_pass() {
    small_corpus(BackendKind::Cusparse);
}
