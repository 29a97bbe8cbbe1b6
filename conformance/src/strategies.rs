//! proptest strategies: small matrices of any density, dense operands, coefficients, and whole
//! cases. They shrink towards smaller and emptier matrices and simpler values.

use proptest::collection::vec;
use proptest::prelude::*;
use sparse_blas::{Csr, Layout, OpKind};

use crate::case::{Case, Fill, MatrixSource, Strides};

/// Largest number of rows or columns of a generated matrix.
pub const MAX_DIM: usize = 40;
/// Largest dense width (N, K or d); 0 is included.
pub const MAX_WIDTH: usize = 9;

/// An integer in [-4, 4] or a real in [-1, 1].
pub fn value() -> impl Strategy<Value = f64> {
    prop_oneof![(-4i32..=4).prop_map(f64::from), -1.0..=1.0f64]
}

/// A matrix up to `MAX_DIM x MAX_DIM` (empty shapes included) whose entries are each present
/// with one probability: 0, 1, or anything between.
pub fn sparse_matrix() -> impl Strategy<Value = Csr<f64>> {
    (
        0..=MAX_DIM,
        0..=MAX_DIM,
        prop_oneof![Just(0.0), Just(1.0), 0.0..=1.0f64],
    )
        .prop_flat_map(|(rows, cols, density)| {
            let n = rows * cols;
            (
                Just(rows),
                Just(cols),
                vec(prop::bool::weighted(density), n),
                vec(value(), n),
            )
        })
        .prop_map(|(rows, cols, present, values)| {
            let triplets: Vec<(usize, usize, f64)> = (0..rows * cols)
                .filter(|&k| present[k])
                .map(|k| (k / cols, k % cols, values[k]))
                .collect();
            Csr::from_triplets(rows, cols, &triplets)
                .expect("positions below rows x cols are valid")
        })
}

/// Dense operand values, used in turn: mostly [`value`]s, now and then NaN and (when
/// `infinite`) ±inf.
pub fn dense_values(infinite: bool) -> impl Strategy<Value = Fill> {
    let special = if infinite {
        prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY)].boxed()
    } else {
        Just(f64::NAN).boxed()
    };
    vec(prop_oneof![16 => value(), 1 => special], 1..8).prop_map(|v| Fill::Cycle(v.into()))
}

/// alpha or beta: 0, ±1, small integers, or reals in [-2, 2].
pub fn coefficient() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(1.0),
        Just(-1.0),
        (-3i32..=3).prop_map(f64::from),
        -2.0..=2.0f64,
    ]
}

pub fn layout() -> impl Strategy<Value = Layout> {
    prop_oneof![Just(Layout::RowMajor), Just(Layout::ColMajor)]
}

/// A whole case of `op`, run in every precision and algorithm of the backend. Attention gets
/// no infinities: where exp underflows differently in f32 and f64, `0 * inf` is NaN on one
/// side only, which says nothing about the kernel.
pub fn case(op: OpKind) -> impl Strategy<Value = Case> {
    let linear = op != OpKind::Attention;
    (
        sparse_matrix(),
        (layout(), layout(), any::<bool>()),
        0..=MAX_WIDTH,
        (coefficient(), coefficient()),
        (dense_values(linear), dense_values(true)),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            move |(
                matrix,
                (input_layout, output_layout, padded),
                width,
                (alpha, beta),
                (inputs, prior),
                scale_by_values,
                seed,
            )| Case {
                label: "proptest".to_string(),
                input_layout,
                output_layout,
                strides: if padded {
                    Strides::Padded
                } else {
                    Strides::Tight
                },
                width,
                alpha,
                beta,
                inputs,
                prior: if linear { prior } else { Fill::Nan },
                scale_by_values,
                seed,
                ..Case::new(op, MatrixSource::generated("proptest", matrix))
            },
        )
}
