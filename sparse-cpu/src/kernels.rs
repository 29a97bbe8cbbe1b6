//! rayon kernels for CSR, and the pieces the kernels of the other formats share with them:
//! opening the operands, the `alpha`/`beta` update, the SpMM inner loop. Each output element is
//! produced by one task in a fixed order, over a partition fixed at plan time, so results are
//! bit-identical from run to run.

use rayon::prelude::*;
use sparse_core::{
    Accumulator, AttentionShape, CsrRef, DenseMut, DenseRef, Layout, Result, Scalar, SpIndex,
};

use crate::partition::PathPoint;
use crate::shared_out::SharedOut;

/// Row and column strides of a host operand.
pub(crate) fn strides<T>(d: &DenseRef<'_, T>) -> (usize, usize) {
    match d.layout() {
        Layout::RowMajor => (d.ld(), 1),
        Layout::ColMajor => (1, d.ld()),
    }
}

/// What every SpMV kernel starts from: x's elements on the host and y open for the tasks'
/// writes.
pub(crate) struct SpmvOperands<'x, 'y, T: Scalar> {
    /// x's elements, `incx` apart.
    pub xs: &'x [T],
    pub incx: usize,
    pub out: SharedOut<'y, T::Out>,
}

impl<'x, 'y, T: Scalar> SpmvOperands<'x, 'y, T> {
    pub(crate) fn open(x: &DenseRef<'x, T>, y: &'y mut DenseMut<'_, T::Out>) -> Result<Self> {
        Ok(SpmvOperands {
            xs: x.host("spmv x")?,
            incx: strides(x).0,
            out: SharedOut::new(y, "spmv y")?,
        })
    }
}

/// What every SpMM kernel starts from: B's elements on the host and C open for the tasks'
/// writes.
pub(crate) struct SpmmOperands<'b, 'c, T: Scalar> {
    pub bs: &'b [T],
    /// B's row and column strides: element (i, j) at `i*strides.0 + j*strides.1`.
    pub strides: (usize, usize),
    pub out: SharedOut<'c, T::Out>,
}

impl<'b, 'c, T: Scalar> SpmmOperands<'b, 'c, T> {
    pub(crate) fn open(b: &DenseRef<'b, T>, c: &'c mut DenseMut<'_, T::Out>) -> Result<Self> {
        Ok(SpmmOperands {
            bs: b.host("spmm B")?,
            strides: strides(b),
            out: SharedOut::new(c, "spmm C")?,
        })
    }
}

/// The dense factors of an SDDMM on the host: what every SDDMM kernel samples its entries from.
pub(crate) struct SddmmFactors<'a, T> {
    /// Columns of X and of Y: the length of each dot product.
    k: usize,
    x: &'a [T],
    y: &'a [T],
    x_strides: (usize, usize),
    y_strides: (usize, usize),
    scale_by_values: bool,
}

impl<'a, T: Scalar> SddmmFactors<'a, T> {
    pub(crate) fn new(
        x: &DenseRef<'a, T>,
        y: &DenseRef<'a, T>,
        scale_by_values: bool,
    ) -> Result<Self> {
        Ok(SddmmFactors {
            k: x.cols(),
            x: x.host("sddmm X")?,
            y: y.host("sddmm Y")?,
            x_strides: strides(x),
            y_strides: strides(y),
            scale_by_values,
        })
    }

    /// The sampled product of an entry at (i, j) holding `value`: row i of X dot row j of Y,
    /// times `value` when scaling by values.
    ///
    /// # Safety
    /// `i < x.rows()` and `j < y.rows()`.
    #[inline(always)]
    pub(crate) unsafe fn sample(&self, i: usize, j: usize, value: T) -> T::Acc {
        let ((x_row, x_col), (y_row, y_col)) = (self.x_strides, self.y_strides);
        let mut dot = T::Acc::ZERO;
        for t in 0..self.k {
            // SAFETY: t < k, with i and j in range (the caller's contract): inside both spans.
            dot = dot.madd(
                self.x.get_unchecked(i * x_row + t * x_col).to_acc(),
                self.y.get_unchecked(j * y_row + t * y_col).to_acc(),
            );
        }
        if self.scale_by_values {
            dot = T::Acc::ZERO.madd(dot, value.to_acc());
        }
        dot
    }
}

/// `alpha*sum + beta*prior`, where `prior` is only read when `beta != 0`.
#[inline(always)]
pub(crate) fn update<O: Scalar>(
    alpha: O::Acc,
    sum: O::Acc,
    beta: O::Acc,
    prior: impl FnOnce() -> O,
) -> O {
    let scaled = alpha * sum;
    if beta == O::Acc::ZERO {
        O::from_acc(scaled)
    } else {
        O::from_acc(scaled.madd(beta, prior().to_acc()))
    }
}

/// How the CSR SpMV gathers x: straight, or with a prefetch of the x element of the entry
/// [`PREFETCH_AHEAD`] entries on, for matrices whose gathers miss the caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    Direct,
    Prefetched,
}

/// x stops staying in the last-level cache, under the stream of the matrix, from about this
/// many bytes: on the development machine (32 MiB of L3, 2 cores) scattered gathers gained
/// 1.12x-1.45x from prefetching with x of 8.4 MB (R-MAT 2^21 in f32) to 17 MB, broke even at
/// 7 MB, and ran 0.94x-0.99x as fast with x of 1 to 5 MB (but for R-MAT with 4.2 MB, 1.02x-1.06x).
const PREFETCH_X_BYTES: usize = 8 << 20;
/// Rows whose columns span more than this fraction of x on average jump about it (graphs:
/// 0.27 for a web graph, 0.64 for R-MAT, 0.88 for uniformly random columns); the hardware's
/// prefetchers follow stencils and bands, whose rows span a narrow window of x that moves with
/// the row (0.02-0.06).
const SCATTERED_SPAN: f64 = 0.25;
/// Entries between the one whose x element is prefetched and the one being summed: enough
/// summing to cover a miss to memory (on R-MAT 16 gained less, 64 no more).
const PREFETCH_AHEAD: usize = 32;

impl Gather {
    /// The gather of an SpMV on `a` with x of `T`: prefetched where x outgrows the last-level
    /// cache and the rows scatter over it, so neither the caches nor the hardware's
    /// prefetchers hold the lines a row reads. Where x stays cached the extra load an entry
    /// only costs. x86-64 only (no stable prefetch elsewhere).
    pub fn for_spmv<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> Self {
        let scattered = cfg!(target_arch = "x86_64")
            && a.cols() * size_of::<T>() >= PREFETCH_X_BYTES
            && a.column_span() > SCATTERED_SPAN;
        if scattered {
            Gather::Prefetched
        } else {
            Gather::Direct
        }
    }
}

/// A hint that `p`'s line is read soon.
#[inline(always)]
fn prefetch_read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Sum of `vals[k] * x[cols[k] * incx]` over the entries `range` of a row. With `PREFETCH`,
/// each entry first prefetches the x element of entry `k + PREFETCH_AHEAD` (at most
/// `ahead_end - 1`: the part's last entry).
///
/// # Safety
/// `range.end <= ahead_end <= cols.len(), vals.len()`, and every `cols[k] * incx` is in bounds of
/// `x` (validated CSR and a checked x shape).
#[inline(always)]
unsafe fn sparse_dot<T: Scalar, I: SpIndex, const PREFETCH: bool>(
    cols: &[I],
    vals: &[T],
    range: std::ops::Range<usize>,
    ahead_end: usize,
    x: &[T],
    incx: usize,
) -> T::Acc {
    let mut sum = T::Acc::ZERO;
    for k in range {
        if PREFETCH {
            let ahead = (k + PREFETCH_AHEAD).min(ahead_end - 1);
            prefetch_read(
                x.as_ptr()
                    .wrapping_add(cols.get_unchecked(ahead).to_usize() * incx),
            );
        }
        let c = cols.get_unchecked(k).to_usize();
        sum = sum.madd(
            vals.get_unchecked(k).to_acc(),
            x.get_unchecked(c * incx).to_acc(),
        );
    }
    sum
}

/// Partial sums of rows that cross a part boundary: (row, partial) in path order.
type Partials<A> = [Option<(usize, A)>; 2];

/// Merge-path SpMV: every part handles the same number of rows plus entries; rows split across
/// parts are summed from their partials afterwards, in part order, and written once.
/// The caller has checked shapes and that `alpha != 0`.
pub fn spmv<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    path: &[PathPoint],
    gather: Gather,
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    y: DenseMut<'_, T::Out>,
) -> Result<()> {
    match gather {
        Gather::Direct => spmv_gathering::<T, I, false>(a, path, alpha, x, beta, y),
        Gather::Prefetched => spmv_gathering::<T, I, true>(a, path, alpha, x, beta, y),
    }
}

fn spmv_gathering<T: Scalar, I: SpIndex, const PREFETCH: bool>(
    a: CsrRef<'_, T, I>,
    path: &[PathPoint],
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    beta: T::Acc,
    mut y: DenseMut<'_, T::Out>,
) -> Result<()> {
    let SpmvOperands { xs, incx, out } = SpmvOperands::open(&x, &mut y)?;
    let (row_ptr, col_idx, values) = (a.row_ptr(), a.col_idx(), a.values());
    let partials: Vec<Partials<T::Acc>> = path
        .par_windows(2)
        .map(|w| {
            let (start, end) = (w[0], w[1]);
            let stretch = |from: usize, to: usize| {
                // SAFETY: from <= to <= end.entry <= nnz; a validated CSR indexes columns
                // < x.rows(), and x spans its rows.
                unsafe {
                    sparse_dot::<T, I, PREFETCH>(col_idx, values, from..to, end.entry, xs, incx)
                }
            };
            let mut head = None;
            let mut k = start.entry;
            for row in start.row..end.row {
                let row_end = row_ptr[row + 1].to_usize();
                let sum = stretch(k, row_end);
                if row == start.row && row_ptr[row].to_usize() < start.entry {
                    head = Some((row, sum));
                } else {
                    // SAFETY: row < rows; rows ended inside this part are written by it alone.
                    unsafe { out.write(row, 0, update(alpha, sum, beta, || out.read(row, 0))) };
                }
                k = row_end;
            }
            let tail =
                (end.row < a.rows() && end.entry > k).then(|| (end.row, stretch(k, end.entry)));
            [head, tail]
        })
        .collect();
    let mut pending: Option<(usize, T::Acc)> = None;
    for (row, part) in partials.into_iter().flatten().flatten() {
        pending = match pending {
            Some((r, sum)) if r == row => Some((r, sum + part)),
            Some((r, sum)) => {
                // SAFETY: split rows are written only here, after the parallel phase.
                unsafe { out.write(r, 0, update(alpha, sum, beta, || out.read(r, 0))) };
                Some((row, part))
            }
            None => Some((row, part)),
        };
    }
    if let Some((r, sum)) = pending {
        // SAFETY: as above.
        unsafe { out.write(r, 0, update(alpha, sum, beta, || out.read(r, 0))) };
    }
    Ok(())
}

/// Columns of C computed together, so their sums stay in registers.
pub(crate) const SPMM_COLUMN_BLOCK: usize = 32;

/// `acc[t] += v * b[t*stride]` over a block; called with a literal stride 1 for row-major B so
/// the loop is vectorised.
///
/// # Safety
/// `b` holds at least `(acc.len() - 1) * stride + 1` elements.
#[inline(always)]
pub(crate) unsafe fn axpy_block<T: Scalar>(acc: &mut [T::Acc], v: T::Acc, b: &[T], stride: usize) {
    for (t, a) in acc.iter_mut().enumerate() {
        *a = a.madd(v, b.get_unchecked(t * stride).to_acc());
    }
}

/// Row-parallel SpMM over `row_bounds` (rows never split), for B and C in either layout.
/// The caller has checked shapes and that `alpha != 0`.
pub fn spmm<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    row_bounds: &[usize],
    alpha: T::Acc,
    b: DenseRef<'_, T>,
    beta: T::Acc,
    mut c: DenseMut<'_, T::Out>,
) -> Result<()> {
    let n = b.cols();
    let SpmmOperands { bs, strides, out } = SpmmOperands::open(&b, &mut c)?;
    let (b_row, b_col) = strides;
    row_bounds.par_windows(2).for_each(|w| {
        let mut acc = [T::Acc::ZERO; SPMM_COLUMN_BLOCK];
        for i in w[0]..w[1] {
            let (cols, vals) = a.row(i);
            for j0 in (0..n).step_by(SPMM_COLUMN_BLOCK) {
                let width = SPMM_COLUMN_BLOCK.min(n - j0);
                let acc = &mut acc[..width];
                acc.fill(T::Acc::ZERO);
                for (&col, &v) in cols.iter().zip(vals) {
                    let first = col.to_usize() * b_row + j0 * b_col;
                    // SAFETY: col < b.rows() and j0 + width <= n, so every element read lies
                    // within B's span, which the DenseRef checked against its memory.
                    unsafe {
                        if b_col == 1 {
                            axpy_block(acc, v.to_acc(), bs.get_unchecked(first..), 1);
                        } else {
                            axpy_block(acc, v.to_acc(), bs.get_unchecked(first..), b_col);
                        }
                    }
                }
                for (t, &sum) in acc.iter().enumerate() {
                    // SAFETY: row i belongs to this task alone.
                    unsafe {
                        out.write(i, j0 + t, update(alpha, sum, beta, || out.read(i, j0 + t)))
                    };
                }
            }
        }
    });
    Ok(())
}

/// Row-parallel SDDMM over `row_bounds`; C's values are written in S's entry order.
/// The caller has checked shapes and that `alpha != 0`.
#[allow(clippy::too_many_arguments)]
pub fn sddmm<T: Scalar, I: SpIndex>(
    s: CsrRef<'_, T, I>,
    row_bounds: &[usize],
    alpha: T::Acc,
    x: DenseRef<'_, T>,
    y: DenseRef<'_, T>,
    beta: T::Acc,
    mut c: DenseMut<'_, T::Out>,
    scale_by_values: bool,
) -> Result<()> {
    let factors = SddmmFactors::new(&x, &y, scale_by_values)?;
    let out = SharedOut::new(&mut c, "sddmm C")?;
    row_bounds.par_windows(2).for_each(|w| {
        for i in w[0]..w[1] {
            for e in s.row_range(i) {
                let j = s.col_idx()[e].to_usize();
                // SAFETY: i < x.rows() and j < y.rows() (validated CSR).
                let dot = unsafe { factors.sample(i, j, s.values()[e]) };
                // SAFETY: entry e belongs to row i, which belongs to this task alone.
                unsafe { out.write(e, 0, update(alpha, dot, beta, || out.read(e, 0))) };
            }
        }
    });
    Ok(())
}

/// Fused sparse attention with an online softmax, each head of each row on its own: one pass
/// over the row's entries keeps the running maximum, the running normaliser and the weighted
/// sum of V rows, rescaling the last two whenever the maximum grows. Each row and head's final
/// maximum and normaliser go to `stats` (rows x 2*heads), for the backward. The caller has
/// checked shapes.
#[allow(clippy::too_many_arguments)]
pub fn attention<T: Scalar, I: SpIndex>(
    a: CsrRef<'_, T, I>,
    row_bounds: &[usize],
    q: DenseRef<'_, T>,
    k: DenseRef<'_, T>,
    v: DenseRef<'_, T>,
    shape: &AttentionShape,
    mut o: DenseMut<'_, T::Out>,
    stats: &mut [f64],
) -> Result<()> {
    use num_traits::Float;
    let AttentionShape {
        heads, d, dv, bias, ..
    } = *shape;
    let (qs, ks, vs) = (
        q.host("attention Q")?,
        k.host("attention K")?,
        v.host("attention V")?,
    );
    let ((q_row, q_col), (k_row, k_col), (v_row, v_col)) = (strides(&q), strides(&k), strides(&v));
    let out = SharedOut::new(&mut o, "attention O")?;
    let mut stats = DenseMut::from_slice(stats, a.rows(), 2 * heads, Layout::RowMajor)?;
    let stats = SharedOut::new(&mut stats, "attention statistics")?;
    let scale = <T::Float as Accumulator>::from_f64(shape.scale);
    let float = |x: T| <T::Float as Accumulator>::from_f64(x.to_f64());
    row_bounds.par_windows(2).for_each(|w| {
        let mut acc = vec![<T::Float as Accumulator>::ZERO; dv];
        for i in w[0]..w[1] {
            let (cols, vals) = a.row(i);
            for h in 0..heads {
                let (mut max, mut norm) =
                    (T::Float::neg_infinity(), <T::Float as Accumulator>::ZERO);
                acc.fill(<T::Float as Accumulator>::ZERO);
                for (&col, &value) in cols.iter().zip(vals) {
                    let j = col.to_usize();
                    let mut score = <T::Float as Accumulator>::ZERO;
                    for t in h * d..(h + 1) * d {
                        // SAFETY: i < q.rows(), j < k.rows() (validated CSR), t < heads*d.
                        unsafe {
                            score = score.madd(
                                float(*qs.get_unchecked(i * q_row + t * q_col)),
                                float(*ks.get_unchecked(j * k_row + t * k_col)),
                            );
                        }
                    }
                    score = score * scale;
                    if bias {
                        score += float(value);
                    }
                    if score > max {
                        let rescale = (max - score).exp();
                        norm = norm * rescale;
                        acc.iter_mut().for_each(|x| *x = *x * rescale);
                        max = score;
                    }
                    let weight = (score - max).exp();
                    norm += weight;
                    for (t, x) in acc.iter_mut().enumerate() {
                        let t = h * dv + t;
                        // SAFETY: j < v.rows(), t < heads*dv.
                        *x = x.madd(
                            weight,
                            float(unsafe { *vs.get_unchecked(j * v_row + t * v_col) }),
                        );
                    }
                }
                // SAFETY: row i belongs to this task alone; h < heads.
                unsafe {
                    stats.write(i, 2 * h, max.to_f64());
                    stats.write(i, 2 * h + 1, norm.to_f64());
                }
                for (t, &x) in acc.iter().enumerate() {
                    let value = if cols.is_empty() {
                        0.0
                    } else {
                        (x / norm).to_f64()
                    };
                    // SAFETY: row i belongs to this task alone.
                    unsafe { out.write(i, h * dv + t, T::Out::from_f64(value)) };
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use sparse_formats::{generate, Csr};

    use super::*;
    use crate::partition::merge_path;

    fn spmv_bits<T: Scalar>(a: &Csr<T>, gather: Gather) -> Vec<u64> {
        let x: Vec<T> = (0..a.cols())
            .map(|i| T::from_f64(1.0 + (i % 7) as f64 / 8.0))
            .collect();
        let mut y = vec![T::Out::from_f64(0.5); a.rows()];
        let path = merge_path(a.as_ref(), 5);
        let (alpha, beta) = (T::Acc::from_f64(1.5), T::Acc::from_f64(0.25));
        let (x, out) = (DenseRef::vector(&x), DenseMut::vector(&mut y));
        spmv(a.as_ref(), &path, gather, alpha, x, beta, out).unwrap();
        y.iter().map(|v| v.to_f64().to_bits()).collect()
    }

    #[test]
    fn the_prefetching_gather_sums_what_the_direct_one_sums() {
        let a: Csr<f64> = generate::rmat(10, 8, 3).unwrap();
        assert_eq!(
            spmv_bits(&a, Gather::Direct),
            spmv_bits(&a, Gather::Prefetched)
        );
        let a: Csr<f32> = a.cast();
        assert_eq!(
            spmv_bits(&a, Gather::Direct),
            spmv_bits(&a, Gather::Prefetched)
        );
    }

    #[test]
    fn only_a_large_scattered_x_is_prefetched() {
        let scattered: Csr<f64> = generate::uniform(64, 1 << 20, 16, 7).unwrap();
        let expected = if cfg!(target_arch = "x86_64") {
            Gather::Prefetched
        } else {
            Gather::Direct
        };
        assert_eq!(Gather::for_spmv(scattered.as_ref()), expected);
        // The same columns in f32: x of 4 MiB stays in the cache.
        let narrow: Csr<f32> = scattered.cast();
        assert_eq!(Gather::for_spmv(narrow.as_ref()), Gather::Direct);
        // A stencil's rows read a window of x that moves with the row.
        let local: Csr<f64> = generate::poisson3d(104).unwrap();
        assert!(local.cols() * 8 >= PREFETCH_X_BYTES);
        assert_eq!(Gather::for_spmv(local.as_ref()), Gather::Direct);
    }
}
