//! Structured test matrices and the generated cases, deterministic from their seeds.
//!
//! Patterns are built with placeholder values; [`with_values`] gives them the values of a
//! [`Fill`]. Shapes and dense widths avoid multiples of 8, 16 and 32 so that kernels tiling
//! by those sizes meet ragged edges.

use std::sync::Arc;

use sparse_blas::{generate, Csr, Layout, OpKind};

use crate::case::{Case, Fill, MatrixSource, Profile, Strides};

/// splitmix64: tiny, and good enough to spread test values.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * 2f64.powi(-53)
    }

    /// Uniform in `0..n` (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// +1 or -1.
    pub fn sign(&mut self) -> f64 {
        if self.next_u64() & 1 == 0 {
            1.0
        } else {
            -1.0
        }
    }
}

/// `pattern` with its values drawn from `fill`.
pub fn with_values(pattern: &Csr<f64>, fill: &Fill, seed: u64) -> Csr<f64> {
    let mut rng = Rng::new(seed);
    let mut a = pattern.clone();
    for (index, v) in a.values_mut().iter_mut().enumerate() {
        *v = fill.sample(&mut rng, index);
    }
    a
}

/// The CSR of a list of positions (duplicates merged), each inside `rows x cols` by
/// construction of the callers.
fn from_positions(
    rows: usize,
    cols: usize,
    positions: impl Iterator<Item = (usize, usize)>,
) -> Csr<f64> {
    let triplets: Vec<(usize, usize, f64)> = positions.map(|(i, j)| (i, j, 1.0)).collect();
    Csr::from_triplets(rows, cols, &triplets).expect("generated positions lie inside the matrix")
}

/// Every entry of a `rows x cols` matrix.
pub fn dense(rows: usize, cols: usize) -> Csr<f64> {
    from_positions(
        rows,
        cols,
        (0..rows).flat_map(|i| (0..cols).map(move |j| (i, j))),
    )
}

/// Each entry present with probability `density`.
pub fn uniform(rows: usize, cols: usize, density: f64, seed: u64) -> Csr<f64> {
    let mut rng = Rng::new(seed);
    let positions: Vec<_> = (0..rows)
        .flat_map(|i| (0..cols).map(move |j| (i, j)))
        .filter(|_| rng.unit() < density)
        .collect();
    from_positions(rows, cols, positions.into_iter())
}

/// Runs of five empty rows (the first and the last rows among them) between runs of five
/// rows holding up to `cols` random entries each.
pub fn empty_rows(rows: usize, cols: usize, seed: u64) -> Csr<f64> {
    let mut rng = Rng::new(seed);
    let mut positions = Vec::new();
    for i in (0..rows.saturating_sub(1)).filter(|i| (i / 5) % 2 == 1) {
        for _ in 0..rng.below(cols + 1) {
            positions.push((i, rng.below(cols)));
        }
    }
    from_positions(rows, cols, positions.into_iter())
}

/// Row `rows / 2` holds `long` entries spread over the columns; every other row holds up to
/// three random entries.
pub fn long_row(rows: usize, cols: usize, long: usize, seed: u64) -> Csr<f64> {
    let mut rng = Rng::new(seed);
    let long = if rows == 0 { 0 } else { long.min(cols) };
    let mut positions: Vec<(usize, usize)> =
        (0..long).map(|t| (rows / 2, t * cols / long)).collect();
    for i in (0..rows).filter(|&i| i != rows / 2 && cols > 0) {
        for _ in 0..rng.below(4) {
            positions.push((i, rng.below(cols)));
        }
    }
    from_positions(rows, cols, positions.into_iter())
}

/// R-MAT power-law graph (a = 0.57, b = c = 0.19, d = 0.05) on an `n x n` matrix: `edges`
/// draws on the enclosing power-of-two square, those falling outside dropped, duplicates
/// merged.
pub fn rmat(n: usize, edges: usize, seed: u64) -> Csr<f64> {
    const A: f64 = 0.57;
    const B: f64 = 0.19;
    const C: f64 = 0.19;
    let mut rng = Rng::new(seed);
    let levels = n.next_power_of_two().trailing_zeros();
    let mut positions = Vec::with_capacity(edges);
    for _ in 0..edges {
        let (mut i, mut j) = (0usize, 0usize);
        for level in (0..levels).rev() {
            let p = rng.unit();
            let (down, right) = if p < A {
                (0, 0)
            } else if p < A + B {
                (0, 1)
            } else if p < A + B + C {
                (1, 0)
            } else {
                (1, 1)
            };
            i |= down << level;
            j |= right << level;
        }
        if i < n && j < n {
            positions.push((i, j));
        }
    }
    from_positions(n, n, positions.into_iter())
}

/// Entries (i, j) with `i - lower <= j <= i + upper`.
pub fn banded(n: usize, lower: usize, upper: usize) -> Csr<f64> {
    from_positions(
        n,
        n,
        (0..n).flat_map(|i| (i.saturating_sub(lower)..(i + upper + 1).min(n)).map(move |j| (i, j))),
    )
}

/// Rows in groups of `vector`, each group holding each column with probability `density` in
/// all its rows (sparse-formats' generator).
pub fn vectors(rows: usize, cols: usize, vector: usize, density: f64, seed: u64) -> Csr<f64> {
    generate::vector_sparse(rows, cols, vector, density, seed).expect("a valid vector shape")
}

/// `count` dense `block x block` squares at random places (clipped at the edges, overlaps
/// merged).
pub fn dense_blocks(rows: usize, cols: usize, block: usize, count: usize, seed: u64) -> Csr<f64> {
    let mut rng = Rng::new(seed);
    let mut positions = Vec::new();
    for _ in 0..count {
        let (i0, j0) = (rng.below(rows), rng.below(cols));
        for i in i0..(i0 + block).min(rows) {
            for j in j0..(j0 + block).min(cols) {
                positions.push((i, j));
            }
        }
    }
    from_positions(rows, cols, positions.into_iter())
}

/// The structured matrices (patterns), by name.
pub fn patterns() -> Vec<(&'static str, Csr<f64>)> {
    vec![
        ("empty 0x0", Csr::zeros(0, 0)),
        ("empty 0x33", Csr::zeros(0, 33)),
        ("empty 33x0", Csr::zeros(33, 0)),
        ("no entries 7x67", Csr::zeros(7, 67)),
        ("one entry 1x1", dense(1, 1)),
        ("dense 7x33", dense(7, 33)),
        // Each row and its end fill exactly one 1024-item tile of the CUDA merge-path SpMV, so
        // no row crosses a tile edge.
        ("dense 40x1023", dense(40, 1023)),
        ("empty rows 67x33", empty_rows(67, 33, 1)),
        ("banded 333 (-3..+3)", banded(333, 3, 3)),
        ("dense blocks 67x67", dense_blocks(67, 67, 5, 12, 2)),
        ("uniform 97x67 10%", uniform(97, 67, 0.1, 3)),
        ("power-law 1031 (R-MAT)", rmat(1031, 16 * 1031, 4)),
        // V x 1 vector sparsity (pruned layers), the structure SR-BCRS and ME-BCRS store
        // without filler; 8-row vectors cut at the last rows.
        ("vectors 8x1 101x97 30%", vectors(101, 97, 8, 0.3, 6)),
        ("vectors 2x1 67x131 20%", vectors(67, 131, 2, 0.2, 7)),
        ("long row 33x100003", long_row(33, 100_003, 100_000, 5)),
    ]
}

/// The dense widths the cases use: 1 and sizes that are not multiples of 8.
pub const WIDTHS: [usize; 4] = [1, 7, 33, 67];

/// The head widths attention cases use in place of [`WIDTHS`], at the same places: 1, 3, a
/// warp and one, past four warps.
pub const HEAD_WIDTHS: [usize; 4] = [1, 3, 33, 130];

/// (inputs, output) layouts the cases rotate through.
const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::ColMajor, Layout::ColMajor),
    (Layout::RowMajor, Layout::ColMajor),
    (Layout::ColMajor, Layout::RowMajor),
];

/// What is special about a case, apart from its shapes and layouts.
struct Variant {
    label: &'static str,
    matrix: Fill,
    inputs: Fill,
    prior: Fill,
    alpha: f64,
    beta: f64,
    /// Attention has no alpha, beta or prior output, so only the value variants apply.
    attention: bool,
    /// The variant applies to SpMV, SpMM and SDDMM.
    linear: bool,
    /// SDDMM multiplies by S's values.
    scaled: bool,
}

fn variants() -> Vec<Variant> {
    let base = |label, fill: Fill| Variant {
        label,
        matrix: fill.clone(),
        inputs: fill.clone(),
        prior: fill,
        alpha: 1.0,
        beta: 0.0,
        attention: true,
        linear: true,
        scaled: false,
    };
    vec![
        base("ints", Fill::Ints),
        Variant {
            alpha: -1.5,
            beta: 0.5,
            scaled: true,
            ..base("uniform", Fill::Uniform)
        },
        Variant {
            prior: Fill::Uniform,
            beta: -1.0,
            ..base("extreme", Fill::Extreme)
        },
        Variant {
            matrix: Fill::Nan,
            inputs: Fill::Nan,
            alpha: 0.0,
            beta: 2.0,
            attention: false,
            ..base("alpha=0 with NaN in A and x", Fill::Uniform)
        },
        Variant {
            prior: Fill::Nan,
            attention: false,
            ..base("beta=0 with NaN in y", Fill::Uniform)
        },
        Variant {
            prior: Fill::SomeNan,
            beta: 1.0,
            attention: false,
            scaled: true,
            ..base("beta=1 with NaN in y", Fill::Uniform)
        },
        Variant {
            linear: false,
            ..base("all scores negative", Fill::NegativeScores)
        },
    ]
}

/// The (width, layouts, strides) of combination `c`: as `c` runs over 0..32 it meets every
/// width with every layout pair, padded and not.
fn combination(c: usize) -> (usize, (Layout, Layout), Strides) {
    let padded = (c / (WIDTHS.len() * LAYOUTS.len())) % 2 == 1;
    (
        WIDTHS[c % WIDTHS.len()],
        LAYOUTS[(c / WIDTHS.len()) % LAYOUTS.len()],
        if padded {
            Strides::Padded
        } else {
            Strides::Tight
        },
    )
}

/// The combinations the `k`-th (matrix, variant) pair runs in. Quick: one, `9k` (9 is coprime
/// with 32, so consecutive pairs reach all 32 combinations). Full: eight consecutive ones, so
/// every width in two layouts; SpMV, which has no width, gets the two layouts only.
fn combinations(op: OpKind, profile: Profile, k: usize) -> Vec<usize> {
    let first = 9 * k;
    match (profile, op) {
        (Profile::Quick, _) => vec![first],
        (Profile::Full, OpKind::Spmv) => vec![first, first + WIDTHS.len()],
        (Profile::Full, _) => (first..first + 2 * WIDTHS.len()).collect(),
    }
}

/// The generated cases: every structured matrix, every operation, every variant (NaN
/// semantics, extreme and integer values) over the dense widths, layouts and paddings; then
/// the [`stride_cases`].
pub fn cases(profile: Profile) -> Vec<Case> {
    let variants = variants();
    let mut cases = Vec::new();
    for (m, (name, pattern)) in patterns().into_iter().enumerate() {
        for (v, variant) in variants.iter().enumerate() {
            let k = m * variants.len() + v;
            let seed = (k as u64) << 16;
            let matrix = MatrixSource::Generated {
                name: name.to_string(),
                matrix: Arc::new(with_values(&pattern, &variant.matrix, seed)),
            };
            for &op in OpKind::ALL {
                let applies = if op == OpKind::Attention {
                    variant.attention
                } else {
                    variant.linear
                };
                if !applies {
                    continue;
                }
                for c in combinations(op, profile, k) {
                    let (width, (input_layout, output_layout), strides) = combination(c);
                    let width = match op {
                        OpKind::Spmv => 1,
                        OpKind::Attention => HEAD_WIDTHS[c % WIDTHS.len()],
                        _ => width,
                    };
                    // Attention: three heads on every other case of narrow heads, the edge
                    // bias on every third.
                    let heads = if op == OpKind::Attention && k % 2 == 1 && width <= 33 {
                        3
                    } else {
                        1
                    };
                    cases.push(Case {
                        label: variant.label.to_string(),
                        input_layout,
                        output_layout,
                        strides,
                        width,
                        heads,
                        bias: op == OpKind::Attention && k % 3 == 1,
                        alpha: variant.alpha,
                        beta: variant.beta,
                        inputs: variant.inputs.clone(),
                        prior: if op == OpKind::Attention {
                            Fill::Nan
                        } else {
                            variant.prior.clone()
                        },
                        scale_by_values: variant.scaled,
                        seed: seed + c as u64 + 1,
                        ..Case::new(op, matrix.clone())
                    });
                }
            }
        }
    }
    cases.extend(stride_cases());
    cases
}

/// A leading dimension past `u32::MAX` (and odd), valid for an operand stored as one row: its
/// memory holds just the row.
pub const WIDE_LD: usize = (1 << 32) + 5;

/// Cases whose dense operands have leading dimensions kernels are tempted to get wrong, which
/// every backend must compute correctly or refuse with a typed error:
/// - SpMV with x and y strided: row-major vectors with leading dimension 3;
/// - SpMM, SDDMM and attention with odd leading dimensions, in both layouts, at widths that
///   are multiples of 8 on a matrix whose sides are too, so that only the leading dimension
///   keeps rows (or columns) from the alignment of vector loads;
/// - SpMM, SDDMM and attention on a 1x1 matrix, every operand one row with a leading
///   dimension past `u32::MAX` ([`WIDE_LD`]).
pub fn stride_cases() -> Vec<Case> {
    let aligned = MatrixSource::generated(
        "uniform 64x48 20%",
        with_values(&uniform(64, 48, 0.2, 6), &Fill::Uniform, 7),
    );
    let single = MatrixSource::generated(
        "one entry 1x1",
        with_values(&dense(1, 1), &Fill::Uniform, 8),
    );
    let power_law = MatrixSource::generated(
        "power-law 1031 (R-MAT)",
        with_values(&rmat(1031, 16 * 1031, 4), &Fill::Uniform, 9),
    );
    let base = |label: &str, op, matrix: &MatrixSource, strides, width| Case {
        label: label.to_string(),
        strides,
        width,
        alpha: -1.5,
        beta: 0.5,
        prior: if op == OpKind::Attention {
            Fill::Nan
        } else {
            Fill::Uniform
        },
        scale_by_values: true,
        ..Case::new(op, matrix.clone())
    };
    let mut cases = Vec::new();
    for matrix in [&aligned, &power_law] {
        cases.push(base(
            "x and y strided",
            OpKind::Spmv,
            matrix,
            Strides::Fixed(3),
            1,
        ));
    }
    for op in [OpKind::Spmm, OpKind::Sddmm, OpKind::Attention] {
        for width in [8, 32] {
            for layout in [Layout::RowMajor, Layout::ColMajor] {
                cases.push(Case {
                    input_layout: layout,
                    output_layout: layout,
                    ..base("odd leading dimensions", op, &aligned, Strides::Odd, width)
                });
            }
            cases.push(base(
                "one row, leading dimension past u32::MAX",
                op,
                &single,
                Strides::Fixed(WIDE_LD),
                width,
            ));
        }
    }
    for (k, case) in cases.iter_mut().enumerate() {
        case.seed = 0xD1 << 32 | k as u64;
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operands::Operands;

    #[test]
    fn rng_is_deterministic_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(a.below(13) < 13);
            b.unit();
            b.below(13);
        }
        assert_eq!(Rng::new(1).below(0), 0);
    }

    #[test]
    fn patterns_have_the_promised_structure() {
        let all = patterns();
        let get = |name: &str| &all.iter().find(|(n, _)| *n == name).unwrap().1;
        let long = get("long row 33x100003");
        assert_eq!(long.as_ref().row_len(16), 100_000);
        assert!(long.row_stats().max == 100_000);
        let empty = get("empty rows 67x33");
        assert_eq!(empty.as_ref().row_len(0), 0);
        assert_eq!(empty.as_ref().row_len(66), 0);
        assert!(empty.nnz() > 0);
        let band = get("banded 333 (-3..+3)");
        assert_eq!(band.nnz(), 333 * 7 - 2 * (1 + 2 + 3));
        let vectors = get("vectors 8x1 101x97 30%");
        assert_eq!(vectors.as_ref().row(3).0, vectors.as_ref().row(0).0);
        assert_eq!(vectors.as_ref().row(100).0, vectors.as_ref().row(96).0);
        let power = get("power-law 1031 (R-MAT)");
        let stats = power.row_stats();
        assert!(stats.max as f64 > 10.0 * stats.mean, "{stats:?}");
        for (name, a) in &all {
            a.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn degenerate_shapes_give_valid_matrices() {
        for (rows, cols) in [(0, 0), (0, 5), (5, 0)] {
            for a in [
                long_row(rows, cols, 3, 1),
                empty_rows(rows, cols, 1),
                rmat(rows, 10, 1),
                dense_blocks(rows, cols, 2, 3, 1),
                uniform(rows, cols, 0.5, 1),
            ] {
                a.validate().unwrap();
            }
        }
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(rmat(100, 500, 9), rmat(100, 500, 9));
        let a = with_values(&uniform(10, 10, 0.5, 1), &Fill::Extreme, 3);
        assert!(a
            .values()
            .iter()
            .all(|v| (50_000.0..65_000.0).contains(&v.abs())));
        assert_eq!(a, with_values(&uniform(10, 10, 0.5, 1), &Fill::Extreme, 3));
    }

    #[test]
    fn quick_cases_cover_every_width_layout_and_padding() {
        let quick = cases(Profile::Quick);
        for &w in &WIDTHS {
            for layouts in LAYOUTS {
                for padded in [false, true] {
                    let strides = if padded {
                        Strides::Padded
                    } else {
                        Strides::Tight
                    };
                    assert!(quick.iter().any(|c| c.op == OpKind::Spmm
                        && c.width == w
                        && (c.input_layout, c.output_layout) == layouts
                        && c.strides == strides));
                }
            }
        }
        let full = cases(Profile::Full);
        assert!(full.len() > 4 * quick.len());
        assert!(full.iter().all(|c| c.op != OpKind::Spmv || c.width == 1));
    }

    #[test]
    fn stride_cases_reach_every_operation_and_keep_memory_small() {
        let strided = stride_cases();
        let quick = cases(Profile::Quick);
        let tail = &quick[quick.len() - strided.len()..];
        assert!(tail
            .iter()
            .zip(&strided)
            .all(|(c, s)| c.op == s.op && c.describe() == s.describe()));
        let has = |op, strides: Strides| strided.iter().any(|c| c.op == op && c.strides == strides);
        assert!(has(OpKind::Spmv, Strides::Fixed(3)));
        for op in [OpKind::Spmm, OpKind::Sddmm, OpKind::Attention] {
            assert!(has(op, Strides::Odd) && has(op, Strides::Fixed(WIDE_LD)));
        }
        for case in &strided {
            let MatrixSource::Generated { matrix, .. } = &case.matrix else {
                panic!("stride cases are generated");
            };
            let shape = (matrix.rows(), matrix.cols(), matrix.nnz());
            let operands = Operands::<f32>::generate(case, shape, sparse_blas::Precision::F32);
            let elements: usize = operands
                .inputs
                .iter()
                .map(|d| d.view().unwrap().span())
                .sum();
            assert!(
                elements < 1 << 20,
                "{}: {elements} elements",
                case.describe()
            );
        }
    }
}
