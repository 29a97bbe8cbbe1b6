//! Value and index types.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul};

use half::{bf16, f16};

use crate::precision::DType;

/// The type arithmetic happens in: `f64`, `f32` or `i32`.
pub trait Accumulator:
    Copy
    + Send
    + Sync
    + Debug
    + PartialEq
    + PartialOrd
    + Default
    + Add<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    fn to_f64(self) -> f64;
    /// Rounds (floats) or rounds and saturates (integers).
    fn from_f64(v: f64) -> Self;
    /// `self + a*b`, wrapping for integers so an overflowing sum is a wrong value (which the
    /// oracle detects), never a panic.
    fn madd(self, a: Self, b: Self) -> Self;
}

macro_rules! float_accumulator {
    ($t:ty) => {
        impl Accumulator for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn madd(self, a: Self, b: Self) -> Self {
                self + a * b
            }
        }
    };
}
float_accumulator!(f64);
float_accumulator!(f32);

impl Accumulator for i32 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> Self {
        // `as` saturates and maps NaN to 0, which is the documented rounding for integers.
        v.round() as i32
    }
    #[inline(always)]
    fn madd(self, a: Self, b: Self) -> Self {
        self.wrapping_add(a.wrapping_mul(b))
    }
}

/// A value type a matrix or dense operand may hold.
///
/// `Acc` is the type products are summed in (f16/bf16 compute in f32, i8 in i32) and `Out` the
/// type results are stored in (`Self` for floats, `i32` for `i8` and `i16`).
///
/// The trait is sealed: every implementor is plain old data (no padding, every bit pattern a
/// valid value), so backends may copy scalars as bytes.
pub trait Scalar:
    sealed::Sealed + Copy + Send + Sync + Debug + PartialEq + Default + 'static
{
    const DTYPE: DType;
    type Acc: Accumulator;
    /// The floating type nonlinear steps (softmax) run in: f64 for f64, f32 otherwise.
    type Float: Accumulator + num_traits::Float;
    type Out: Scalar<Acc = Self::Acc>;
    fn to_acc(self) -> Self::Acc;
    /// Rounds to nearest (floats) or saturates (integers).
    fn from_acc(acc: Self::Acc) -> Self;
    fn to_f64(self) -> f64;
    /// Rounds to nearest (floats) or rounds and saturates (integers).
    fn from_f64(v: f64) -> Self;
    fn is_finite(self) -> bool;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
    impl Sealed for i32 {}
    impl Sealed for i8 {}
    impl Sealed for i16 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

macro_rules! native_scalar {
    ($t:ty, $float:ty, $dtype:expr, $finite:expr) => {
        impl Scalar for $t {
            const DTYPE: DType = $dtype;
            type Acc = $t;
            type Float = $float;
            type Out = $t;
            fn to_acc(self) -> Self::Acc {
                self
            }
            fn from_acc(acc: Self::Acc) -> Self {
                acc
            }
            fn to_f64(self) -> f64 {
                Accumulator::to_f64(self)
            }
            fn from_f64(v: f64) -> Self {
                <$t as Accumulator>::from_f64(v)
            }
            fn is_finite(self) -> bool {
                $finite(self)
            }
        }
    };
}
native_scalar!(f64, f64, DType::F64, f64::is_finite);
native_scalar!(f32, f32, DType::F32, f32::is_finite);
native_scalar!(i32, f64, DType::I32, |_| true);

macro_rules! half_scalar {
    ($t:ty, $dtype:expr) => {
        impl Scalar for $t {
            const DTYPE: DType = $dtype;
            type Acc = f32;
            type Float = f32;
            type Out = $t;
            fn to_acc(self) -> f32 {
                self.to_f32()
            }
            fn from_acc(acc: f32) -> Self {
                <$t>::from_f32(acc)
            }
            fn to_f64(self) -> f64 {
                <$t>::to_f64(self)
            }
            fn from_f64(v: f64) -> Self {
                <$t>::from_f64(v)
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
half_scalar!(f16, DType::F16);
half_scalar!(bf16, DType::BF16);

/// Narrow integers: products summed in i32, results stored in i32.
macro_rules! narrow_integer {
    ($t:ty, $dtype:expr) => {
        impl Scalar for $t {
            const DTYPE: DType = $dtype;
            type Acc = i32;
            type Float = f32;
            type Out = i32;
            fn to_acc(self) -> i32 {
                i32::from(self)
            }
            fn from_acc(acc: i32) -> Self {
                acc.clamp(i32::from(<$t>::MIN), i32::from(<$t>::MAX)) as $t
            }
            fn to_f64(self) -> f64 {
                f64::from(self)
            }
            fn from_f64(v: f64) -> Self {
                v.round() as $t
            }
            fn is_finite(self) -> bool {
                true
            }
        }
    };
}
narrow_integer!(i8, DType::I8);
narrow_integer!(i16, DType::I16);

/// An index type for sparse structures (row pointers and column indices).
///
/// Indices stored in a validated structure are non-negative and below the dimension they index,
/// so [`SpIndex::to_usize`] is a plain widening on hot paths.
pub trait SpIndex: Copy + Send + Sync + Debug + Ord + Default + 'static {
    const NAME: &'static str;
    /// Largest value representable, as u64 (used in overflow errors).
    const MAX: u64;
    /// The index as usize; only meaningful for a validated, non-negative index.
    fn to_usize(self) -> usize;
    /// The index as usize, or `None` when negative.
    fn try_to_usize(self) -> Option<usize>;
    /// `None` when `v` does not fit.
    fn try_from_usize(v: usize) -> Option<Self>;
}

macro_rules! sp_index {
    ($t:ty) => {
        impl SpIndex for $t {
            const NAME: &'static str = stringify!($t);
            const MAX: u64 = <$t>::MAX as u64;
            #[inline(always)]
            fn to_usize(self) -> usize {
                self as usize
            }
            fn try_to_usize(self) -> Option<usize> {
                usize::try_from(self).ok()
            }
            fn try_from_usize(v: usize) -> Option<Self> {
                <$t>::try_from(v).ok()
            }
        }
    };
}
sp_index!(u32);
sp_index!(i32);
sp_index!(u64);
sp_index!(i64);
sp_index!(usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_types_accumulate_in_f32() {
        let a = f16::from_f32(1.5);
        assert_eq!(a.to_acc(), 1.5f32);
        assert_eq!(bf16::from_acc(2.0).to_f64(), 2.0);
    }

    #[test]
    fn i8_accumulates_in_i32_and_saturates_back() {
        assert_eq!(<i8 as Scalar>::to_acc(-128), -128i32);
        assert_eq!(<i8 as Scalar>::from_acc(1000), 127);
        assert_eq!(<i8 as Scalar>::from_acc(-1000), -128);
    }

    #[test]
    fn index_conversions_are_checked() {
        assert_eq!(u32::try_from_usize(1 << 33), None);
        assert_eq!(i32::try_from_usize(5), Some(5));
        assert_eq!((-1i32).try_to_usize(), None);
        assert_eq!(u32::MAX, <u32 as SpIndex>::MAX as u32);
    }
}
