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
    let cases: [Vec<&str>; 5] = [
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
    ];
    for args in cases {
        let o = spblas(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
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
