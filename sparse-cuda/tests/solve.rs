//! The solvers on the GPU backends: the vector operations against the CPU's, conjugate gradient
//! and BiCGSTAB (with and without Jacobi) converging on generated SPD and non-symmetric systems
//! in as many iterations as on the CPU, f32 solves and mixed-precision refinement, reproducible
//! results and the typed errors. Skips without a GPU (fails under `SPARSE_REQUIRE_GPU=1`).

mod common;

use common::available;
use sparse_core::{
    BackendKind, Coef, Dense, DenseRef, Error, Executor, Layout, Real, Scalar, VectorOps,
};
use sparse_cpu::CpuBackend;
use sparse_cuda::{CudaBackend, CusparseBackend};
use sparse_formats::{generate, Csr};
use sparse_solve::{refine, Method, Precond, RefineOptions, SolveOptions, SolveReport, Solver};

fn cuda() -> Option<CudaBackend> {
    available(BackendKind::Cuda, CudaBackend::new(0))
}

fn host<T: Real>(b: &impl Executor, d: &Dense<T>) -> Vec<T> {
    b.download(d).unwrap().into_host_vec().unwrap()
}

fn upload<T: Real>(b: &impl Executor, v: &[T]) -> Dense<T> {
    b.upload(DenseRef::vector(v)).unwrap()
}

/// `b = A·1`.
fn rhs_of_ones<T: Real>(a: &Csr<T, u32>) -> Vec<T> {
    (0..a.rows())
        .map(|i| a.as_ref().row(i).1.iter().fold(T::zero(), |s, &v| s + v))
        .collect()
}

/// Solves `A x = A·1` from x = 0 on `backend`: the report and x on the host.
fn solve_on<E: VectorOps, T: Real>(
    backend: &E,
    a: &Csr<T, u32>,
    options: &SolveOptions,
) -> Result<(SolveReport, Vec<T>), Error> {
    let b = upload(backend, &rhs_of_ones(a));
    let mut x = backend.zeros::<T>(a.rows(), 1, Layout::ColMajor)?;
    let report = Solver::new(backend, a.as_ref(), options)?.solve(b.as_ref(), x.as_mut())?;
    Ok((report, host(backend, &x)))
}

fn max_error<T: Real>(x: &[T]) -> f64 {
    x.iter()
        .map(|&v| (Scalar::to_f64(v) - 1.0).abs())
        .fold(0.0, f64::max)
}

/// Every operation once, in a fixed order, on three vectors of length n and a workspace of six
/// slots: the vectors and the slots at the end.
fn sequence<E: VectorOps, T: Real>(b: &E, n: usize) -> (Vec<Vec<T>>, [f64; 6]) {
    let f = |k: usize| -> Vec<T> {
        (0..n)
            .map(|i| T::from_f64(((i * k) % 23) as f64 / 7.0 - 1.5))
            .collect()
    };
    let (mut x, mut y, mut z) = (upload(b, &f(3)), upload(b, &f(5)), upload(b, &f(11)));
    let mut s = upload(b, &[2.5, -0.5, 0.0, 4.0, 0.0, 0.0]);
    let mut w = b.zeros::<f32>(n, 1, Layout::ColMajor).unwrap();
    b.dot(x.as_ref(), y.as_ref(), Some(z.as_ref()), s.as_mut(), [4, 5])
        .unwrap();
    b.axpy(-Coef::ratio(0, 1), x.as_ref(), y.as_mut(), s.as_ref())
        .unwrap();
    b.xpby(
        z.as_ref(),
        Coef::ratio(0, 1).times(3, 2),
        x.as_mut(),
        s.as_ref(),
    )
    .unwrap();
    b.cg_update(
        Coef::ratio(3, 0),
        z.as_ref(),
        z.as_ref(),
        x.as_mut(),
        y.as_mut(),
        s.as_mut(),
        Some(2),
    )
    .unwrap();
    let mut d = b.zeros::<T>(n, 1, Layout::ColMajor).unwrap();
    b.scale(y.as_ref(), x.as_ref(), z.as_mut(), s.as_mut(), Some([1, 3]))
        .unwrap();
    b.scale(z.as_ref(), y.as_ref(), d.as_mut(), s.as_mut(), None)
        .unwrap();
    b.convert(d.as_ref(), w.as_mut()).unwrap();
    b.convert(w.as_ref(), z.as_mut()).unwrap();
    b.dot(d.as_ref(), d.as_ref(), None, s.as_mut(), [0, 0])
        .unwrap();
    let mut out = [0.0; 6];
    b.read_scalars(s.as_ref(), &mut out).unwrap();
    let vectors = [&x, &y, &z, &d].map(|v| host(b, v)).to_vec();
    (vectors, out)
}

fn close(c: f64, g: f64, tol: f64) -> bool {
    (c - g).abs() <= tol * (1.0 + c.abs())
}

fn ops_match_the_cpu<T: Real>(gpu: &impl VectorOps, tol: f64) {
    for n in [1, 1000, 300_001] {
        let (cv, cs) = sequence::<_, T>(&CpuBackend::new(), n);
        let (gv, gs) = sequence::<_, T>(gpu, n);
        for (k, (&c, &g)) in cs.iter().zip(&gs).enumerate() {
            assert!(close(c, g, tol), "n {n} slot {k}: cpu {c} gpu {g}");
        }
        for (v, (c, g)) in cv.iter().zip(&gv).enumerate() {
            for (i, (&c, &g)) in c.iter().zip(g).enumerate() {
                let (c, g) = (Scalar::to_f64(c), Scalar::to_f64(g));
                assert!(
                    close(c, g, tol),
                    "n {n} vector {v} entry {i}: cpu {c} gpu {g}"
                );
            }
        }
        assert_eq!(
            sequence::<_, T>(gpu, n),
            (gv, gs),
            "n {n}: not reproducible"
        );
    }
}

#[test]
fn vector_operations_match_the_cpu_and_are_reproducible() {
    let Some(gpu) = cuda() else { return };
    ops_match_the_cpu::<f64>(&gpu, 1e-12);
    ops_match_the_cpu::<f32>(&gpu, 1e-3);
}

#[test]
fn cg_and_bicgstab_converge_as_on_the_cpu() {
    let Some(gpu) = cuda() else { return };
    let cusparse = CusparseBackend::sharing(&gpu).unwrap();
    let spd = generate::poisson3d::<f64, u32>(32).unwrap();
    let general = generate::convection_diffusion2d::<f64, u32>(100, 2.0).unwrap();
    for (a, method) in [
        (&spd, Method::Cg),
        (&spd, Method::Bicgstab),
        (&general, Method::Bicgstab),
    ] {
        for precond in [Precond::None, Precond::Jacobi] {
            let options = SolveOptions::default()
                .method(method)
                .precond(precond)
                .tol(1e-10);
            let (cpu, _) = solve_on(&CpuBackend::new(), a, &options).unwrap();
            for (name, (report, x)) in [
                ("cuda", solve_on(&gpu, a, &options).unwrap()),
                ("cusparse", solve_on(&cusparse, a, &options).unwrap()),
            ] {
                println!("{name} {}x{}: {report}", a.rows(), a.cols());
                assert!(
                    report.converged && report.relative_residual < 1e-9,
                    "{report}"
                );
                assert!(max_error(&x) < 1e-6, "{report}: error {}", max_error(&x));
                // BiCGSTAB's path on a non-normal matrix follows rounding: another reduction
                // order meets the tolerance in another count (and restarts elsewhere).
                let slack = match method {
                    Method::Cg => 2 + cpu.iterations / 50,
                    Method::Bicgstab => 2 + cpu.iterations / 4,
                };
                assert!(
                    report.iterations.abs_diff(cpu.iterations) <= slack,
                    "{name}: {report} but on the cpu {cpu}"
                );
            }
        }
    }
}

#[test]
fn gpu_solves_are_reproducible_and_stop_when_asked() {
    let Some(gpu) = cuda() else { return };
    let a = generate::poisson3d::<f64, u32>(24).unwrap();
    let options = SolveOptions::default().check_every(4);
    let (first, x) = solve_on(&gpu, &a, &options).unwrap();
    let (second, y) = solve_on(&gpu, &a, &options).unwrap();
    assert!(first.converged && first.iterations % 4 == 0, "{first}");
    assert_eq!(first.iterations, second.iterations);
    assert!(x.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()));

    let (stopped, x) = solve_on(&gpu, &a, &SolveOptions::default().max_iter(3)).unwrap();
    assert!(!stopped.converged && stopped.iterations == 3);
    assert!(stopped.relative_residual < 1.0 && x.iter().any(|&v| v != 0.0));
}

#[test]
fn f32_solves_and_mixed_precision_refinement_on_the_gpu() {
    let Some(gpu) = cuda() else { return };
    let a = generate::poisson3d::<f64, u32>(32).unwrap();
    let a32 = a.cast::<f32>();
    let (report, x32) = solve_on(&gpu, &a32, &SolveOptions::default().tol(1e-5)).unwrap();
    // The error is at most the condition number (about 440) times the relative residual.
    assert!(report.converged && max_error(&x32) < 1e-2, "{report}");

    let b = upload(&gpu, &rhs_of_ones(&a));
    let mut x = gpu.zeros::<f64>(a.rows(), 1, Layout::ColMajor).unwrap();
    let refined = refine(
        &gpu,
        a.as_ref(),
        a32.as_ref(),
        b.as_ref(),
        x.as_mut(),
        &RefineOptions::default(),
    )
    .unwrap();
    println!("refinement: {refined:?}");
    assert!(
        refined.converged && refined.relative_residual <= 1e-10,
        "{refined:?}"
    );
    assert!(max_error(&host(&gpu, &x)) < 1e-7);
}

#[test]
fn typed_errors_on_the_gpu() {
    let Some(gpu) = cuda() else { return };
    let negative = Csr::<f64, u32>::from_triplets(2, 2, &[(0, 0, -2.0), (1, 1, -1.0)]).unwrap();
    let err = solve_on(&gpu, &negative, &SolveOptions::default()).unwrap_err();
    assert!(matches!(err, Error::NotSpd { iteration: 1, .. }), "{err}");

    let swap = Csr::<f64, u32>::from_triplets(2, 2, &[(0, 1, 1.0), (1, 0, 1.0)]).unwrap();
    let b = upload(&gpu, &[1.0, 0.0]);
    let mut x = gpu.zeros::<f64>(2, 1, Layout::ColMajor).unwrap();
    let options = SolveOptions::default().method(Method::Bicgstab);
    let err = Solver::new(&gpu, swap.as_ref(), &options)
        .unwrap()
        .solve(b.as_ref(), x.as_mut())
        .unwrap_err();
    assert!(
        matches!(err, Error::Breakdown { iteration: 1, .. }),
        "{err}"
    );

    let jacobi = SolveOptions::default().precond(Precond::Jacobi);
    assert!(matches!(
        Solver::new(&gpu, swap.as_ref(), &jacobi).err().unwrap(),
        Error::ZeroDiagonal { row: 0 }
    ));
    let host_b = [1.0, 0.0];
    let err = Solver::new(&gpu, negative.as_ref(), &SolveOptions::default())
        .unwrap()
        .solve(DenseRef::vector(&host_b), x.as_mut())
        .unwrap_err();
    assert!(matches!(err, Error::WrongMemory { .. }), "{err}");
}
