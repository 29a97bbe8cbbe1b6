//! Deterministic matrix generators for the main job, benchmarks and tests.

use sparse_core::{check_dimensions, Error, Result, Scalar, SpIndex};

use crate::coo::Coo;
use crate::csr::Csr;

/// splitmix64: a tiny, fast, well-mixed generator, so a seed always gives the same matrix.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// The 5-point Laplacian on an n x n grid (n² rows, symmetric positive definite).
pub fn poisson2d<T: Scalar, I: SpIndex>(n: usize) -> Result<Csr<T, I>> {
    stencil(&[n, n], &[0.0, 0.0])
}

/// The 7-point Laplacian on an n x n x n grid (n³ rows, symmetric positive definite).
pub fn poisson3d<T: Scalar, I: SpIndex>(n: usize) -> Result<Csr<T, I>> {
    stencil(&[n, n, n], &[0.0, 0.0, 0.0])
}

/// The 7-point Laplacian on an n x n x n grid with `b` coupled unknowns per grid point, as a
/// vector PDE (linear elasticity, b = 3) has: the Kronecker product L ⊗ C of the Laplacian and
/// the b x b coupling C = 0.9 I + 0.1 (all ones), so every coupling of two points is a dense
/// b x b block (n³·b rows, symmetric positive definite: both factors are).
pub fn block_poisson3d<T: Scalar, I: SpIndex>(n: usize, b: usize) -> Result<Csr<T, I>> {
    if b == 0 {
        return Err(Error::invalid(
            "block_poisson3d needs at least one unknown per point",
        ));
    }
    let grid = poisson3d::<f64, usize>(n)?;
    let rows = grid
        .rows()
        .checked_mul(b)
        .ok_or_else(|| Error::overflow::<usize>("block Poisson rows", grid.rows()))?;
    check_dimensions::<I>(rows, rows)?;
    let index =
        |v: usize, what: &str| I::try_from_usize(v).ok_or_else(|| Error::overflow::<I>(what, v));
    let coupling = |p: usize, q: usize| if p == q { 1.0 } else { 0.1 };
    let nnz = grid.nnz().saturating_mul(b * b);
    let (mut row_ptr, mut col_idx, mut values) = (
        Vec::with_capacity(rows + 1),
        Vec::with_capacity(nnz),
        Vec::with_capacity(nnz),
    );
    row_ptr.push(I::default());
    for i in 0..grid.rows() {
        let (cols, vals) = grid.as_ref().row(i);
        for p in 0..b {
            for (&j, &l) in cols.iter().zip(vals) {
                for q in 0..b {
                    col_idx.push(index(j * b + q, "column")?);
                    values.push(T::from_f64(l * coupling(p, q)));
                }
            }
            row_ptr.push(index(col_idx.len(), "block Poisson entries")?);
        }
    }
    Csr::try_new(rows, rows, row_ptr, col_idx, values).map_err(|r| r.error)
}

/// Convection-diffusion on an n x n grid: the 5-point Laplacian plus first-order upwind
/// convection of strength `c` along the first dimension and `c/2` along the second. Not
/// symmetric for c > 0; diagonally dominant, so nonsingular, for c >= 0.
pub fn convection_diffusion2d<T: Scalar, I: SpIndex>(n: usize, c: f64) -> Result<Csr<T, I>> {
    stencil(&[n, n], &[c, c / 2.0])
}

/// The (2d+1)-point Laplacian on a grid of `dims` (the first dimension varying fastest), plus
/// upwind convection of strength `convection[k]` along dimension k (added to the diagonal and
/// subtracted from the lower neighbour), built row by row in CSR: each row's neighbours come in
/// increasing column order (the farther lower ones first), so nothing is sorted and a grid of
/// tens of millions of rows takes a fraction of a second.
fn stencil<T: Scalar, I: SpIndex>(dims: &[usize], convection: &[f64]) -> Result<Csr<T, I>> {
    let rows = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| Error::invalid(format!("a grid of {dims:?} overflows usize")))?;
    check_dimensions::<I>(rows, rows)?;
    let nnz_bound = rows.saturating_mul(2 * dims.len() + 1);
    let index =
        |v: usize, what: &str| I::try_from_usize(v).ok_or_else(|| Error::overflow::<I>(what, v));
    let strides: Vec<usize> = dims
        .iter()
        .scan(1, |stride, &d| {
            let here = *stride;
            *stride *= d;
            Some(here)
        })
        .collect();
    let diag = T::from_f64(2.0 * dims.len() as f64 + convection.iter().sum::<f64>());
    let off = T::from_f64(-1.0);
    let lower: Vec<T> = convection.iter().map(|c| T::from_f64(-1.0 - c)).collect();
    let mut row_ptr = Vec::with_capacity(rows + 1);
    let mut col_idx = Vec::with_capacity(nnz_bound);
    let mut values = Vec::with_capacity(nnz_bound);
    row_ptr.push(I::default());
    for row in 0..rows {
        for (k, &stride) in strides.iter().enumerate().rev() {
            if (row / stride) % dims[k] > 0 {
                col_idx.push(index(row - stride, "column")?);
                values.push(lower[k]);
            }
        }
        col_idx.push(index(row, "column")?);
        values.push(diag);
        for (k, &stride) in strides.iter().enumerate() {
            if (row / stride) % dims[k] + 1 < dims[k] {
                col_idx.push(index(row + stride, "column")?);
                values.push(off);
            }
        }
        row_ptr.push(index(col_idx.len(), "stencil entries")?);
    }
    Csr::try_new(rows, rows, row_ptr, col_idx, values).map_err(|r| r.error)
}

/// An R-MAT power-law graph with 2^scale vertices and about `edge_factor` edges per vertex
/// (duplicates merged), probabilities (0.57, 0.19, 0.19, 0.05) as in Graph500; values in (0, 1].
pub fn rmat<T: Scalar, I: SpIndex>(scale: u32, edge_factor: usize, seed: u64) -> Result<Csr<T, I>> {
    let n = 1usize << scale;
    let edges = n * edge_factor;
    let mut rng = SplitMix64::new(seed);
    let mut coo = Coo::empty(n, n);
    coo.reserve(edges);
    for _ in 0..edges {
        let (mut r, mut c) = (0, 0);
        for bit in (0..scale).rev() {
            let p = rng.next_f64();
            let (down, right) = match p {
                p if p < 0.57 => (0, 0),
                p if p < 0.76 => (0, 1),
                p if p < 0.95 => (1, 0),
                _ => (1, 1),
            };
            r |= down << bit;
            c |= right << bit;
        }
        coo.push(r, c, T::from_f64(1.0 - rng.next_f64()))?;
    }
    let mut csr = coo.to_csr()?;
    // Duplicate edges were summed; bring every value back into (0, 1] so sums stay modest.
    for v in csr.values_mut() {
        *v = T::from_f64(v.to_f64().fract().max(0.5));
    }
    Ok(csr)
}

/// `per_row` entries per row at uniformly random columns (duplicates merged), values in (-1, 1).
pub fn uniform<T: Scalar, I: SpIndex>(
    rows: usize,
    cols: usize,
    per_row: usize,
    seed: u64,
) -> Result<Csr<T, I>> {
    let mut rng = SplitMix64::new(seed);
    let mut coo = Coo::empty(rows, cols);
    if cols > 0 {
        coo.reserve(rows * per_row);
        for r in 0..rows {
            for _ in 0..per_row {
                coo.push(r, rng.below(cols), T::from_f64(2.0 * rng.next_f64() - 1.0))?;
            }
        }
    }
    coo.to_csr()
}

/// Vector sparsity, as pruned layers of a network have it (DLMC's matrices expanded by
/// `V x 1` vectors): rows in groups of `vector`, each group keeping each column with
/// probability `density` across all its rows (the last group is cut at `rows`); values in
/// (-1, 1).
pub fn vector_sparse<T: Scalar, I: SpIndex>(
    rows: usize,
    cols: usize,
    vector: usize,
    density: f64,
    seed: u64,
) -> Result<Csr<T, I>> {
    if vector == 0 || !(0.0..=1.0).contains(&density) {
        return Err(Error::invalid(format!(
            "vector sparsity needs vectors of at least one row and a density in [0, 1], not \
             {vector} and {density}"
        )));
    }
    let mut rng = SplitMix64::new(seed);
    let mut coo = Coo::empty(rows, cols);
    for first in (0..rows).step_by(vector) {
        for j in 0..cols {
            if rng.next_f64() < density {
                for i in first..(first + vector).min(rows) {
                    coo.push(i, j, T::from_f64(2.0 * rng.next_f64() - 1.0))?;
                }
            }
        }
    }
    coo.to_csr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stencils_are_the_sum_of_their_couplings() {
        for dims in [vec![1], vec![5], vec![4, 3], vec![3, 4, 2], vec![2, 1, 3]] {
            for scale in [0.0, 0.5] {
                let convection: Vec<f64> =
                    (0..dims.len()).map(|k| scale * (k + 1) as f64).collect();
                let a = stencil::<f64, u32>(&dims, &convection).unwrap();
                let rows: usize = dims.iter().product();
                let mut coo = Coo::empty(rows, rows);
                let mut stride = 1;
                for (&d, &c) in dims.iter().zip(&convection) {
                    for row in 0..rows {
                        if (row / stride) % d + 1 < d {
                            coo.push(row, row + stride, -1.0).unwrap();
                            coo.push(row + stride, row, -1.0 - c).unwrap();
                        }
                    }
                    stride *= d;
                }
                let diag = 2.0 * dims.len() as f64 + convection.iter().sum::<f64>();
                for row in 0..rows {
                    coo.push(row, row, diag).unwrap();
                }
                assert_eq!(a, coo.to_csr().unwrap(), "{dims:?} {convection:?}");
            }
        }
        assert!(!convection_diffusion2d::<f64, u32>(4, 1.0)
            .unwrap()
            .is_symmetric()
            .unwrap());
    }

    #[test]
    fn block_poisson_is_the_kronecker_product() {
        let (n, b) = (3, 3);
        let grid = poisson3d::<f64, u32>(n).unwrap();
        let a = block_poisson3d::<f64, u32>(n, b).unwrap();
        assert_eq!(a.rows(), grid.rows() * b);
        assert_eq!(a.nnz(), grid.nnz() * b * b);
        assert!(a.is_symmetric().unwrap());
        let mut coo = Coo::empty(a.rows(), a.cols());
        for i in 0..grid.rows() {
            let (cols, vals) = grid.as_ref().row(i);
            for (&j, &l) in cols.iter().zip(vals) {
                for p in 0..b {
                    for q in 0..b {
                        let c = if p == q { 1.0 } else { 0.1 };
                        coo.push(i * b + p, j as usize * b + q, l * c).unwrap();
                    }
                }
            }
        }
        assert_eq!(a, coo.to_csr().unwrap());
        assert!(block_poisson3d::<f64, u32>(2, 0).is_err());
    }

    #[test]
    fn poisson_has_the_stencil_structure() {
        let a = poisson3d::<f64, u32>(4).unwrap();
        assert_eq!(a.shape(), (64, 64));
        assert_eq!(a.nnz(), 64 + 2 * 3 * 4 * 4 * 3);
        assert!(a.is_symmetric().unwrap());
        let row_sums: Vec<f64> = (0..64).map(|i| a.as_ref().row(i).1.iter().sum()).collect();
        assert!(row_sums.iter().all(|&s| s >= 0.0));
        assert_eq!(poisson2d::<f32, u32>(3).unwrap().nnz(), 9 + 2 * 2 * 3 * 2);
    }

    #[test]
    fn rmat_is_deterministic_and_skewed() {
        let a = rmat::<f64, u32>(10, 8, 7).unwrap();
        assert_eq!(a, rmat::<f64, u32>(10, 8, 7).unwrap());
        let s = a.row_stats();
        assert!(s.max as f64 > 10.0 * s.mean, "{s:?}");
        assert!(a.values().iter().all(|&v| v > 0.0 && v <= 1.0));
    }

    #[test]
    fn vector_sparsity_fills_whole_vectors() {
        let a = vector_sparse::<f64, u32>(37, 50, 8, 0.3, 4).unwrap();
        assert_eq!(a.shape(), (37, 50));
        for i in 0..37 {
            let first = i / 8 * 8;
            assert_eq!(a.as_ref().row(i).0, a.as_ref().row(first).0, "row {i}");
        }
        assert!(a.nnz() > 0 && a.nnz() < 37 * 50);
        assert!(vector_sparse::<f64, u32>(8, 8, 0, 0.5, 1).is_err());
        assert!(vector_sparse::<f64, u32>(8, 8, 2, 1.5, 1).is_err());
    }

    #[test]
    fn uniform_respects_shape() {
        let a = uniform::<f32, u32>(50, 7, 3, 1).unwrap();
        assert_eq!(a.shape(), (50, 7));
        assert!(a.row_stats().max <= 3);
        assert_eq!(uniform::<f32, u32>(5, 0, 3, 1).unwrap().nnz(), 0);
    }
}
