//! What the suite runs: one operation on one matrix with one set of dense operands.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use sparse_blas::{Algorithm, AttentionDesc, Csr, Layout, OpKind, Precision};

use crate::generators::Rng;

/// How many cases the generators and the corpus make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// Every variant once, with the dense widths and layouts spread over the matrices.
    Quick,
    /// Every variant in every dense width, each in two layout and padding combinations.
    Full,
}

/// Where a case's sparse matrix comes from.
#[derive(Clone, Debug)]
pub enum MatrixSource {
    /// Built in memory, by a generator or a proptest strategy.
    Generated { name: String, matrix: Arc<Csr<f64>> },
    /// A Matrix Market file (`.mtx` or `.mtx.gz`), loaded when its cases run (see
    /// [`crate::corpus::load`]).
    File(PathBuf),
}

impl MatrixSource {
    pub fn generated(name: impl Into<String>, matrix: Csr<f64>) -> Self {
        MatrixSource::Generated {
            name: name.into(),
            matrix: Arc::new(matrix),
        }
    }

    pub fn name(&self) -> String {
        match self {
            MatrixSource::Generated { name, .. } => name.clone(),
            MatrixSource::File(path) => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        }
    }
}

/// How the entries of dense operands are chosen, in f64 before they are rounded to the tested
/// type.
#[derive(Clone, Debug, PartialEq)]
pub enum Fill {
    /// Integers in [-4, 4]: exact in every type, and so are the f64 results.
    Ints,
    /// Reals uniform in [-1, 1].
    Uniform,
    /// Magnitudes in [50000, 65000] with random signs: near the f16 maximum, so a kernel that
    /// accumulates in f16 overflows, and saturating to the i8 limits (127 and -128).
    Extreme,
    /// NaN everywhere (0 in the integer types, which hold no NaN nor infinity).
    Nan,
    /// Like `Uniform`, but every third entry is NaN.
    SomeNan,
    /// The given values in turn (proptest chooses and shrinks them); 0 when empty.
    Cycle(Arc<[f64]>),
    /// Reals uniform in [low, high].
    Between(f64, f64),
    /// Attention's Q in [0.5, 1], K in [-400, -200] and V uniform, so that every score is
    /// below -100: a softmax whose running maximum starts at 0 underflows to 0 / 0. Uniform
    /// for the other operations.
    NegativeScores,
}

impl Fill {
    /// Entry number `index` (row-major) of an operand, drawing from `rng` where random.
    pub fn sample(&self, rng: &mut Rng, index: usize) -> f64 {
        match self {
            Fill::Ints => rng.below(9) as f64 - 4.0,
            Fill::Uniform => rng.range(-1.0, 1.0),
            Fill::Extreme => rng.sign() * rng.range(50_000.0, 65_000.0),
            Fill::Nan => f64::NAN,
            Fill::SomeNan if index % 3 == 0 => f64::NAN,
            Fill::SomeNan => rng.range(-1.0, 1.0),
            Fill::Cycle(values) if values.is_empty() => 0.0,
            Fill::Cycle(values) => values[index % values.len()],
            Fill::Between(low, high) => rng.range(*low, *high),
            Fill::NegativeScores => rng.range(-1.0, 1.0),
        }
    }

    /// How dense input number `input` (x; B; X, Y; Q, K, V) is filled.
    pub fn of_input(&self, op: OpKind, input: usize) -> Fill {
        match (self, op, input) {
            (Fill::NegativeScores, OpKind::Attention, 0) => Fill::Between(0.5, 1.0),
            (Fill::NegativeScores, OpKind::Attention, 1) => Fill::Between(-400.0, -200.0),
            _ => self.clone(),
        }
    }
}

impl fmt::Display for Fill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fill::Ints => f.write_str("ints"),
            Fill::Uniform => f.write_str("uniform"),
            Fill::Extreme => f.write_str("extreme"),
            Fill::Nan => f.write_str("NaN"),
            Fill::SomeNan => f.write_str("some NaN"),
            Fill::Cycle(values) => write!(f, "{values:?}"),
            Fill::Between(low, high) => write!(f, "in [{low}, {high}]"),
            Fill::NegativeScores => f.write_str("all scores negative"),
        }
    }
}

/// The leading dimensions of a case's dense operands; the elements between rows (or columns)
/// hold NaN (0 in the integer types), so a kernel that reads them gives NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strides {
    /// As small as each operand's layout allows.
    Tight,
    /// Three elements more than each operand needs.
    Padded,
    /// The first odd leading dimension past what each operand needs: with widths that are
    /// multiples of 8, no row (or column) but the first starts where a kernel's vector loads
    /// are aligned.
    Odd,
    /// This leading dimension for every operand, at least what it needs. The case's shapes keep
    /// the memory small: an operand stored as one row (or column) holds only its elements,
    /// whatever the leading dimension.
    Fixed(usize),
}

impl Strides {
    /// The leading dimension of an operand whose rows (row-major) or columns (column-major)
    /// hold `inner` elements.
    pub fn ld(self, inner: usize) -> usize {
        let needed = inner.max(1);
        match self {
            Strides::Tight => needed,
            Strides::Padded => needed + 3,
            Strides::Odd => (needed + 1) | 1,
            Strides::Fixed(ld) => ld.max(needed),
        }
    }
}

impl fmt::Display for Strides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strides::Tight => Ok(()),
            Strides::Padded => f.write_str(" padded"),
            Strides::Odd => f.write_str(" odd ld"),
            Strides::Fixed(ld) => write!(f, " ld={ld}"),
        }
    }
}

/// One operation on one matrix.
///
/// Dense operands: SpMV reads x (cols x 1) and updates y (rows x 1); SpMM reads B (cols x width)
/// and updates C (rows x width); SDDMM reads X (rows x width) and Y (cols x width) and updates
/// C (nnz x 1); attention reads Q, K and V (heads x width wide) and writes O.
#[derive(Clone, Debug)]
pub struct Case {
    /// What is special about the case, e.g. `beta=0 with NaN in y`.
    pub label: String,
    pub op: OpKind,
    pub matrix: MatrixSource,
    /// Only this precision; `None` runs every precision the backend supports.
    pub precision: Option<Precision>,
    /// Only this algorithm; `None` runs `Auto` and every algorithm the backend has.
    pub algorithm: Option<Algorithm>,
    pub input_layout: Layout,
    pub output_layout: Layout,
    /// The leading dimensions of the dense operands.
    pub strides: Strides,
    /// N of SpMM, K of SDDMM, d (= dv) of one attention head; SpMV ignores it.
    pub width: usize,
    /// Attention heads, side by side in the columns of Q, K and V.
    pub heads: usize,
    /// Attention adds A's values to the scores (an edge bias).
    pub bias: bool,
    /// The suite may scale alpha by a power of two so that the result fits the output type
    /// (see `suite`); attention has no alpha or beta.
    pub alpha: f64,
    pub beta: f64,
    /// The dense inputs.
    pub inputs: Fill,
    /// The output's contents before the run (read only when beta != 0).
    pub prior: Fill,
    /// SDDMM multiplies each dot product by S's value.
    pub scale_by_values: bool,
    pub seed: u64,
}

impl Case {
    /// A case with defaults: uniform inputs, row-major and tight, width 1, alpha 1, beta 0,
    /// a NaN prior output (so beta = 0 is always tested for leaks), every precision and
    /// algorithm.
    pub fn new(op: OpKind, matrix: MatrixSource) -> Self {
        Case {
            label: String::new(),
            op,
            matrix,
            precision: None,
            algorithm: None,
            input_layout: Layout::RowMajor,
            output_layout: Layout::RowMajor,
            strides: Strides::Tight,
            width: 1,
            heads: 1,
            bias: false,
            alpha: 1.0,
            beta: 0.0,
            inputs: Fill::Uniform,
            prior: Fill::Nan,
            scale_by_values: false,
            seed: 0,
        }
    }

    /// The attention descriptor of the case in `precision` (its heads and bias).
    pub fn attention_desc(&self, precision: Precision) -> AttentionDesc {
        AttentionDesc::new(precision)
            .heads(self.heads)
            .bias_from_values(self.bias)
    }

    /// The case's parameters in one line (the matrix is named apart).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.label.is_empty() {
            parts.push(self.label.clone());
        }
        let layout = |l: Layout| match l {
            Layout::RowMajor => "R",
            Layout::ColMajor => "C",
        };
        parts.push(format!(
            "in {} out {}{}",
            layout(self.input_layout),
            layout(self.output_layout),
            self.strides
        ));
        if self.op == OpKind::Attention {
            if self.heads != 1 {
                parts.push(format!("{} heads", self.heads));
            }
            if self.bias {
                parts.push("bias".to_string());
            }
        } else {
            parts.push(format!("alpha={} beta={}", self.alpha, self.beta));
        }
        parts.push(format!("values {}", self.inputs));
        if self.op != OpKind::Attention && self.beta != 0.0 {
            parts.push(format!("prior {}", self.prior));
        }
        if self.op == OpKind::Sddmm && self.scale_by_values {
            parts.push("scaled by S".to_string());
        }
        parts.join(", ")
    }
}
