//! The generic suite on the CPU backend: the generated cases, and the small corpus matrices.

use std::time::Instant;

use conformance::{corpus, generators, run_suite, Filter, Profile, Report, Style};
use sparse_blas::Backend;

/// Largest corpus matrix the test runs (the binary runs them all).
const CORPUS_MAX_NNZ: usize = 200_000;
/// Dense width of the corpus cases here: narrower than the binary's, to keep the test fast on
/// two cores, and not a multiple of 8 so that column blocks are ragged.
const CORPUS_WIDTH: usize = 7;

fn cpu() -> Backend {
    Backend::from_name("cpu").expect("the cpu backend is always available")
}

fn assert_passed(what: &str, report: &Report, started: Instant) {
    println!("{what}: {} in {:.1?}", report.totals(), started.elapsed());
    assert!(report.passed(), "{}", report.render(Style::Text, false));
}

#[test]
fn generated_cases_pass() {
    let started = Instant::now();
    let report = run_suite(
        &cpu(),
        &generators::cases(Profile::Quick),
        &Filter::default(),
    );
    assert!(report.totals().checks > 1000);
    assert!(report.refused > 0, "tf32 and i4 are unsupported on the cpu");
    assert_passed("generated", &report, started);
}

#[test]
fn small_corpus_matrices_pass() {
    let dir = corpus::default_dir();
    if !dir.is_dir() {
        println!("skipped: no corpus at {}", dir.display());
        return;
    }
    let started = Instant::now();
    let files = corpus::files(&dir).expect("the corpus directory is readable");
    let filter = Filter {
        max_nnz: Some(CORPUS_MAX_NNZ),
        ..Filter::default()
    };
    let report = run_suite(
        &cpu(),
        &corpus::cases(&files, Profile::Quick, CORPUS_WIDTH),
        &filter,
    );
    assert_passed("corpus", &report, started);
}
