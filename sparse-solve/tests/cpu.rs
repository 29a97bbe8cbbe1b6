//! The solvers on the CPU backend: convergence on generated SPD and non-symmetric systems,
//! Jacobi, mixed-precision refinement, and every typed error.

use sparse_core::{DenseMut, DenseRef, Error, Real};
use sparse_cpu::CpuBackend;
use sparse_formats::{generate, Csr};
use sparse_solve::{refine, solve, Method, Precond, RefineOptions, SolveOptions, Solver};

/// `b = A·1`, so that the solution is all ones.
fn rhs_of_ones<T: Real>(a: &Csr<T, u32>) -> Vec<T> {
    (0..a.rows())
        .map(|i| a.as_ref().row(i).1.iter().fold(T::zero(), |s, &v| s + v))
        .collect()
}

fn max_error<T: Real>(x: &[T]) -> f64 {
    x.iter()
        .map(|&v| (sparse_core::Scalar::to_f64(v) - 1.0).abs())
        .fold(0.0, f64::max)
}

/// Poisson 2D scaled symmetrically by a varying diagonal: SPD with a diagonal spread over two
/// orders of magnitude, where Jacobi pays.
fn scaled_poisson(n: usize) -> Csr<f64, u32> {
    let a = generate::poisson2d::<f64, u32>(n).unwrap();
    let d: Vec<f64> = (0..a.rows())
        .map(|i| 1.0 + (i % 97) as f64 / 10.0)
        .collect();
    let mut t = Vec::new();
    for i in 0..a.rows() {
        let (cols, vals) = a.as_ref().row(i);
        for (&c, &v) in cols.iter().zip(vals) {
            t.push((i, c as usize, d[i] * v * d[c as usize]));
        }
    }
    Csr::from_triplets(a.rows(), a.cols(), &t).unwrap()
}

fn run(a: &Csr<f64, u32>, options: &SolveOptions) -> (sparse_solve::SolveReport, Vec<f64>) {
    let b = rhs_of_ones(a);
    let mut x = vec![0.0; a.rows()];
    let report = solve(
        &CpuBackend::new(),
        a.as_ref(),
        DenseRef::vector(&b),
        DenseMut::vector(&mut x),
        options,
    )
    .unwrap();
    (report, x)
}

#[test]
fn cg_converges_on_poisson_with_and_without_jacobi() {
    let a = generate::poisson3d::<f64, u32>(16).unwrap();
    for precond in [Precond::None, Precond::Jacobi] {
        let options = SolveOptions::default().precond(precond).tol(1e-10);
        let (report, x) = run(&a, &options);
        assert!(report.converged, "{report}");
        assert!(report.relative_residual < 1e-9, "{report}");
        assert!(max_error(&x) < 1e-7, "{report}: error {}", max_error(&x));
        assert!(
            report.iterations > 10 && report.iterations < 200,
            "{report}"
        );
        assert!(report.spmv_share > 0.0 && report.spmv_share <= 1.0);
    }
}

#[test]
fn jacobi_pays_on_a_varying_diagonal() {
    let a = scaled_poisson(40);
    let (plain, _) = run(&a, &SolveOptions::default().tol(1e-8));
    let (jacobi, x) = run(
        &a,
        &SolveOptions::default().tol(1e-8).precond(Precond::Jacobi),
    );
    assert!(plain.converged && jacobi.converged);
    assert!(jacobi.iterations < plain.iterations, "{jacobi} vs {plain}");
    assert!(max_error(&x) < 1e-5);
}

#[test]
fn bicgstab_converges_on_a_non_symmetric_system() {
    // At n = 100 the recurrence's residual meets 1e-10 well before b - Ax does.
    for n in [40, 100] {
        let a = generate::convection_diffusion2d::<f64, u32>(n, 2.0).unwrap();
        assert!(!a.is_symmetric().unwrap());
        for precond in [Precond::None, Precond::Jacobi] {
            let options = SolveOptions::default()
                .method(Method::Bicgstab)
                .precond(precond)
                .tol(1e-10)
                .history(true);
            let (report, x) = run(&a, &options);
            assert!(report.converged, "{report}");
            assert!(report.relative_residual <= 1e-10, "{report}");
            assert!(max_error(&x) < 1e-6, "{report}");
            assert!(report.history.len() > report.iterations, "{report}");
            assert!(*report.history.last().unwrap() <= 1e-10, "{report}");
        }
    }
    let (report, _) = run(
        &generate::poisson2d::<f64, u32>(30).unwrap(),
        &SolveOptions::default().method(Method::Bicgstab),
    );
    assert!(report.converged, "{report}");
}

#[test]
fn checking_every_k_iterations_converges_too_and_solves_are_reproducible() {
    let a = generate::poisson2d::<f64, u32>(32).unwrap();
    let options = SolveOptions::default().check_every(8);
    let (report, x) = run(&a, &options);
    assert!(report.converged && report.iterations % 8 == 0, "{report}");
    let (again, y) = run(&a, &options);
    assert_eq!(report.iterations, again.iterations);
    assert!(x.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn running_out_of_iterations_returns_the_last_iterate() {
    let a = generate::poisson2d::<f64, u32>(32).unwrap();
    let (report, x) = run(&a, &SolveOptions::default().max_iter(5));
    assert!(!report.converged);
    assert_eq!(report.iterations, 5);
    assert!(report.relative_residual < 1.0 && report.relative_residual > 1e-3);
    assert!(x.iter().any(|&v| v != 0.0));
}

#[test]
fn f32_solves_and_mixed_precision_refinement_reach_their_tolerances() {
    let a = generate::poisson3d::<f64, u32>(12).unwrap();
    let a32 = a.cast::<f32>();
    let b32 = rhs_of_ones(&a32);
    let mut x32 = vec![0.0f32; a.rows()];
    let report = solve(
        &CpuBackend::new(),
        a32.as_ref(),
        DenseRef::vector(&b32),
        DenseMut::vector(&mut x32),
        &SolveOptions::default().tol(1e-5),
    )
    .unwrap();
    assert!(report.converged && max_error(&x32) < 1e-3, "{report}");
    // 1e-12 is below what f32 attains: the solve stops when a restart no longer lowers b - Ax.
    let mut x32 = vec![0.0f32; a.rows()];
    let report = solve(
        &CpuBackend::new(),
        a32.as_ref(),
        DenseRef::vector(&b32),
        DenseMut::vector(&mut x32),
        &SolveOptions::default().tol(1e-12),
    )
    .unwrap();
    assert!(!report.converged && report.iterations < 200, "{report}");
    assert!(report.relative_residual < 1e-5, "{report}");

    let b = rhs_of_ones(&a);
    let mut x = vec![0.0; a.rows()];
    let refined = refine(
        &CpuBackend::new(),
        a.as_ref(),
        a32.as_ref(),
        DenseRef::vector(&b),
        DenseMut::vector(&mut x),
        &RefineOptions::default(),
    )
    .unwrap();
    assert!(
        refined.converged && refined.relative_residual <= 1e-10,
        "{refined:?}"
    );
    assert!(
        refined.refinements >= 2 && max_error(&x) < 1e-8,
        "{refined:?}"
    );
}

#[test]
fn bad_systems_give_typed_errors() {
    let cpu = CpuBackend::new();
    let rect = Csr::<f64, u32>::from_triplets(3, 2, &[(0, 0, 1.0), (2, 1, 1.0)]).unwrap();
    assert!(matches!(
        Solver::new(&cpu, rect.as_ref(), &SolveOptions::default()),
        Err(Error::NotSquare { rows: 3, cols: 2 })
    ));

    let no_diagonal =
        Csr::<f64, u32>::from_triplets(2, 2, &[(0, 1, 1.0), (1, 0, 1.0), (1, 1, 2.0)]).unwrap();
    let jacobi = SolveOptions::default().precond(Precond::Jacobi);
    let err = Solver::new(&cpu, no_diagonal.as_ref(), &jacobi)
        .err()
        .unwrap();
    assert!(matches!(err, Error::ZeroDiagonal { row: 0 }), "{err}");

    let b = [1.0, 1.0];
    let mut x = [0.0; 2];
    let negative = Csr::<f64, u32>::from_triplets(2, 2, &[(0, 0, -2.0), (1, 1, -1.0)]).unwrap();
    let err = solve(
        &cpu,
        negative.as_ref(),
        DenseRef::vector(&b),
        DenseMut::vector(&mut x),
        &SolveOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotSpd { iteration: 1, .. }), "{err}");

    let swap = Csr::<f64, u32>::from_triplets(2, 2, &[(0, 1, 1.0), (1, 0, 1.0)]).unwrap();
    let b = [1.0, 0.0];
    let mut x = [0.0; 2];
    let err = solve(
        &cpu,
        swap.as_ref(),
        DenseRef::vector(&b),
        DenseMut::vector(&mut x),
        &SolveOptions::default().method(Method::Bicgstab),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Breakdown {
                method: "bicgstab",
                iteration: 1,
                ..
            }
        ),
        "{err}"
    );

    let mut short = [0.0; 1];
    assert!(matches!(
        solve(
            &cpu,
            swap.as_ref(),
            DenseRef::vector(&b),
            DenseMut::vector(&mut short),
            &SolveOptions::default()
        ),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn a_zero_right_hand_side_gives_zero() {
    let a = generate::poisson2d::<f64, u32>(8).unwrap();
    let b = vec![0.0; a.rows()];
    let mut x = vec![3.0; a.rows()];
    for method in [Method::Cg, Method::Bicgstab] {
        let report = solve(
            &CpuBackend::new(),
            a.as_ref(),
            DenseRef::vector(&b),
            DenseMut::vector(&mut x),
            &SolveOptions::default().method(method),
        )
        .unwrap();
        assert!(report.converged && report.iterations == 0);
        assert!(x.iter().all(|&v| v == 0.0));
    }
}
