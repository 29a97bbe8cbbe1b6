//! Storage types, compute modes and the precisions built from them.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// A storage type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    F64,
    F32,
    F16,
    BF16,
    I8,
    I16,
    /// Output type of the integer operations.
    I32,
}

impl DType {
    /// Bits one element occupies in memory.
    pub fn bits(self) -> usize {
        match self {
            DType::F64 => 64,
            DType::F32 | DType::I32 => 32,
            DType::F16 | DType::BF16 | DType::I16 => 16,
            DType::I8 => 8,
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32)
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The arithmetic a kernel performs. TF32 is a compute mode on f32 storage, not a storage type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compute {
    F64,
    F32,
    /// Inputs rounded to 10 explicit mantissa bits, products summed in f32.
    Tf32,
    /// Integer products summed exactly in i32 (wrapping on overflow).
    I32,
    /// Integer operands of `left` bits (the sparse matrix of SpMV and SpMM, X of SDDMM) and
    /// `right` bits (the dense operand, Y of SDDMM), each held in the storage type; their
    /// products summed exactly in i32, wrapping on overflow. The widths say what the operands
    /// hold, and kernels plan for them; every value of the storage type is still multiplied
    /// exactly (a wider one takes more 8-bit parts, docs/integer.md).
    IntBits {
        left: u8,
        right: u8,
    },
}

impl Compute {
    /// Unit roundoff of the accumulation (0 for exact integer arithmetic).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            Compute::F64 => f64::EPSILON / 2.0,
            Compute::F32 | Compute::Tf32 => f64::from(f32::EPSILON) / 2.0,
            Compute::I32 | Compute::IntBits { .. } => 0.0,
        }
    }

    /// Whether results are exact integer sums.
    pub fn is_integer(self) -> bool {
        matches!(self, Compute::I32 | Compute::IntBits { .. })
    }
}

/// A precision: what the operands are stored in and what the arithmetic is done in.
///
/// The named precisions are `f64 f32 tf32 f16 bf16 i8 i4`, the mixed integer modes
/// `l8-r4 l12-r4 l16-r4 l16-r8 l16-r16` (with `i4`, [`Precision::WITH_WIDTHS`]) and `f32-i8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Precision {
    pub storage: DType,
    pub compute: Compute,
}

impl Precision {
    pub const F64: Precision = Precision {
        storage: DType::F64,
        compute: Compute::F64,
    };
    pub const F32: Precision = Precision {
        storage: DType::F32,
        compute: Compute::F32,
    };
    pub const TF32: Precision = Precision {
        storage: DType::F32,
        compute: Compute::Tf32,
    };
    pub const F16: Precision = Precision {
        storage: DType::F16,
        compute: Compute::F32,
    };
    pub const BF16: Precision = Precision {
        storage: DType::BF16,
        compute: Compute::F32,
    };
    pub const I8: Precision = Precision {
        storage: DType::I8,
        compute: Compute::I32,
    };
    /// 4-bit integers held one per byte.
    pub const I4: Precision = Precision::int_bits(DType::I8, 4, 4);
    /// Magicube's mixed modes: `lL-rR` multiplies L-bit by R-bit integers.
    pub const L8_R4: Precision = Precision::int_bits(DType::I8, 8, 4);
    pub const L12_R4: Precision = Precision::int_bits(DType::I16, 12, 4);
    pub const L16_R4: Precision = Precision::int_bits(DType::I16, 16, 4);
    pub const L16_R8: Precision = Precision::int_bits(DType::I16, 16, 8);
    pub const L16_R16: Precision = Precision::int_bits(DType::I16, 16, 16);
    /// The integer precisions that name operand widths ([`Compute::IntBits`]).
    pub const WITH_WIDTHS: [Precision; 6] = [
        Precision::I4,
        Precision::L8_R4,
        Precision::L12_R4,
        Precision::L16_R4,
        Precision::L16_R8,
        Precision::L16_R16,
    ];

    const fn int_bits(storage: DType, left: u8, right: u8) -> Precision {
        Precision {
            storage,
            compute: Compute::IntBits { left, right },
        }
    }

    /// f32 operands quantized to i8 inside the plan (symmetric scales, see sparse-formats'
    /// `quantize`), their products summed exactly in i32 and the sums dequantized into f32.
    /// Not among [`Precision::ALL`]: its results carry the quantization error, which no
    /// rounding bound of the oracle covers.
    pub const F32_VIA_I8: Precision = Precision {
        storage: DType::F32,
        compute: Compute::I32,
    };

    pub const ALL: [Precision; 12] = [
        Precision::F64,
        Precision::F32,
        Precision::TF32,
        Precision::F16,
        Precision::BF16,
        Precision::I8,
        Precision::I4,
        Precision::L8_R4,
        Precision::L12_R4,
        Precision::L16_R4,
        Precision::L16_R8,
        Precision::L16_R16,
    ];

    pub fn name(self) -> &'static str {
        match (self.storage, self.compute) {
            (DType::F64, Compute::F64) => "f64",
            (DType::F32, Compute::F32) => "f32",
            (DType::F32, Compute::Tf32) => "tf32",
            (DType::F16, Compute::F32) => "f16",
            (DType::BF16, Compute::F32) => "bf16",
            (DType::I8, Compute::I32) => "i8",
            (DType::F32, Compute::I32) => "f32-i8",
            (DType::I8, Compute::IntBits { left: 4, right: 4 }) => "i4",
            (DType::I8, Compute::IntBits { left: 8, right: 4 }) => "l8-r4",
            (DType::I16, Compute::IntBits { left: 12, right: 4 }) => "l12-r4",
            (DType::I16, Compute::IntBits { left: 16, right: 4 }) => "l16-r4",
            (DType::I16, Compute::IntBits { left: 16, right: 8 }) => "l16-r8",
            (
                DType::I16,
                Compute::IntBits {
                    left: 16,
                    right: 16,
                },
            ) => "l16-r16",
            _ => "custom",
        }
    }

    /// The range of values the left (`right == false`) or right operand of an integer precision
    /// holds: the signed range of its width, or of the storage type when the precision names
    /// no widths (at most 32 bits).
    pub fn value_range(self, right: bool) -> (i32, i32) {
        let bits = match self.compute {
            Compute::IntBits { left, right: r } => usize::from(if right { r } else { left }),
            _ => self.storage.bits(),
        };
        let half = 1i64 << (bits.clamp(1, 32) - 1);
        (-half as i32, (half - 1) as i32)
    }

    /// Unit roundoff of the stored inputs (0 when they are exact integers).
    pub fn input_roundoff(self) -> f64 {
        match (self.storage, self.compute) {
            (_, Compute::Tf32) => 2f64.powi(-11),
            (DType::F64, _) => f64::EPSILON / 2.0,
            (DType::F32, _) => f64::from(f32::EPSILON) / 2.0,
            (DType::F16, _) => 2f64.powi(-11),
            (DType::BF16, _) => 2f64.powi(-8),
            _ => 0.0,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            "custom" => write!(f, "{}/{:?}", self.storage, self.compute),
            name => f.write_str(name),
        }
    }
}

impl FromStr for Precision {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Precision::ALL
            .into_iter()
            .chain([Precision::F32_VIA_I8])
            .find(|p| p.name() == s)
            .ok_or_else(|| Error::InvalidArgument {
                message: format!(
                    "unknown precision '{s}' (expected one of f64 f32 tf32 f16 bf16 i8 i4 \
                     l8-r4 l12-r4 l16-r4 l16-r8 l16-r16 f32-i8)"
                ),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Precision::ALL {
            assert_eq!(p.to_string().parse::<Precision>().unwrap(), p);
        }
        assert!("f128".parse::<Precision>().is_err());
        assert_eq!(
            "f32-i8".parse::<Precision>().unwrap(),
            Precision::F32_VIA_I8
        );
    }

    #[test]
    fn integer_widths_have_names_and_ranges() {
        assert_eq!(Precision::L12_R4.value_range(false), (-2048, 2047));
        assert_eq!(Precision::L16_R4.value_range(true), (-8, 7));
        assert_eq!(Precision::I8.value_range(true), (-128, 127));
        assert_eq!(Precision::I4.storage, DType::I8);
        for p in Precision::WITH_WIDTHS {
            assert_eq!(p.to_string().parse::<Precision>().unwrap(), p);
            assert!(p.compute.is_integer() && p.storage.is_integer());
        }
    }

    #[test]
    fn tf32_is_a_compute_mode_on_f32() {
        assert_eq!(Precision::TF32.storage, DType::F32);
        assert_eq!(Precision::TF32.compute, Compute::Tf32);
    }
}
