//! The one table of what the `cuda` backend runs: each kernel family registers its rows here
//! (operation, format, precisions, algorithm, whether runs are bit-reproducible). Capability,
//! the Unsupported errors, the conformance cases, spbench's kernels and `spblas capabilities`
//! all read it; planning dispatches through it, so a row is also what makes a family's plan
//! reachable. Every row runs on sm_80 and newer (the tensor-core rows use `mma` shapes of
//! sm_80).

use sparse_core::{Algorithm, Format, Offer, OpKind, Precision};

/// The kernel families: each has its module, its kernel file and its plan constructor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Family {
    Spmv,
    Ell,
    Bsr,
    Spmm,
    Sddmm,
    Rode,
    FlashSparse,
    TileSpmv,
    Attention,
    Magicube,
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Registration {
    pub family: Family,
    pub op: OpKind,
    pub format: Format,
    pub precisions: &'static [Precision],
    pub algorithm: Algorithm,
    pub deterministic: bool,
}

/// f64, f32, and f16 storage with f32 accumulation: what the CUDA-core kernels compute.
const FLOATS: &[Precision] = &[Precision::F64, Precision::F32, Precision::F16];
/// The types with an atomic add.
const WIDE: &[Precision] = &[Precision::F64, Precision::F32];
/// What the tensor-core MMAs take: f16 storage with f32 accumulation, and f32 storage computed
/// as tf32.
const TENSOR: &[Precision] = &[Precision::F16, Precision::TF32];
/// Attention's storage types, each with an f32 softmax and f32 sums.
const ATTENTION: &[Precision] = &[Precision::F32, Precision::F16, Precision::BF16];
/// Attention on tensor cores: 16-bit storage.
const ATTENTION_TENSOR: &[Precision] = &[Precision::F16, Precision::BF16];
/// What the integer MMAs take: i8 storage with exact i32 accumulation.
const INTEGER: &[Precision] = &[Precision::I8];
/// Every integer precision with widths: i8 storage runs the i8 kernels, i16 storage 8-bit
/// planes on the same MMAs.
const INTEGER_WIDTHS: &[Precision] = &Precision::WITH_WIDTHS;
/// 4-bit operands of i8 storage: what the s4 MMAs take, an 8-bit sparse operand as two planes.
const INT4: &[Precision] = &[Precision::I4, Precision::L8_R4];
/// f32 quantized to i8 inside the plan, dequantized in the kernel's epilogue.
const QUANTIZED: &[Precision] = &[Precision::F32_VIA_I8];

macro_rules! rows {
    ($family:ident, $op:ident, $format:ident: $(($precisions:expr, $algorithm:ident, $det:expr)),+ $(,)?) => {
        &[$(Registration {
            family: Family::$family,
            op: OpKind::$op,
            format: Format::$format,
            precisions: $precisions,
            algorithm: Algorithm::$algorithm,
            deterministic: $det,
        }),+]
    };
}

/// Every family's rows.
const TABLE: &[&[Registration]] = &[
    rows!(Spmv, Spmv, Csr:
        (FLOATS, Scalar, true),
        (FLOATS, Vector, true),
        (FLOATS, VectorSplit, true),
        (FLOATS, MergePath, true),
    ),
    rows!(Spmv, Spmv, Coo: (WIDE, Atomic, false)),
    rows!(Ell, Spmv, Ell: (FLOATS, Scalar, true)),
    rows!(Ell, Spmv, Hyb: (FLOATS, Scalar, true)),
    rows!(Bsr, Spmv, Bsr: (FLOATS, Vector, true)),
    rows!(TileSpmv, Spmv, Tiled16: (WIDE, TileSpmv, true)),
    rows!(Spmm, Spmm, Csr: (FLOATS, Vector, true)),
    rows!(Sddmm, Sddmm, Csr: (FLOATS, Vector, true)),
    // f16 has no atomic add of its f32 sums: its `rode` combines split rows as the
    // deterministic algorithm does.
    rows!(Rode, Spmm, Csr:
        (WIDE, Rode, false),
        (&[Precision::F16], Rode, true),
        (FLOATS, RodeDeterministic, true),
    ),
    rows!(Rode, Sddmm, Csr: (FLOATS, Rode, true), (FLOATS, RodeDeterministic, true)),
    rows!(FlashSparse, Spmm, MeBcrs:
        (TENSOR, FlashSparse, true),
        (TENSOR, FlashSparse16x1, true),
    ),
    rows!(FlashSparse, Sddmm, MeBcrs:
        (TENSOR, FlashSparse, true),
        (TENSOR, FlashSparse16x1, true),
    ),
    rows!(Attention, Attention, Csr:
        (ATTENTION, Fused, true),
        (ATTENTION_TENSOR, FusedTensorCore, true),
        (ATTENTION, Unfused, true),
    ),
    rows!(Magicube, Spmm, SrBcrs:
        (INTEGER, Magicube, true),
        (QUANTIZED, Magicube, true),
        (INTEGER_WIDTHS, Magicube, true),
        (INT4, MagicubeS4, true),
    ),
    rows!(Magicube, Sddmm, SrBcrs:
        (INTEGER, Magicube, true),
        (INTEGER_WIDTHS, Magicube, true),
        (INT4, MagicubeS4, true),
    ),
];

fn rows() -> impl Iterator<Item = &'static Registration> {
    TABLE.iter().flat_map(|family| family.iter())
}

/// What the backend runs for `op` on `format` in `precision`.
pub(crate) fn algorithms(op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
    rows()
        .filter(|r| r.op == op && r.format == format && r.precisions.contains(&precision))
        .map(|r| Offer::native(r.algorithm, r.deterministic))
        .collect()
}

/// The family that runs `algorithm` (never `auto`) for `op` on `format` in `precision`.
pub(crate) fn family(
    op: OpKind,
    format: Format,
    precision: Precision,
    algorithm: Algorithm,
) -> Option<Family> {
    rows()
        .find(|r| {
            r.op == op
                && r.format == format
                && r.algorithm == algorithm
                && r.precisions.contains(&precision)
        })
        .map(|r| r.family)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_row_repeats_and_every_row_is_reachable() {
        let all: Vec<&Registration> = rows().collect();
        for (i, r) in all.iter().enumerate() {
            for &p in r.precisions {
                assert!(
                    all[..i].iter().all(|o| (o.op, o.format, o.algorithm)
                        != (r.op, r.format, r.algorithm)
                        || !o.precisions.contains(&p)),
                    "{} {} {} {p} is listed twice",
                    r.op,
                    r.format,
                    r.algorithm
                );
                assert_eq!(family(r.op, r.format, p, r.algorithm), Some(r.family));
            }
            assert_ne!(r.algorithm, Algorithm::Auto);
        }
    }
}
