//! The spbench binary end to end on the CPU: a quick run over two small corpus matrices (when
//! the corpus is present) and tiny generated ones, into a temporary directory; then the CSV,
//! the markdown summary and the SVG plots are read back.

use std::path::PathBuf;
use std::process::Command;

const CORPUS_FILES: [&str; 2] = ["bcsstk01.mtx.gz", "karate.mtx.gz"];

/// A fresh output directory of its own for each test (they run in parallel).
fn out_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spbench-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Elements opened and closed in order, self-closing ones aside: an SVG that is XML-shaped.
fn balanced(svg: &str) -> bool {
    let mut open: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let Some(end) = rest[start..].find('>') else {
            return false;
        };
        let tag = &rest[start + 1..start + end];
        rest = &rest[start + end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            if open.pop() != Some(name.trim()) {
                return false;
            }
        } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
            open.push(tag.split_whitespace().next().unwrap_or(""));
        }
    }
    open.is_empty()
}

#[test]
fn a_quick_cpu_run_writes_the_csv_the_summary_and_the_plots() {
    let out = out_dir("quick");
    let corpus = benches::matrix_dir();
    let files: Vec<PathBuf> = CORPUS_FILES
        .iter()
        .map(|f| corpus.join(f))
        .filter(|p| p.is_file())
        .collect();
    let run = Command::new(env!("CARGO_BIN_EXE_spbench"))
        .args([
            "--quick",
            "--backend",
            "cpu",
            "--no-corpus",
            "--large",
            "0.05",
        ])
        .args(["--precisions", "f64,f32,f16", "--runs", "3"])
        .arg("--out")
        .arg(&out)
        .args(&files)
        .output()
        .expect("spbench runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    // 1 means a kernel left its error bound: a finding of the run, not a failure of spbench.
    assert!(
        matches!(run.status.code(), Some(0 | 1)),
        "status {:?}\n{stderr}",
        run.status
    );

    let csv = std::fs::read_to_string(out.join("results.csv")).expect("results.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    for column in [
        "matrix",
        "op",
        "width",
        "precision",
        "backend",
        "status",
        "median_ms",
        "plan_host_ms",
        "plan_transfer_ms",
        "plan_device_ms",
        "plan_kernels_ms",
        "plan_bytes_per_nnz",
    ] {
        assert!(header.contains(&column), "no {column} column: {header:?}");
    }
    let column = |name: &str| header.iter().position(|c| *c == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let ok: Vec<&Vec<&str>> = rows
        .iter()
        .filter(|r| r[column("status")] == "ok")
        .collect();
    assert!(!ok.is_empty(), "no row passed\n{csv}");
    for r in &ok {
        let median: f64 = r[column("median_ms")].parse().expect("a time");
        assert!(median > 0.0, "{r:?}");
        if r[column("backend")] == "cpu" {
            let host: f64 = r[column("plan_host_ms")].parse().expect("a plan time");
            assert!(host >= 0.0, "{r:?}");
        }
    }
    for op in ["spmv", "spmm", "sddmm", "attention"] {
        assert!(rows.iter().any(|r| r[column("op")] == op), "no {op} row");
    }
    for baseline in ["sprs", "faer"] {
        assert!(
            ok.iter().any(|r| r[column("backend")] == baseline),
            "no {baseline} row"
        );
    }
    for f in CORPUS_FILES.iter().filter(|f| corpus.join(f).is_file()) {
        let name = f.trim_end_matches(".mtx.gz");
        assert!(rows.iter().any(|r| r[0] == name), "no row for {name}");
    }
    assert!(rows.iter().any(|r| r[column("source")] == "generated"));

    let summary = std::fs::read_to_string(out.join("summary.md")).expect("summary.md");
    assert!(summary.starts_with("# spbench"));
    assert!(summary.contains("## spmv f64") && summary.contains("vs sprs"));
    assert!(summary.contains("median plan ms: host / transfer / device / kernels"));
    assert!(summary.contains("copy bandwidth"));
    assert_eq!(
        stdout.trim(),
        summary.trim(),
        "stdout is the summary, nothing else"
    );

    let plots: Vec<PathBuf> = std::fs::read_dir(&out)
        .expect("the output directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    for name in ["speedup-spmv.svg", "gflops-spmm.svg", "bandwidth-spmv.svg"] {
        assert!(plots.iter().any(|p| p.ends_with(name)), "no {name}");
    }
    for plot in &plots {
        let svg = std::fs::read_to_string(plot).expect("a plot");
        assert!(svg.starts_with("<svg"), "{}", plot.display());
        assert!(balanced(&svg), "{} is not balanced", plot.display());
    }
    std::fs::remove_dir_all(&out).expect("cleanup");
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let out = out_dir("bad");
    for args in [
        vec!["--backend", "tpu"],
        vec!["--precisions", "f128"],
        vec!["--no-corpus", "--large", "0", "/nonexistent/m.mtx"],
        vec!["--corpus", "/nonexistent/dir", "--large", "0"],
    ] {
        let run = Command::new(env!("CARGO_BIN_EXE_spbench"))
            .args(&args)
            .arg("--out")
            .arg(&out)
            .output()
            .expect("spbench runs");
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn cuda_without_a_gpu_is_a_clean_error() {
    let out = out_dir("cuda");
    let run = Command::new(env!("CARGO_BIN_EXE_spbench"))
        .args([
            "--backend",
            "cuda",
            "--no-corpus",
            "--large",
            "0.01",
            "--quick",
        ])
        .args(["--ops", "spmv", "--precisions", "f32", "--runs", "2"])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("spbench runs");
    let stderr = String::from_utf8_lossy(&run.stderr);
    match run.status.code() {
        Some(2) => assert!(stderr.contains("not available"), "{stderr}"),
        // A machine with a GPU runs the case.
        Some(0 | 1) => assert!(out.join("results.csv").is_file()),
        other => panic!("status {other:?}\n{stderr}"),
    }
    let _ = std::fs::remove_dir_all(&out);
}
