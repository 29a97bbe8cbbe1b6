//! What to compute: operations, formats, algorithms and the descriptors plans are made from.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::precision::Precision;

/// Implements `name()`, `ALL`, `Display` and `FromStr` for a field-less enum from one table of
/// (variant, CLI name) pairs, so the names the CLI accepts and prints never drift apart.
macro_rules! named_enum {
    ($ty:ident, $what:literal, [$(($variant:ident, $name:literal)),+ $(,)?]) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                $ty::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $ty::ALL.iter().map(|v| v.name()).collect();
                    Error::invalid(format!(
                        concat!("unknown ", $what, " '{}' (expected one of {})"),
                        s,
                        names.join(" ")
                    ))
                })
            }
        }
    };
}
pub(crate) use named_enum;

/// The operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpKind {
    Spmv,
    Spmm,
    Sddmm,
    Attention,
}
named_enum!(
    OpKind,
    "operation",
    [
        (Spmv, "spmv"),
        (Spmm, "spmm"),
        (Sddmm, "sddmm"),
        (Attention, "attention")
    ]
);

/// Sparse storage formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    Csr,
    Coo,
    Ell,
    Hyb,
    Bsr,
    MeBcrs,
    SrBcrs,
    Tiled16,
}
named_enum!(
    Format,
    "format",
    [
        (Csr, "csr"),
        (Coo, "coo"),
        (Ell, "ell"),
        (Hyb, "hyb"),
        (Bsr, "bsr"),
        (MeBcrs, "me-bcrs"),
        (SrBcrs, "sr-bcrs"),
        (Tiled16, "tiled16"),
    ]
);

/// How an executor computes an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// The executor chooses from the matrix statistics.
    Auto,
    /// The serial oracle: fixed order, f64 accumulation.
    Reference,
    /// CPU: equal shares of rows plus entries per worker (merge path); long rows are split.
    NnzSplit,
    /// CPU: whole rows per worker, the parts balanced by entries.
    RowSplit,
    /// GPU: one thread per row.
    Scalar,
    /// GPU: a group of lanes per row, sized by the mean row length.
    Vector,
    /// GPU: merge-path load balancing; equal shares of rows plus entries, long rows split.
    MergePath,
    /// GPU: `Vector` for ordinary rows; rows past a length limit cut into segments, one warp
    /// each, their partial sums added in a fixed order.
    VectorSplit,
    /// GPU: one thread per entry, accumulating with atomics (not bit-reproducible).
    Atomic,
    /// GPU (RoDe): rows cut into whole segments of a fixed length plus a residual part, the two
    /// run by separate kernels; segments of one row combined with atomics (not bit-reproducible).
    Rode,
    /// `Rode` with the segments of a long row combined in a second pass, in a fixed order.
    RodeDeterministic,
    /// GPU (FlashSparse, ME-BCRS): 8x1 vectors on tensor cores by the swap-and-transpose MMA.
    FlashSparse,
    /// FlashSparse's kernels on 16x1 vectors (the TC-GNN/DTC-SpMM granularity): an ablation.
    FlashSparse16x1,
    /// GPU (Magicube, SR-BCRS): `V x 1` vectors of i8 on integer tensor cores (m16n8k32 s8,
    /// exact i32 accumulation), the dense operand transposed in registers.
    Magicube,
    /// GPU (Magicube, SR-BCRS): 4-bit operands (`i4`, `l8-r4`) packed two to a byte on the s4
    /// tensor cores (m16n8k64), an 8-bit one as two 4-bit planes; `auto` takes it where the s4
    /// MMA outruns the s8 one (sm_80 to sm_89).
    MagicubeS4,
    /// GPU (TileSpMV, Tiled16): a warp per 16x16 tile, each tile's kernel chosen by its
    /// stored format; deferred very sparse tiles added by a CSR kernel.
    TileSpmv,
    /// Attention in one kernel: scores, an online softmax and the weighted sum of V rows in
    /// one pass over each row's entries.
    Fused,
    /// `Fused` on tensor cores (f16, bf16): row windows of 16 rows, their distinct columns in
    /// blocks of 16 with a row bitmap each; scores and the weighted sum of V rows by `mma`.
    FusedTensorCore,
    /// Attention as three steps: SDDMM scores, a row softmax over them, SpMM with V.
    Unfused,
    /// The vendor library's default algorithm.
    VendorDefault,
    /// The vendor library's numbered algorithms (`CUSPARSE_SPMV_CSR_ALG1`, ...).
    VendorAlg1,
    VendorAlg2,
    VendorAlg3,
}
named_enum!(
    Algorithm,
    "algorithm",
    [
        (Auto, "auto"),
        (Reference, "reference"),
        (NnzSplit, "nnz-split"),
        (RowSplit, "row-split"),
        (Scalar, "scalar"),
        (Vector, "vector"),
        (MergePath, "merge-path"),
        (VectorSplit, "vector-split"),
        (Atomic, "atomic"),
        (Rode, "rode"),
        (RodeDeterministic, "rode-deterministic"),
        (FlashSparse, "flashsparse"),
        (FlashSparse16x1, "flashsparse-16x1"),
        (Magicube, "magicube"),
        (MagicubeS4, "magicube-s4"),
        (TileSpmv, "tilespmv"),
        (Fused, "fused"),
        (FusedTensorCore, "fused-tc"),
        (Unfused, "unfused"),
        (VendorDefault, "vendor-default"),
        (VendorAlg1, "vendor-alg1"),
        (VendorAlg2, "vendor-alg2"),
        (VendorAlg3, "vendor-alg3"),
    ]
);

/// Answer of a capability query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Support {
    /// Runs in this precision on this backend's own kernels.
    Native,
    /// Runs, but through a conversion or a wider arithmetic than the precision names.
    Emulated,
    Unsupported,
}
named_enum!(
    Support,
    "support level",
    [
        (Native, "native"),
        (Emulated, "emulated"),
        (Unsupported, "unsupported")
    ]
);

/// What a backend runs for one (operation, format, precision): an algorithm, how natively it
/// computes the precision, and whether it promises bit-identical results from run to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Offer {
    pub algorithm: Algorithm,
    /// `Native` or `Emulated` (an offer is never `Unsupported`).
    pub support: Support,
    /// Same inputs give bit-identical outputs on every run, whatever the matrix.
    pub deterministic: bool,
}

impl Offer {
    pub const fn native(algorithm: Algorithm, deterministic: bool) -> Self {
        Offer {
            algorithm,
            support: Support::Native,
            deterministic,
        }
    }
}

/// The support level a list of offers gives: the best of them, `Unsupported` when empty.
pub fn support_of(offers: &[Offer]) -> Support {
    if offers.iter().any(|o| o.support == Support::Native) {
        Support::Native
    } else if offers.is_empty() {
        Support::Unsupported
    } else {
        Support::Emulated
    }
}

/// The widest dense operand (N of SpMM, K of SDDMM) a plan reserves for when its descriptor
/// names none: runs up to it never allocate; wider ones need [`crate::SpmmPlan::reserve`].
pub const DEFAULT_MAX_WIDTH: usize = 256;

/// The block shape of a blocked format, `rows x cols`: for BSR the dense block; for ME-BCRS the
/// window height x the vectors per tensor-core block; for SR-BCRS the vector length x the
/// stride. `None` in a descriptor lets the executor choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlockShape {
    pub rows: usize,
    pub cols: usize,
}

impl BlockShape {
    pub const fn new(rows: usize, cols: usize) -> Self {
        BlockShape { rows, cols }
    }
}

impl fmt::Display for BlockShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.cols)
    }
}

impl FromStr for BlockShape {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::invalid(format!("block shape '{s}' is not ROWSxCOLS (e.g. 4x4)"));
        let (r, c) = s.split_once('x').ok_or_else(bad)?;
        let r: usize = r.trim().parse().map_err(|_| bad())?;
        let c: usize = c.trim().parse().map_err(|_| bad())?;
        Ok(BlockShape::new(r, c))
    }
}

/// Describes an SpMV `y = alpha*A*x + beta*y`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpmvDesc {
    pub precision: Precision,
    pub format: Format,
    pub algorithm: Algorithm,
    /// The block shape of a blocked format (see [`BlockShape`]).
    pub block: Option<BlockShape>,
    /// With `auto`: time every candidate on the matrix while planning and keep the fastest
    /// (its cost is [`PlanTime::tuning`](crate::PlanTime::tuning)), rather than choose by the
    /// backend's rule from row statistics. Backends without candidates to time use the rule.
    pub tune: bool,
}

impl SpmvDesc {
    pub fn new(precision: Precision) -> Self {
        SpmvDesc {
            precision,
            format: Format::Csr,
            algorithm: Algorithm::Auto,
            block: None,
            tune: false,
        }
    }
    /// `auto` by timing the candidates on the matrix while planning (see [`SpmvDesc::tune`]).
    pub fn tuned(self) -> Self {
        SpmvDesc { tune: true, ..self }
    }
    pub fn format(self, format: Format) -> Self {
        SpmvDesc { format, ..self }
    }
    pub fn algorithm(self, algorithm: Algorithm) -> Self {
        SpmvDesc { algorithm, ..self }
    }
    pub fn block(self, block: BlockShape) -> Self {
        SpmvDesc {
            block: Some(block),
            ..self
        }
    }
}

/// Describes an SpMM `C = alpha*A*B + beta*C`; B and C carry their own layouts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpmmDesc {
    pub precision: Precision,
    pub format: Format,
    pub algorithm: Algorithm,
    /// The block shape of a blocked format (see [`BlockShape`]).
    pub block: Option<BlockShape>,
    /// The widest N runs will use (`None`: [`DEFAULT_MAX_WIDTH`]); the plan's workspace is sized
    /// for it, so runs up to it never allocate.
    pub max_width: Option<usize>,
    /// With `auto`: time every candidate on the matrix while planning, with B and C of
    /// [`SpmmDesc::reserved_width`] columns in row-major order, and keep the fastest (as
    /// [`SpmvDesc::tune`]).
    pub tune: bool,
}

impl SpmmDesc {
    pub fn new(precision: Precision) -> Self {
        SpmmDesc {
            precision,
            format: Format::Csr,
            algorithm: Algorithm::Auto,
            block: None,
            max_width: None,
            tune: false,
        }
    }
    /// `auto` by timing the candidates on the matrix while planning (see [`SpmmDesc::tune`]).
    pub fn tuned(self) -> Self {
        SpmmDesc { tune: true, ..self }
    }
    pub fn format(self, format: Format) -> Self {
        SpmmDesc { format, ..self }
    }
    pub fn algorithm(self, algorithm: Algorithm) -> Self {
        SpmmDesc { algorithm, ..self }
    }
    pub fn block(self, block: BlockShape) -> Self {
        SpmmDesc {
            block: Some(block),
            ..self
        }
    }
    pub fn max_width(self, width: usize) -> Self {
        SpmmDesc {
            max_width: Some(width),
            ..self
        }
    }
    /// The width the plan reserves for.
    pub fn reserved_width(&self) -> usize {
        self.max_width.unwrap_or(DEFAULT_MAX_WIDTH)
    }
}

/// Describes an SDDMM `C = alpha*(X*Y^T) ∘ spy(S) + beta*C`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SddmmDesc {
    pub precision: Precision,
    pub format: Format,
    pub algorithm: Algorithm,
    /// The block shape of a blocked format (see [`BlockShape`]).
    pub block: Option<BlockShape>,
    /// Multiply each dot product by the value S holds at that position.
    pub scale_by_values: bool,
    /// The widest K runs will use (`None`: [`DEFAULT_MAX_WIDTH`]); the plan's workspace is sized
    /// for it, so runs up to it never allocate.
    pub max_width: Option<usize>,
    /// With `auto`: time every candidate on the matrix while planning, with X and Y of
    /// [`SddmmDesc::reserved_width`] columns in row-major order, and keep the fastest (as
    /// [`SpmvDesc::tune`]).
    pub tune: bool,
}

impl SddmmDesc {
    pub fn new(precision: Precision) -> Self {
        SddmmDesc {
            precision,
            format: Format::Csr,
            algorithm: Algorithm::Auto,
            block: None,
            scale_by_values: false,
            max_width: None,
            tune: false,
        }
    }
    /// `auto` by timing the candidates on the matrix while planning (see [`SddmmDesc::tune`]).
    pub fn tuned(self) -> Self {
        SddmmDesc { tune: true, ..self }
    }
    pub fn format(self, format: Format) -> Self {
        SddmmDesc { format, ..self }
    }
    pub fn algorithm(self, algorithm: Algorithm) -> Self {
        SddmmDesc { algorithm, ..self }
    }
    pub fn block(self, block: BlockShape) -> Self {
        SddmmDesc {
            block: Some(block),
            ..self
        }
    }
    pub fn scale_by_values(self, scale_by_values: bool) -> Self {
        SddmmDesc {
            scale_by_values,
            ..self
        }
    }
    pub fn max_width(self, width: usize) -> Self {
        SddmmDesc {
            max_width: Some(width),
            ..self
        }
    }
    /// The width the plan reserves for.
    pub fn reserved_width(&self) -> usize {
        self.max_width.unwrap_or(DEFAULT_MAX_WIDTH)
    }
}

/// Describes sparse attention `O = softmax_row(scale*(Q*K^T) ∘ spy(A) [+ A]) * V` over `heads`
/// heads at once: Q (rows x heads*d), K (cols x heads*d) and V (cols x heads*dv) hold the heads
/// side by side, head h in columns h*d .. (h+1)*d (h*dv .. for V and O).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionDesc {
    pub precision: Precision,
    pub format: Format,
    pub algorithm: Algorithm,
    /// Multiplies the scores before the softmax; `None` means `1/sqrt(d)` with d the width of
    /// one head of Q.
    pub scale: Option<f64>,
    /// The number of heads Q, K, V and O are split into (at least 1).
    pub heads: usize,
    /// Add A's value at each entry to the scaled score before the softmax (an edge bias, the
    /// same for every head); without it only A's pattern matters.
    pub bias_from_values: bool,
}

impl AttentionDesc {
    pub fn new(precision: Precision) -> Self {
        AttentionDesc {
            precision,
            format: Format::Csr,
            algorithm: Algorithm::Auto,
            scale: None,
            heads: 1,
            bias_from_values: false,
        }
    }
    pub fn format(self, format: Format) -> Self {
        AttentionDesc { format, ..self }
    }
    pub fn algorithm(self, algorithm: Algorithm) -> Self {
        AttentionDesc { algorithm, ..self }
    }
    pub fn scale(self, scale: f64) -> Self {
        AttentionDesc {
            scale: Some(scale),
            ..self
        }
    }
    pub fn heads(self, heads: usize) -> Self {
        AttentionDesc { heads, ..self }
    }
    pub fn bias_from_values(self, bias_from_values: bool) -> Self {
        AttentionDesc {
            bias_from_values,
            ..self
        }
    }

    /// The scale in force for queries of width `d` per head; an error when it is not finite.
    pub fn resolved_scale(&self, d: usize) -> Result<f64, Error> {
        let s = self
            .scale
            .unwrap_or_else(|| if d == 0 { 1.0 } else { 1.0 / (d as f64).sqrt() });
        if s.is_finite() {
            Ok(s)
        } else {
            Err(Error::invalid(format!(
                "attention scale must be finite, got {s}"
            )))
        }
    }

    /// What a run with Q of `q_cols` columns and V of `v_cols` computes: the heads, their
    /// widths and the scale. An error when there are no heads, or they do not divide the widths.
    pub fn shape(&self, q_cols: usize, v_cols: usize) -> Result<AttentionShape, Error> {
        let heads = self.heads;
        if heads == 0 || q_cols % heads != 0 || v_cols % heads != 0 {
            return Err(Error::invalid(format!(
                "attention with {heads} heads needs Q and V widths that are multiples of it, \
                 got {q_cols} and {v_cols}"
            )));
        }
        let d = q_cols / heads;
        Ok(AttentionShape {
            heads,
            d,
            dv: v_cols / heads,
            scale: self.resolved_scale(d)?,
            bias: self.bias_from_values,
        })
    }
}

/// One attention run's dimensions, resolved from its descriptor and operands
/// ([`AttentionDesc::shape`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionShape {
    pub heads: usize,
    /// Width of one head of Q and K.
    pub d: usize,
    /// Width of one head of V and O.
    pub dv: usize,
    pub scale: f64,
    /// A's values are added to the scaled scores.
    pub bias: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().unwrap(), *f);
        }
        for o in OpKind::ALL {
            assert_eq!(o.to_string().parse::<OpKind>().unwrap(), *o);
        }
        let err = "csc".parse::<Format>().unwrap_err().to_string();
        assert!(err.contains("me-bcrs"), "{err}");
    }

    #[test]
    fn default_attention_scale_is_inverse_sqrt_width() {
        assert_eq!(
            AttentionDesc::new(Precision::F32)
                .resolved_scale(16)
                .unwrap(),
            0.25
        );
        assert!(AttentionDesc::new(Precision::F32)
            .scale(f64::NAN)
            .resolved_scale(4)
            .is_err());
    }

    #[test]
    fn heads_split_the_widths() {
        let desc = AttentionDesc::new(Precision::F32).heads(3);
        let shape = desc.shape(12, 6).unwrap();
        assert_eq!(
            (shape.heads, shape.d, shape.dv, shape.scale),
            (3, 4, 2, 0.5)
        );
        assert!(desc.shape(12, 5).is_err());
        assert!(desc.heads(0).shape(0, 0).is_err());
    }
}
