//! Per-entry error bounds: how far a backend's result may lie from the oracle's.
//!
//! The oracle (`sparse_blas::reference`) reads the very values the kernel reads: the harness
//! rounds every input to the tested storage type (and to TF32 when the compute mode is TF32,
//! see [`round_to_tf32`]) before handing it to both. So input rounding cancels out, and a bound
//! only has to cover the rounding the kernel does while computing, the rounding the oracle does
//! in f64, and the final store of the result.
//!
//! # SpMV, SpMM, SDDMM
//! For output entry i with reference value `ref_i` (a sum of `k_i` products, then
//! `alpha*sum + beta*y_i`):
//!
//! ```text
//! |got_i - ref_i| <= (gamma(k_i+2, u) + gamma(k_i+2, u64)) * (S_i + |beta*y_i|) * (1 + u_out)
//!                    + u_out * |ref_i|
//! S_i = sum_j |alpha * a_ij * x_j|        (the reference run on |A| and |x|)
//! ```
//!
//! (plus `(k_i+2) * eta + eta_out/2` for underflow, with `eta` and `eta_out` the smallest
//! subnormals of the accumulation and output types: below the normal range rounding errors
//! are absolute, `fl(x) = x*(1+d) + e` with `|e| <= eta/2`).
//!
//! `gamma(k, u) = k*u / (1 - k*u)` bounds the relative error of any order of summing k
//! rounded products (Higham, Accuracy and Stability of Numerical Algorithms, 3.1), so the
//! kernel may sum in any order, split rows and combine partial sums. The `+2` covers the scaling
//! by alpha and the update with `beta*y_i`. `u` is the unit roundoff of the accumulation, `u64`
//! that of the oracle's own f64 arithmetic, `u_out` that of the output type. Integer paths
//! (i8 inputs, i32 accumulation and output) must match the oracle exactly, which holds for it
//! as long as its f64 sums of integers stay below 2^53.
//!
//! # Attention
//! See [`ErrorModel::attention`]: the bound is relative to the largest |v| the row mixes.
//!
//! # Special values
//! NaN on both sides passes; NaN on one side fails. An infinite reference must be matched
//! exactly. An infinite result for a finite reference passes only where the output type
//! overflows: when a value within the bound of the reference rounds to that infinity.

use sparse_blas::bound::smallest_subnormal;
use sparse_blas::{bf16, f16, Compute, DType, Precision};

/// Unit roundoff of f64, the arithmetic of the oracle.
const ORACLE_ROUNDOFF: f64 = f64::EPSILON / 2.0;

/// Ulps of error allowed to one `exp`. Correctly rounded exp has 0.5 ulp and libm's `expf`
/// under 1 ulp; CUDA's accurate `expf` has 2. (The fast `__expf` intrinsic has far more and is
/// not covered.)
const EXP_ULPS: f64 = 4.0;

/// Factor on the first-order attention bound, for the second-order terms it leaves out.
const ATTENTION_SAFETY: f64 = 2.0;

/// `k*u / (1 - k*u)`: the relative error of k rounded operations; infinite once `k*u >= 1`.
pub fn gamma(k: usize, u: f64) -> f64 {
    let ku = k as f64 * u;
    if ku < 1.0 {
        ku / (1.0 - ku)
    } else {
        f64::INFINITY
    }
}

/// Unit roundoff of storing a value in `dtype`; 0 for the integer types.
pub fn storage_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => f64::EPSILON / 2.0,
        DType::F32 => f64::from(f32::EPSILON) / 2.0,
        DType::F16 => 2f64.powi(-11),
        DType::BF16 => 2f64.powi(-8),
        _ => 0.0,
    }
}

/// The smallest magnitude that rounds to infinity when stored in `dtype` (the largest finite
/// value plus half an ulp); infinite for f64 and for the integer types, which saturate.
pub fn overflow_threshold(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => f64::from(f32::MAX) + 2f64.powi(103),
        DType::F16 => f16::MAX.to_f64() + 16.0,
        DType::BF16 => bf16::MAX.to_f64() + 2f64.powi(119),
        _ => f64::INFINITY,
    }
}

/// `x` rounded to TF32 (10 explicit mantissa bits, 8 exponent bits), to nearest, ties to even.
///
/// Tensor cores read only the top 19 bits of an f32 in TF32 mode, so the harness rounds inputs
/// with this before giving them to the oracle and the kernel alike: then truncation or any
/// rounding inside the kernel leaves them unchanged.
pub fn round_to_tf32(x: f32) -> f32 {
    const DROPPED_BITS: u32 = 23 - 10;
    if !x.is_finite() {
        return x;
    }
    let bits = x.to_bits();
    let half = 1u32 << (DROPPED_BITS - 1);
    let odd = (bits >> DROPPED_BITS) & 1;
    // A carry out of the mantissa bumps the exponent, which is the correct rounding, up to
    // infinity past the largest TF32 value.
    f32::from_bits((bits + half - 1 + odd) & !((1u32 << DROPPED_BITS) - 1))
}

/// The rounding a backend's computation of one precision is allowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErrorModel {
    /// Unit roundoff of the accumulation.
    pub u: f64,
    /// Unit roundoff of the output type.
    pub u_out: f64,
    /// Smallest subnormal of the accumulation: the absolute error of one rounding below the
    /// normal range.
    pub eta: f64,
    /// Smallest subnormal of the output type.
    pub eta_out: f64,
    /// The output type (decides which magnitudes overflow).
    pub output: DType,
    /// Integer arithmetic: results must equal the oracle's.
    pub exact: bool,
}

/// What the attention bound of one output entry (i, t) is made of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionTerms {
    /// Entries of row i (the number of scores mixed).
    pub entries: usize,
    /// Width d of Q and K (the number of products in a score).
    pub width: usize,
    /// `|scale| * max_j sum_t |q_it * k_jt|` over the row's columns j.
    pub score_magnitude: f64,
    /// `max_j |v_jt|` over the row's columns j.
    pub v_max: f64,
}

impl ErrorModel {
    /// The model of `precision` storing its results in `output`.
    pub fn new(precision: Precision, output: DType) -> Self {
        let exact = precision.compute.is_integer();
        let accumulation = match precision.compute {
            Compute::F64 => DType::F64,
            _ if exact => DType::I32,
            _ => DType::F32,
        };
        ErrorModel {
            u: precision.compute.unit_roundoff(),
            u_out: if exact { 0.0 } else { storage_roundoff(output) },
            eta: smallest_subnormal(accumulation),
            eta_out: if exact {
                0.0
            } else {
                smallest_subnormal(output)
            },
            output,
            exact,
        }
    }

    /// Bound of one SpMV/SpMM/SDDMM entry: `terms` products summed (plus one for SDDMM's
    /// multiplication by S's value), `magnitude = sum |alpha * product|`, `prior = |beta*y|`
    /// (0 when beta is 0, since y is then never read).
    pub fn linear(&self, terms: usize, magnitude: f64, prior: f64, reference: f64) -> f64 {
        if self.exact {
            return 0.0;
        }
        let k = terms + 2;
        let summing = gamma(k, self.u) + gamma(k, ORACLE_ROUNDOFF);
        summing * (magnitude + prior) * (1.0 + self.u_out) + self.store(k, reference)
    }

    /// The final store of `reference` into the output type, with `k` roundings' underflow.
    fn store(&self, k: usize, reference: f64) -> f64 {
        self.u_out * reference.abs() + k as f64 * self.eta + self.eta_out / 2.0
    }

    /// Bound of one attention entry O(i, t), relative to the largest |v| the row mixes.
    ///
    /// Scores `s_j = scale * q_i . k_j` carry an absolute error of at most
    /// `D = gamma(d+2, u) * score_magnitude` (d products, the sum, the scale, itself rounded).
    /// A weight `exp(s_j - max)` then has a relative error of at most
    /// `rho = expm1(2D) + (k + EXP_ULPS + 1) * u`: the shift is off by up to 2D, exp adds its
    /// ulps, and an online softmax rescales the running sums up to k times, one rounding each.
    /// O is a convex combination of the v_jt: perturbing every weight by a relative `rho`
    /// moves it by at most `2*rho/(1-rho) * v_max`; summing the weighted values and the
    /// normaliser adds `2*gamma(k+1, u) * v_max`. The sum of these is multiplied by
    /// `ATTENTION_SAFETY` (2) for the second-order terms, the oracle's own f64 error is added
    /// the same way, and the whole is capped at `2*v_max*(1 + gamma(k+2, u))`: both results
    /// are convex combinations of the same values, so no correct kernel is ever further apart,
    /// while a result outside that range still fails. Plus the store into the output type, as
    /// in [`ErrorModel::linear`].
    pub fn attention(&self, terms: AttentionTerms, reference: f64) -> f64 {
        let AttentionTerms {
            entries: k,
            width: d,
            score_magnitude,
            v_max,
        } = terms;
        let first_order = |u: f64| {
            let score_error = gamma(d + 2, u) * score_magnitude;
            let rho = (2.0 * score_error).exp_m1() + (k as f64 + EXP_ULPS + 1.0) * u;
            let mixing = if rho < 1.0 {
                2.0 * rho / (1.0 - rho)
            } else {
                f64::INFINITY
            };
            (mixing + 2.0 * gamma(k + 1, u)) * v_max
        };
        let bound = ATTENTION_SAFETY * (first_order(self.u) + first_order(ORACLE_ROUNDOFF));
        let cap = 2.0 * v_max * (1.0 + gamma(k + 2, self.u));
        bound.min(cap) * (1.0 + self.u_out) + self.store(k + d + 2, reference)
    }

    /// `|got - expected| / bound` for one entry (see the module doc for special values):
    /// at most 1 passes; 0 is an exact match; infinite is a failure no bound excuses.
    pub fn error_ratio(&self, got: f64, expected: f64, bound: f64) -> f64 {
        match (got.is_nan(), expected.is_nan()) {
            (true, true) => return 0.0,
            (true, false) | (false, true) => return f64::INFINITY,
            (false, false) => {}
        }
        if got == expected {
            return 0.0;
        }
        if expected.is_infinite() {
            return f64::INFINITY;
        }
        if got.is_infinite() {
            // How far the reference must move towards got's sign before the output type
            // rounds it to got.
            let to_overflow = overflow_threshold(self.output) - got.signum() * expected;
            return ratio(to_overflow.max(0.0), bound);
        }
        ratio((got - expected).abs(), bound)
    }

    /// Compares a backend's results with the oracle's, entry by entry.
    pub fn compare(&self, got: &[f64], expected: &[f64], bounds: &[f64]) -> Comparison {
        let mut comparison = Comparison {
            entries: got.len(),
            ..Comparison::default()
        };
        if got.len() != expected.len() || bounds.len() != expected.len() {
            comparison.worst = f64::INFINITY;
            comparison.failures = 1;
            return comparison;
        }
        for (index, ((&g, &e), &b)) in got.iter().zip(expected).zip(bounds).enumerate() {
            let r = self.error_ratio(g, e, b);
            comparison.worst = comparison.worst.max(r);
            if r > 1.0 {
                comparison.failures += 1;
                comparison.first_failure.get_or_insert(Mismatch {
                    index,
                    got: g,
                    expected: e,
                    bound: b,
                });
            }
        }
        comparison
    }
}

/// `err / bound`, infinite when a nonzero error meets a zero (or NaN) bound.
fn ratio(err: f64, bound: f64) -> f64 {
    if err <= 0.0 {
        0.0
    } else if bound > 0.0 {
        err / bound
    } else {
        f64::INFINITY
    }
}

/// How a backend's results compared with the oracle's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Entries compared.
    pub entries: usize,
    /// Largest error/bound ratio (at most 1 when every entry passes).
    pub worst: f64,
    /// Entries over their bound (1 when the result had the wrong length).
    pub failures: usize,
    /// The first entry over its bound.
    pub first_failure: Option<Mismatch>,
}

impl Comparison {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

/// One entry over its bound; `index` counts entries in row-major order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mismatch {
    pub index: usize,
    pub got: f64,
    pub expected: f64,
    pub bound: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_blas::{reference, Csr, DenseRef};

    fn f32_model() -> ErrorModel {
        ErrorModel::new(Precision::F32, DType::F32)
    }

    #[test]
    fn gamma_grows_with_k_and_saturates() {
        assert_eq!(gamma(0, 0.5), 0.0);
        assert!((gamma(10, 1e-8) / 1e-7 - 1.0).abs() < 1e-6);
        assert_eq!(gamma(2, 0.5), f64::INFINITY);
    }

    #[test]
    fn tf32_rounds_to_nearest_even_on_ten_mantissa_bits() {
        let ulp = 2f32.powi(-10);
        assert_eq!(round_to_tf32(1.0 + ulp / 2.0), 1.0);
        assert_eq!(round_to_tf32(1.0 + 1.5 * ulp), 1.0 + 2.0 * ulp);
        assert_eq!(round_to_tf32(1.0 + 0.75 * ulp), 1.0 + ulp);
        assert_eq!(round_to_tf32(-(1.0 + 0.75 * ulp)), -(1.0 + ulp));
        assert_eq!(round_to_tf32(f32::MAX), f32::INFINITY);
        assert!(round_to_tf32(f32::NAN).is_nan());
        assert_eq!(round_to_tf32(3.0), 3.0);
    }

    #[test]
    fn thresholds_are_where_rounding_overflows() {
        for dtype in [DType::F16, DType::BF16, DType::F32] {
            let t = overflow_threshold(dtype);
            let stored = |v: f64| match dtype {
                DType::F16 => f16::from_f64(v).to_f64(),
                DType::BF16 => bf16::from_f64(v).to_f64(),
                _ => f64::from(v as f32),
            };
            assert!(stored(t).is_infinite(), "{dtype}");
            assert!(stored(t * (1.0 - 1e-6)).is_finite(), "{dtype}");
        }
    }

    #[test]
    fn perturbations_of_k_roundings_pass_and_beyond_the_bound_fail() {
        let model = f32_model();
        let (k, magnitude, reference) = (100, 100.0, 100.0);
        let bound = model.linear(k, magnitude, 0.0, reference);
        let k_roundings = k as f64 * model.u * magnitude;
        assert!(model.error_ratio(reference + k_roundings, reference, bound) <= 1.0);
        assert!(model.error_ratio(reference - k_roundings, reference, bound) <= 1.0);
        assert!(model.error_ratio(reference + 1.01 * bound, reference, bound) > 1.0);
    }

    #[test]
    fn a_real_f32_sum_is_within_its_bound() {
        let model = f32_model();
        let terms: Vec<f64> = (1..=1000).map(|i| 1.0 / f64::from(i)).collect();
        let exact: f64 = terms.iter().sum();
        let in_f32 = terms.iter().fold(0f32, |s, &t| s + t as f32);
        let bound = model.linear(terms.len(), exact, 0.0, exact);
        let r = model.error_ratio(f64::from(in_f32), exact, bound);
        assert!(r > 0.0 && r <= 1.0, "{r}");
    }

    #[test]
    fn subnormal_outputs_are_allowed_half_their_spacing() {
        let f16_out = ErrorModel::new(Precision::F16, DType::F16);
        let exact = 1.8046e-5;
        let stored = f16::from_f64(exact).to_f64();
        let bound = f16_out.linear(32, exact, 0.0, exact);
        assert!(f16_out.error_ratio(stored, exact, bound) <= 1.0);
        assert!(f16_out.error_ratio(exact + 2f64.powi(-24), exact, bound) > 1.0);
    }

    #[test]
    fn nan_must_be_on_both_sides_and_infinities_must_match() {
        let model = f32_model();
        assert_eq!(model.error_ratio(f64::NAN, f64::NAN, 0.0), 0.0);
        assert_eq!(model.error_ratio(f64::NAN, 1.0, 1e9), f64::INFINITY);
        assert_eq!(model.error_ratio(1.0, f64::NAN, 1e9), f64::INFINITY);
        assert_eq!(model.error_ratio(f64::INFINITY, f64::INFINITY, 0.0), 0.0);
        assert_eq!(
            model.error_ratio(f64::NEG_INFINITY, f64::INFINITY, 1e300),
            f64::INFINITY
        );
        assert_eq!(model.error_ratio(1e30, f64::INFINITY, 1e300), f64::INFINITY);
    }

    #[test]
    fn overflow_of_the_output_type_is_accepted_only_near_its_threshold() {
        let f16_out = ErrorModel::new(Precision::F16, DType::F16);
        let bound = f16_out.linear(4, 65500.0, 0.0, 65500.0);
        assert!(f16_out.error_ratio(f64::INFINITY, 65519.0, bound) <= 1.0);
        assert!(f16_out.error_ratio(f64::INFINITY, 70000.0, 0.0) <= 1.0);
        assert!(f16_out.error_ratio(f64::INFINITY, 60000.0, bound) > 1.0);
        assert!(f16_out.error_ratio(f64::NEG_INFINITY, 65519.0, bound) > 1.0);
    }

    #[test]
    fn integer_paths_are_exact() {
        let int = ErrorModel::new(Precision::I8, DType::I32);
        let bound = int.linear(1000, 1e6, 10.0, 12345.0);
        assert_eq!(bound, 0.0);
        assert_eq!(int.error_ratio(12345.0, 12345.0, bound), 0.0);
        assert_eq!(int.error_ratio(12346.0, 12345.0, bound), f64::INFINITY);
    }

    #[test]
    fn a_kernel_leaking_nan_from_y_when_beta_is_zero_is_caught() {
        let model = f32_model();
        let a = Csr::<f32>::from_triplets(2, 2, &[(0, 0, 1.0), (1, 1, 2.0)]).unwrap();
        let x = [1.0f32, 1.0];
        let y = [f32::NAN; 2];
        let expected = reference::spmv(
            a.as_ref(),
            1.0,
            DenseRef::vector(&x),
            0.0,
            Some(DenseRef::vector(&y)),
        )
        .unwrap();
        let bounds: Vec<f64> = expected
            .iter()
            .map(|&e| model.linear(1, e, 0.0, e))
            .collect();
        let leaked = [expected[0], f64::NAN];
        let c = model.compare(&leaked, &expected, &bounds);
        assert!(!c.passed());
        assert_eq!(c.first_failure.map(|m| m.index), Some(1));
        assert!(model.compare(&expected, &expected, &bounds).passed());
    }

    #[test]
    fn attention_bound_is_capped_by_the_spread_of_v() {
        let model = ErrorModel::new(Precision::F32, DType::F32);
        let terms = AttentionTerms {
            entries: 8,
            width: 16,
            score_magnitude: 1e12,
            v_max: 3.0,
        };
        let capped = model.attention(terms, 1.0);
        assert!(capped > 6.0 && capped < 6.01, "{capped}");
        let tame = model.attention(
            AttentionTerms {
                score_magnitude: 4.0,
                ..terms
            },
            1.0,
        );
        assert!(tame > 0.0 && tame < 1e-3, "{tame}");
        assert!(model.error_ratio(7.0, 0.5, capped) > 1.0);
    }

    #[test]
    fn wrong_lengths_fail() {
        let model = f32_model();
        assert!(!model.compare(&[1.0], &[1.0, 2.0], &[0.0, 0.0]).passed());
    }
}
