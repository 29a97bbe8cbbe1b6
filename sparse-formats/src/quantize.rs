//! Symmetric quantization to i8 and i4, and back.
//!
//! A value `x` with scale `s` is stored as `q = round(x / s)`, saturated to `[-Q, Q]` with
//! `Q = 127` (i8) or `7` (i4), and read back as `q * s`:
//! - **Symmetric**: no zero point, so a product of two quantized operands is the product of
//!   their integers times the product of their scales, which is what lets an integer kernel
//!   sum exactly in i32 and apply the scales once, to its output.
//! - **Range**: -128 (i8) and -8 (i4) are never produced, so the range is symmetric, negation
//!   never overflows, and a scale means the same on both sides of zero.
//! - **Scale**: `s = max|x| / Q` in f32 over what the scale covers (the tensor, a row or a
//!   column), so nothing saturates and every value is within `s / 2` of its reconstruction; a
//!   group of zeros gets scale 1 (its values quantize to 0 whatever the scale).
//! - **Rounding**: to nearest, ties to even (as the GPU's `cvt.rni` does), computed in f64 from
//!   the f32 scale, so the host and any device agree on every value.
//! - NaN and infinities are refused: they have no integer image.
//!
//! i4 values are held one per i8, in `[-7, 7]`; packing two per byte is a kernel's business.

use sparse_core::{CsrRef, Dense, DenseRef, Error, Layout, Result, Scalar, SpIndex};

use crate::csr::Csr;

/// The integer width quantized to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantBits {
    I8,
    I4,
}

impl QuantBits {
    /// The largest magnitude stored: 127 or 7.
    pub fn max_level(self) -> i8 {
        match self {
            QuantBits::I8 => 127,
            QuantBits::I4 => 7,
        }
    }
}

/// What one scale covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleAxis {
    /// One scale for the whole matrix.
    Tensor,
    /// One scale per row.
    Row,
    /// One scale per column.
    Column,
}

/// The scales of a quantized matrix: one, or one per row or column.
#[derive(Clone, Debug, PartialEq)]
pub struct Scales {
    pub axis: ScaleAxis,
    pub values: Vec<f32>,
}

impl Scales {
    /// The scale of element (i, j).
    pub fn at(&self, i: usize, j: usize) -> f32 {
        match self.axis {
            ScaleAxis::Tensor => self.values[0],
            ScaleAxis::Row => self.values[i],
            ScaleAxis::Column => self.values[j],
        }
    }
}

/// The scale for a group whose largest magnitude is `max_abs`.
pub fn scale_for(max_abs: f64, bits: QuantBits) -> f32 {
    if max_abs == 0.0 {
        1.0
    } else {
        // In f32, as a device computes it from f32 data.
        max_abs as f32 / f32::from(bits.max_level())
    }
}

/// `x` quantized with scale `s` (see the module documentation).
pub fn quantize_value(x: f64, s: f32, bits: QuantBits) -> i8 {
    let q = f64::from(bits.max_level());
    (x / f64::from(s)).round_ties_even().clamp(-q, q) as i8
}

/// `acc`, a sum of products of quantized values, in the units of the originals: `acc` times
/// the two scales its factors carried.
pub fn dequantize(acc: i32, left: f32, right: f32) -> f32 {
    (f64::from(acc) * f64::from(left) * f64::from(right)) as f32
}

fn check_finite(x: f64, what: &str) -> Result<f64> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(Error::invalid(format!(
            "{what} holds {x}, which has no integer image"
        )))
    }
}

/// The scales of a `rows x cols` matrix whose elements `elements` lists as (i, j, x).
fn scales_of(
    (rows, cols): (usize, usize),
    axis: ScaleAxis,
    bits: QuantBits,
    elements: impl Iterator<Item = (usize, usize, f64)>,
    what: &str,
) -> Result<Scales> {
    let len = match axis {
        ScaleAxis::Tensor => 1,
        ScaleAxis::Row => rows,
        ScaleAxis::Column => cols,
    };
    let mut max_abs = vec![0.0f64; len];
    for (i, j, x) in elements {
        let slot = match axis {
            ScaleAxis::Tensor => 0,
            ScaleAxis::Row => i,
            ScaleAxis::Column => j,
        };
        max_abs[slot] = max_abs[slot].max(check_finite(x, what)?.abs());
    }
    Ok(Scales {
        axis,
        values: max_abs.into_iter().map(|m| scale_for(m, bits)).collect(),
    })
}

/// A dense matrix quantized: its integers (row-major) and scales.
pub fn quantize_dense<T: Scalar>(
    x: DenseRef<'_, T>,
    bits: QuantBits,
    axis: ScaleAxis,
) -> Result<(Dense<i8>, Scales)> {
    let (rows, cols) = (x.rows(), x.cols());
    let all = (0..rows).flat_map(|i| (0..cols).map(move |j| (i, j)));
    let scales = scales_of(
        (rows, cols),
        axis,
        bits,
        all.map(|(i, j)| (i, j, x.at(i, j).to_f64())),
        "a dense matrix to quantize",
    )?;
    let q = Dense::from_fn(rows, cols, Layout::RowMajor, |i, j| {
        quantize_value(x.at(i, j).to_f64(), scales.at(i, j), bits)
    });
    Ok((q, scales))
}

/// A sparse matrix quantized, same pattern: its integers and scales (per tensor or per row;
/// per column is accepted too).
pub fn quantize_csr<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    bits: QuantBits,
    axis: ScaleAxis,
) -> Result<(Csr<i8, I>, Scales)> {
    let entries = || {
        (0..a.rows()).flat_map(move |i| {
            let (cols, vals) = a.row(i);
            cols.iter()
                .zip(vals)
                .map(move |(&j, v)| (i, j.to_usize(), v.to_f64()))
        })
    };
    let scales = scales_of(
        (a.rows(), a.cols()),
        axis,
        bits,
        entries(),
        "a sparse matrix to quantize",
    )?;
    let values = entries()
        .map(|(i, j, x)| quantize_value(x, scales.at(i, j), bits))
        .collect();
    let q = Csr::try_new(
        a.rows(),
        a.cols(),
        a.row_ptr().to_vec(),
        a.col_idx().to_vec(),
        values,
    )
    .map_err(|rejected| rejected.error)?;
    Ok((q, scales))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_even_and_saturates_symmetrically() {
        let b = QuantBits::I8;
        assert_eq!(quantize_value(2.5, 1.0, b), 2);
        assert_eq!(quantize_value(3.5, 1.0, b), 4);
        assert_eq!(quantize_value(-2.5, 1.0, b), -2);
        assert_eq!(quantize_value(1000.0, 1.0, b), 127);
        assert_eq!(quantize_value(-1000.0, 1.0, b), -127);
        assert_eq!(quantize_value(-1000.0, 1.0, QuantBits::I4), -7);
        assert_eq!(quantize_value(0.74, 0.1, QuantBits::I4), 7);
    }

    #[test]
    fn every_value_is_within_half_a_step_of_its_reconstruction() {
        let x = Dense::from_fn(5, 7, Layout::ColMajor, |i, j| {
            ((i * 7 + j * 3) % 11) as f32 / 3.0 - 1.7 + i as f32
        });
        for bits in [QuantBits::I8, QuantBits::I4] {
            for axis in [ScaleAxis::Tensor, ScaleAxis::Row, ScaleAxis::Column] {
                let (q, s) = quantize_dense(x.as_ref(), bits, axis).unwrap();
                for i in 0..5 {
                    for j in 0..7 {
                        let back = f32::from(q.as_ref().at(i, j)) * s.at(i, j);
                        let err = (back - x.as_ref().at(i, j)).abs();
                        assert!(
                            err <= s.at(i, j) / 2.0 * 1.0001,
                            "{bits:?} {axis:?} ({i},{j})"
                        );
                        assert!(q.as_ref().at(i, j).abs() <= bits.max_level());
                    }
                }
                // The largest magnitude of each group lands on the top level.
                let top = (0..5)
                    .flat_map(|i| (0..7).map(move |j| (i, j)))
                    .map(|(i, j)| q.as_ref().at(i, j).abs())
                    .max();
                assert_eq!(top, Some(bits.max_level()));
            }
        }
    }

    #[test]
    fn sparse_rows_get_their_own_scales_and_zero_rows_scale_one() {
        let a = Csr::<f32>::from_triplets(3, 4, &[(0, 1, 2.0), (0, 3, -1.1), (2, 0, 0.5)]).unwrap();
        let (q, s) = quantize_csr(a.as_ref(), QuantBits::I8, ScaleAxis::Row).unwrap();
        let close = |a: f32, b: f64| (f64::from(a) - b).abs() <= 1e-6 * b.abs();
        assert!(close(s.values[0], 2.0 / 127.0) && close(s.values[2], 0.5 / 127.0));
        assert_eq!(s.values[1], 1.0);
        assert_eq!(q.values(), &[127, -70, 127]);
        assert_eq!(q.col_idx(), a.col_idx());
        assert!(close(dequantize(127 * 127, s.at(0, 0), s.at(0, 0)), 4.0));
    }

    #[test]
    fn non_finite_values_are_refused() {
        let a = Csr::<f32>::from_triplets(1, 2, &[(0, 1, f32::NAN)]).unwrap();
        assert!(matches!(
            quantize_csr(a.as_ref(), QuantBits::I8, ScaleAxis::Tensor),
            Err(Error::InvalidArgument { .. })
        ));
    }
}
