//! The main job: every operation on a 3D Poisson stencil and an R-MAT power-law graph (or on a
//! given matrix), on the chosen backend, timed and checked against the oracle.

use std::path::Path;
use std::time::Duration;

use sparse_blas::generate::{self, SplitMix64};
use sparse_blas::{
    bf16, f16, io, AttentionDesc, Backend, BackendRequest, Csr, DType, Dense, Error, Executor,
    Format, Layout, OpKind, Precision, Result, Scalar, SddmmDesc, SpmmDesc, SpmvDesc, Support,
};

use crate::measure::{self, cast_dense, Repeat, Row, Update};

const SPMM_N: usize = 64;
const SDDMM_K: usize = 32;
const ATTENTION_D: usize = 32;
const ATTENTION_HEADS: usize = 2;
const REPEAT: Repeat = Repeat {
    runs: 50,
    budget: Duration::from_millis(500),
};

/// Runs the job; `Ok(false)` when a result left its error bound.
pub fn run(matrix: Option<&Path>, request: BackendRequest, precision: Precision) -> Result<bool> {
    let backend = Backend::new(request)?;
    let problems: Vec<(String, Csr<f64>)> = match matrix {
        Some(path) => vec![(path.display().to_string(), io::read_csr(path)?)],
        None => vec![
            ("poisson3d 64^3".to_string(), generate::poisson3d(64)?),
            (
                "rmat scale 17, 16 edges/vertex".to_string(),
                generate::rmat(17, 16, 42)?,
            ),
        ],
    };
    println!("backend: {}", backend.description());
    let mut all_passed = true;
    for (name, a) in &problems {
        println!(
            "\n{name}: {} x {}, {} nonzeros",
            a.rows(),
            a.cols(),
            a.nnz()
        );
        println!("{}", Row::HEADER);
        let rows = match precision.storage {
            DType::F64 => ops::<f64>(&backend, a, precision),
            DType::F32 => ops::<f32>(&backend, a, precision),
            DType::F16 => ops::<f16>(&backend, a, precision),
            DType::BF16 => ops::<bf16>(&backend, a, precision),
            DType::I8 => ops::<i8>(&backend, a, precision),
            DType::I16 => ops::<i16>(&backend, a, precision),
            _ => Err(Error::invalid(format!(
                "the main job has no {precision} variant"
            ))),
        }?;
        for row in rows {
            println!("{}", row.line());
            all_passed &= row.passed();
        }
    }
    Ok(all_passed)
}

/// Dense operand with values in [-1, 1), the same for every run.
fn random_dense<T: Scalar>(rows: usize, cols: usize, seed: u64) -> Dense<T> {
    let mut rng = SplitMix64::new(seed);
    cast_dense(&Dense::from_fn(rows, cols, Layout::RowMajor, |_, _| {
        2.0 * rng.next_f64() - 1.0
    }))
}

fn ops<T: Scalar>(backend: &Backend, a: &Csr<f64>, precision: Precision) -> Result<Vec<Row>> {
    // Integer operands hold small integers so that products and sums stay exact and in range.
    let a: Csr<T> = if T::DTYPE.is_integer() {
        integer_valued(a).cast()
    } else {
        a.cast()
    };
    let no_prior = || Update::<T::Out> {
        alpha: 1.0,
        beta: 0.0,
        prior: None,
    };
    let supported = |op| backend.capability(op, Format::Csr, precision) != Support::Unsupported;
    let mut rows = Vec::new();
    if supported(OpKind::Spmv) {
        let x = random_dense::<T>(a.cols(), 1, 1);
        rows.push(
            measure::spmv(
                backend,
                &a,
                &SpmvDesc::new(precision),
                &x,
                no_prior(),
                REPEAT,
                true,
            )?
            .1,
        );
    }
    if supported(OpKind::Spmm) {
        let b = random_dense::<T>(a.cols(), SPMM_N, 2);
        rows.push(
            measure::spmm(
                backend,
                &a,
                &SpmmDesc::new(precision),
                &b,
                no_prior(),
                Layout::RowMajor,
                REPEAT,
                true,
            )?
            .1,
        );
    }
    if supported(OpKind::Sddmm) {
        let (x, y) = (
            random_dense::<T>(a.rows(), SDDMM_K, 3),
            random_dense::<T>(a.cols(), SDDMM_K, 4),
        );
        rows.push(
            measure::sddmm(
                backend,
                &a,
                &SddmmDesc::new(precision),
                &x,
                &y,
                no_prior(),
                REPEAT,
                true,
            )?
            .1,
        );
    }
    if supported(OpKind::Attention) {
        rows.push(attention::<T>(backend, &a, precision)?);
    } else if T::DTYPE == DType::F64
        && backend.capability(OpKind::Attention, Format::Csr, Precision::F32)
            != Support::Unsupported
    {
        // The GPU computes attention in f32, f16 and bf16: an f64 job shows it in f32.
        rows.push(attention::<f32>(backend, &a.cast(), Precision::F32)?);
    }
    Ok(rows)
}

/// Attention with [`ATTENTION_HEADS`] heads of width [`ATTENTION_D`] on `a`.
fn attention<T: Scalar>(backend: &Backend, a: &Csr<T>, precision: Precision) -> Result<Row> {
    let width = ATTENTION_HEADS * ATTENTION_D;
    let q = random_dense::<T>(a.rows(), width, 5);
    let (k, v) = (
        random_dense::<T>(a.cols(), width, 6),
        random_dense::<T>(a.cols(), width, 7),
    );
    let desc = AttentionDesc::new(precision).heads(ATTENTION_HEADS);
    Ok(measure::attention(backend, a, &desc, &q, &k, &v, REPEAT, true)?.1)
}

/// The same pattern with values in -3..=3, for integer precisions.
fn integer_valued(a: &Csr<f64>) -> Csr<f64> {
    let mut a = a.clone();
    for (k, v) in a.values_mut().iter_mut().enumerate() {
        *v = (k % 7) as f64 - 3.0;
    }
    a
}
