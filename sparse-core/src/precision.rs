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
    /// Two 4-bit integers packed per byte (SR-BCRS only).
    I4,
    /// Output type of i8 operations.
    I32,
}

impl DType {
    /// Bits one element occupies in memory.
    pub fn bits(self) -> usize {
        match self {
            DType::F64 => 64,
            DType::F32 | DType::I32 => 32,
            DType::F16 | DType::BF16 => 16,
            DType::I8 => 8,
            DType::I4 => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F64 => "f64",
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I4 => "i4",
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
    I32,
}

impl Compute {
    /// Unit roundoff of the accumulation (0 for exact integer arithmetic).
    pub fn unit_roundoff(self) -> f64 {
        match self {
            Compute::F64 => f64::EPSILON / 2.0,
            Compute::F32 | Compute::Tf32 => f64::from(f32::EPSILON) / 2.0,
            Compute::I32 => 0.0,
        }
    }
}

/// A precision: what the operands are stored in and what the arithmetic is done in.
///
/// The named precisions are `f64 f32 tf32 f16 bf16 i8 i4`.
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
    pub const I4: Precision = Precision {
        storage: DType::I4,
        compute: Compute::I32,
    };

    /// f32 operands quantized to i8 inside the plan (symmetric scales, see sparse-formats'
    /// `quantize`), their products summed exactly in i32 and the sums dequantized into f32.
    /// Not among [`Precision::ALL`]: its results carry the quantization error, which no
    /// rounding bound of the oracle covers.
    pub const F32_VIA_I8: Precision = Precision {
        storage: DType::F32,
        compute: Compute::I32,
    };

    pub const ALL: [Precision; 7] = [
        Precision::F64,
        Precision::F32,
        Precision::TF32,
        Precision::F16,
        Precision::BF16,
        Precision::I8,
        Precision::I4,
    ];

    pub fn name(self) -> &'static str {
        match (self.storage, self.compute) {
            (DType::F64, Compute::F64) => "f64",
            (DType::F32, Compute::F32) => "f32",
            (DType::F32, Compute::Tf32) => "tf32",
            (DType::F16, Compute::F32) => "f16",
            (DType::BF16, Compute::F32) => "bf16",
            (DType::I8, Compute::I32) => "i8",
            (DType::I4, Compute::I32) => "i4",
            (DType::F32, Compute::I32) => "f32-i8",
            _ => "custom",
        }
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
                    "unknown precision '{s}' (expected one of f64 f32 tf32 f16 bf16 i8 i4 f32-i8)"
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
    fn tf32_is_a_compute_mode_on_f32() {
        assert_eq!(Precision::TF32.storage, DType::F32);
        assert_eq!(Precision::TF32.compute, Compute::Tf32);
    }
}
