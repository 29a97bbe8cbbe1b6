//! The `spblas` binary end to end: results, `--check`, and the exit codes of its contract.

use std::path::PathBuf;
use std::process::{Command, Output};

fn spblas(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spblas"))
        .args(args)
        .output()
        .expect("spblas runs")
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("spblas-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

const A: &str =
    "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 1\n1 3 2\n3 2 3\n3 3 4\n";
const X: &str = "%%MatrixMarket matrix array real general\n3 1\n1\n2\n3\n";

#[test]
fn spmv_writes_the_result_and_passes_the_check() {
    let dir = scratch("spmv");
    let (a, x) = (write(&dir, "a.mtx", A), write(&dir, "x.mtx", X));
    let y0 = write(
        &dir,
        "y0.mtx",
        "%%MatrixMarket matrix array real general\n3 1\n10\n20\n30\n",
    );
    let out = dir.join("y.mtx");
    let o = spblas(&[
        "spmv",
        &a,
        &x,
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
        "--alpha",
        "2",
        "--beta",
        "-1",
        "--y0",
        &y0,
        "--check",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("yes"));
    let y: Vec<f64> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('%'))
        .skip(1)
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(y, vec![2.0 * 7.0 - 10.0, -20.0, 2.0 * 18.0 - 30.0]);
}

#[test]
fn every_operation_runs_in_every_float_precision() {
    let dir = scratch("ops");
    let (a, x) = (write(&dir, "a.mtx", A), write(&dir, "x.mtx", X));
    let d = write(
        &dir,
        "d.mtx",
        "%%MatrixMarket matrix array real general\n3 2\n1\n2\n3\n-1\n0.5\n2\n",
    );
    let out = dir.join("out.mtx");
    let out = out.to_str().unwrap();
    for precision in ["f64", "f32", "f16", "bf16"] {
        let runs: [Vec<&str>; 4] = [
            vec!["spmv", &a, &x],
            vec!["spmm", &a, &d],
            vec!["sddmm", &a, &d, &d, "--scale-by-values"],
            vec!["attention", &a, &d, &d, &d, "--scale", "0.5"],
        ];
        for mut args in runs {
            args.extend([
                "-o",
                out,
                "--precision",
                precision,
                "--check",
                "--repeat",
                "3",
            ]);
            let o = spblas(&args);
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
}

#[test]
fn bad_input_is_one_line_on_stderr_and_exit_code_2() {
    let dir = scratch("bad");
    let bad = write(
        &dir,
        "bad.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1.0\n",
    );
    let x = write(&dir, "x.mtx", X);
    let out = dir.join("y.mtx");
    let cases: [Vec<&str>; 7] = [
        vec!["spmv", &bad, &x, "-o", out.to_str().unwrap()],
        vec!["spmv", "/nonexistent.mtx", &x, "-o", out.to_str().unwrap()],
        vec![
            "spmv",
            &x,
            &x,
            "-o",
            out.to_str().unwrap(),
            "--precision",
            "f8",
        ],
        vec![
            "spmv",
            &x,
            &x,
            "-o",
            out.to_str().unwrap(),
            "--backend",
            "cuda",
        ],
        vec!["frobnicate"],
        vec!["capabilities", "--backend", "tpu"],
        vec!["capabilities", "--op", "gemm"],
    ];
    for args in cases {
        let o = spblas(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// The lines of a capabilities table whose first words are `words`.
fn table_lines<'t>(text: &'t str, words: &[&str]) -> Vec<&'t str> {
    text.lines()
        .filter(|l| {
            let first: Vec<&str> = l.split_whitespace().take(words.len()).collect();
            first == words
        })
        .collect()
}

#[test]
fn capabilities_list_every_backend_with_or_without_a_gpu() {
    let o = spblas(&["capabilities"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let cpu = table_lines(&text, &["cpu", "spmv", "csr", "f64"]);
    assert_eq!(cpu.len(), 1, "{text}");
    assert!(
        cpu[0].contains("native") && cpu[0].contains("auto nnz-split reference"),
        "{}",
        cpu[0]
    );
    let flashsparse = table_lines(&text, &["cuda", "spmm", "me-bcrs", "f16"]);
    assert_eq!(flashsparse.len(), 1, "{text}");
    assert!(flashsparse[0].contains("flashsparse"), "{}", flashsparse[0]);
    for kind in ["cuda", "cusparse"] {
        let heading = text
            .lines()
            .find(|l| l.starts_with(&format!("{kind}:")) || l.starts_with(&format!("{kind} (")))
            .unwrap_or_else(|| panic!("no {kind} section: {text}"));
        match sparse_blas::Backend::from_name(kind) {
            Ok(_) => assert!(heading.ends_with("what it runs"), "{heading}"),
            Err(_) => assert!(
                heading.starts_with(&format!("{kind}: not usable here"))
                    && heading.ends_with("what it runs on sm_80 and newer"),
                "{heading}"
            ),
        }
    }
}

#[test]
fn capabilities_filter_by_backend_and_operation() {
    let o = spblas(&["capabilities", "--backend", "cuda", "--op", "spmm"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let rows: Vec<&str> = text.lines().skip(2).collect();
    assert!(!rows.is_empty(), "{text}");
    assert!(
        rows.iter().all(|l| l.starts_with("cuda      spmm ")),
        "{text}"
    );
    assert!(!table_lines(&text, &["cuda", "spmm", "me-bcrs", "f16"]).is_empty());
    let o = spblas(&["capabilities", "--op", "sddmm"]);
    let text = String::from_utf8_lossy(&o.stdout);
    for kind in ["cpu", "cuda", "cusparse"] {
        assert!(!table_lines(&text, &[kind, "sddmm"]).is_empty(), "{text}");
        assert!(table_lines(&text, &[kind, "spmv"]).is_empty(), "{text}");
    }
}

#[test]
fn info_describes_a_matrix() {
    let dir = scratch("info");
    let a = write(&dir, "a.mtx", A);
    let o = spblas(&["info", &a]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("3 x 3") && text.contains("nnz         4"),
        "{text}"
    );
}

/// The numbers of a Matrix Market array file.
fn read_vector(path: &std::path::Path) -> Vec<f64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('%'))
        .skip(1)
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

#[test]
fn solve_finds_the_solution_of_all_ones_and_refuses_a_non_square_matrix() {
    let dir = scratch("solve");
    let spd = dir.join("poisson.mtx");
    let general = dir.join("convection.mtx");
    sparse_blas::io::write_csr(
        &spd,
        &sparse_blas::generate::poisson2d::<f64, u32>(12).unwrap(),
    )
    .unwrap();
    sparse_blas::io::write_csr(
        &general,
        &sparse_blas::generate::convection_diffusion2d::<f64, u32>(12, 1.0).unwrap(),
    )
    .unwrap();
    let out = dir.join("x.mtx");
    for (a, method, extra) in [
        (&spd, "cg", &["--precond", "jacobi"][..]),
        (&general, "bicgstab", &[][..]),
        (&spd, "cg", &["--precision", "f32", "--tol", "1e-5"][..]),
        (&spd, "cg", &["--refine"][..]),
    ] {
        let mut args = vec![
            "solve",
            a.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--method",
            method,
            "--backend",
            "cpu",
        ];
        args.extend(extra);
        let o = spblas(&args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("converged after") && text.contains("max |x - 1|"),
            "{text}"
        );
        let x = read_vector(&out);
        assert_eq!(x.len(), 144);
        assert!(x.iter().all(|v| (v - 1.0).abs() < 1e-3), "{args:?}: {x:?}");
    }

    let b = write(
        &dir,
        "b.mtx",
        &format!(
            "%%MatrixMarket matrix array real general\n144 1\n{}",
            "1\n".repeat(144)
        ),
    );
    let o = spblas(&[
        "solve",
        spd.to_str().unwrap(),
        &b,
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
        "--max-iter",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(1), "not converged exits 1");
    assert!(String::from_utf8_lossy(&o.stdout).contains("not converged after 3 iterations"));
    assert_eq!(read_vector(&out).len(), 144, "the last iterate is written");

    let rect = write(
        &dir,
        "rect.mtx",
        "%%MatrixMarket matrix coordinate real general\n3 2 2\n1 1 1\n3 2 1\n",
    );
    let o = spblas(&[
        "solve",
        &rect,
        "-o",
        out.to_str().unwrap(),
        "--backend",
        "cpu",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("square") && err.contains("3x2"), "{err}");
}
