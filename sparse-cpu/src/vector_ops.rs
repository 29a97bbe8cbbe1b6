//! [`VectorOps`] on host vectors: rayon over fixed chunks, so a reduction's partial sums (one
//! per chunk, added in chunk order) do not depend on the number of threads.

use rayon::prelude::*;
use sparse_core::{check_slots, Coef, DenseMut, DenseRef, Error, Real, Result, VectorOps};

use crate::CpuBackend;

/// Elements per chunk of a parallel pass.
const CHUNK: usize = 1 << 14;

/// The elements of an n x 1 host vector, which must be contiguous.
fn slice<'a, T>(v: DenseRef<'a, T>, context: &str) -> Result<&'a [T]> {
    let data = v.host(context)?;
    contiguous(v.rows(), v.cols(), v.ld(), v.layout(), context)?;
    Ok(&data[..v.rows()])
}

fn slice_mut<'a, T>(v: &'a mut DenseMut<'_, T>, context: &str) -> Result<&'a mut [T]> {
    contiguous(v.rows(), v.cols(), v.ld(), v.layout(), context)?;
    let n = v.rows();
    Ok(&mut v.host(context)?[..n])
}

fn contiguous(
    rows: usize,
    cols: usize,
    ld: usize,
    layout: sparse_core::Layout,
    context: &str,
) -> Result<()> {
    if cols != 1 {
        return Err(Error::shape(context, (rows, 1), (rows, cols)));
    }
    if layout == sparse_core::Layout::RowMajor && ld != 1 && rows > 1 {
        return Err(Error::invalid(format!(
            "{context}: vector operations take contiguous vectors, this one has a stride of {ld}"
        )));
    }
    Ok(())
}

fn same_length(context: &str, len: usize, n: usize) -> Result<()> {
    if len == n {
        Ok(())
    } else {
        Err(Error::shape(context, (n, 1), (len, 1)))
    }
}

/// A coefficient's value, after checking its slots against the workspace.
fn coef<T: Real>(c: Coef, s: DenseRef<'_, f64>) -> Result<T> {
    let s = slice(s, "scalars")?;
    check_slots(s.len(), c.max_slot())?;
    Ok(T::from_f64(c.eval(s)))
}

/// The sums of `f(i)` over each chunk of `0..n`, added in chunk order.
fn chunked_sum<T: Real, const K: usize>(n: usize, f: impl Fn(usize) -> [T; K] + Sync) -> [T; K] {
    let partials: Vec<[T; K]> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .map(|c| {
            let mut acc = [T::zero(); K];
            for i in c * CHUNK..((c + 1) * CHUNK).min(n) {
                let v = f(i);
                for k in 0..K {
                    acc[k] = acc[k] + v[k];
                }
            }
            acc
        })
        .collect();
    sum_in_order(&partials)
}

/// Per-chunk sums added in chunk order (a fixed order: runs are bit-reproducible).
fn sum_in_order<T: Real, const K: usize>(partials: &[[T; K]]) -> [T; K] {
    partials.iter().fold([T::zero(); K], |mut total, p| {
        for k in 0..K {
            total[k] = total[k] + p[k];
        }
        total
    })
}

impl VectorOps for CpuBackend {
    fn copy<T: Real>(&self, x: DenseRef<'_, T>, mut y: DenseMut<'_, T>) -> Result<()> {
        let x = slice(x, "copy x")?;
        let y = slice_mut(&mut y, "copy y")?;
        same_length("copy y", y.len(), x.len())?;
        y.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(y, x)| y.copy_from_slice(x));
        Ok(())
    }

    fn convert<T: Real, U: Real>(&self, x: DenseRef<'_, T>, mut y: DenseMut<'_, U>) -> Result<()> {
        let x = slice(x, "convert x")?;
        let y = slice_mut(&mut y, "convert y")?;
        same_length("convert y", y.len(), x.len())?;
        y.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(y, x)| {
                for (y, x) in y.iter_mut().zip(x) {
                    *y = U::from_f64(sparse_core::Scalar::to_f64(*x));
                }
            });
        Ok(())
    }

    fn dot<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        z: Option<DenseRef<'_, T>>,
        mut s: DenseMut<'_, f64>,
        slots: [usize; 2],
    ) -> Result<()> {
        let x = slice(x, "dot x")?;
        let y = slice(y, "dot y")?;
        same_length("dot y", y.len(), x.len())?;
        let s = slice_mut(&mut s, "scalars")?;
        match z {
            Some(z) => {
                let z = slice(z, "dot z")?;
                same_length("dot z", z.len(), x.len())?;
                check_slots(s.len(), slots)?;
                let [xy, xz] = chunked_sum(x.len(), |i| [x[i] * y[i], x[i] * z[i]]);
                s[slots[0]] = sparse_core::Scalar::to_f64(xy);
                s[slots[1]] = sparse_core::Scalar::to_f64(xz);
            }
            None => {
                check_slots(s.len(), [slots[0]])?;
                let [xy] = chunked_sum(x.len(), |i| [x[i] * y[i]]);
                s[slots[0]] = sparse_core::Scalar::to_f64(xy);
            }
        }
        Ok(())
    }

    fn axpy<T: Real>(
        &self,
        c: Coef,
        x: DenseRef<'_, T>,
        mut y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        let x = slice(x, "axpy x")?;
        let y = slice_mut(&mut y, "axpy y")?;
        same_length("axpy y", y.len(), x.len())?;
        let c: T = coef(c, s)?;
        y.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(y, x)| {
                for (y, &x) in y.iter_mut().zip(x) {
                    *y = *y + c * x;
                }
            });
        Ok(())
    }

    fn xpby<T: Real>(
        &self,
        x: DenseRef<'_, T>,
        c: Coef,
        mut y: DenseMut<'_, T>,
        s: DenseRef<'_, f64>,
    ) -> Result<()> {
        let x = slice(x, "xpby x")?;
        let y = slice_mut(&mut y, "xpby y")?;
        same_length("xpby y", y.len(), x.len())?;
        let c: T = coef(c, s)?;
        y.par_chunks_mut(CHUNK)
            .zip(x.par_chunks(CHUNK))
            .for_each(|(y, x)| {
                for (y, &x) in y.iter_mut().zip(x) {
                    *y = x + c * *y;
                }
            });
        Ok(())
    }

    fn cg_update<T: Real>(
        &self,
        c: Coef,
        p: DenseRef<'_, T>,
        q: DenseRef<'_, T>,
        mut x: DenseMut<'_, T>,
        mut r: DenseMut<'_, T>,
        mut s: DenseMut<'_, f64>,
        norm: Option<usize>,
    ) -> Result<()> {
        let p = slice(p, "cg_update p")?;
        let q = slice(q, "cg_update q")?;
        let x = slice_mut(&mut x, "cg_update x")?;
        let r = slice_mut(&mut r, "cg_update r")?;
        same_length("cg_update q", q.len(), p.len())?;
        same_length("cg_update x", x.len(), p.len())?;
        same_length("cg_update r", r.len(), p.len())?;
        let c: T = coef(c, s.as_ref())?;
        // One pass: the updates and rᵀr per chunk, the chunks' sums added in chunk order.
        let partials: Vec<[T; 1]> = x
            .par_chunks_mut(CHUNK)
            .zip(r.par_chunks_mut(CHUNK))
            .zip(p.par_chunks(CHUNK).zip(q.par_chunks(CHUNK)))
            .map(|((x, r), (p, q))| {
                let mut rr = T::zero();
                for (((x, r), &p), &q) in x.iter_mut().zip(r.iter_mut()).zip(p).zip(q) {
                    *x = *x + c * p;
                    *r = *r - c * q;
                    rr = rr + *r * *r;
                }
                [rr]
            })
            .collect();
        if let Some(k) = norm {
            let s = slice_mut(&mut s, "scalars")?;
            check_slots(s.len(), [k])?;
            let [rr] = sum_in_order(&partials);
            s[k] = sparse_core::Scalar::to_f64(rr);
        }
        Ok(())
    }

    fn scale<T: Real>(
        &self,
        d: DenseRef<'_, T>,
        r: DenseRef<'_, T>,
        mut z: DenseMut<'_, T>,
        mut s: DenseMut<'_, f64>,
        slots: Option<[usize; 2]>,
    ) -> Result<()> {
        let d = slice(d, "scale d")?;
        let r = slice(r, "scale r")?;
        let z = slice_mut(&mut z, "scale z")?;
        same_length("scale r", r.len(), d.len())?;
        same_length("scale z", z.len(), d.len())?;
        // One pass: z and the sums per chunk, the chunks' sums added in chunk order.
        let partials: Vec<[T; 2]> = z
            .par_chunks_mut(CHUNK)
            .zip(d.par_chunks(CHUNK).zip(r.par_chunks(CHUNK)))
            .map(|(z, (d, r))| {
                let (mut rz, mut rr) = (T::zero(), T::zero());
                for ((z, &d), &r) in z.iter_mut().zip(d).zip(r) {
                    *z = d * r;
                    rz = rz + r * *z;
                    rr = rr + r * r;
                }
                [rz, rr]
            })
            .collect();
        if let Some(slots) = slots {
            let s = slice_mut(&mut s, "scalars")?;
            check_slots(s.len(), slots)?;
            let [rz, rr] = sum_in_order(&partials);
            s[slots[0]] = sparse_core::Scalar::to_f64(rz);
            s[slots[1]] = sparse_core::Scalar::to_f64(rr);
        }
        Ok(())
    }

    fn read_scalars(&self, s: DenseRef<'_, f64>, out: &mut [f64]) -> Result<()> {
        let s = slice(s, "scalars")?;
        check_slots(s.len(), out.len().checked_sub(1))?;
        out.copy_from_slice(&s[..out.len()]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_match_their_definitions() {
        let cpu = CpuBackend::new();
        let n = 3 * CHUNK + 5;
        let x: Vec<f64> = (0..n).map(|i| (i % 7) as f64 - 3.0).collect();
        let y: Vec<f64> = (0..n).map(|i| (i % 5) as f64 * 0.5).collect();
        let mut s = vec![0.0; 4];
        cpu.dot(
            DenseRef::vector(&x),
            DenseRef::vector(&y),
            Some(DenseRef::vector(&x)),
            DenseMut::vector(&mut s),
            [0, 1],
        )
        .unwrap();
        let xy: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
        let xx: f64 = x.iter().map(|a| a * a).sum();
        assert_eq!((s[0], s[1]), (xy, xx));

        s[2] = 2.0;
        let mut z = y.clone();
        cpu.axpy(
            -Coef::of(2),
            DenseRef::vector(&x),
            DenseMut::vector(&mut z),
            DenseRef::vector(&s),
        )
        .unwrap();
        assert_eq!(z[4], y[4] - 2.0 * x[4]);
        cpu.xpby(
            DenseRef::vector(&x),
            Coef::of(2),
            DenseMut::vector(&mut z),
            DenseRef::vector(&s),
        )
        .unwrap();
        assert_eq!(z[4], x[4] + 2.0 * (y[4] - 2.0 * x[4]));

        let (mut xs, mut r) = (x.clone(), y.clone());
        cpu.cg_update(
            Coef::of(2),
            DenseRef::vector(&x),
            DenseRef::vector(&y),
            DenseMut::vector(&mut xs),
            DenseMut::vector(&mut r),
            DenseMut::vector(&mut s),
            Some(3),
        )
        .unwrap();
        assert_eq!((xs[6], r[6]), (3.0 * x[6], -y[6]));
        assert_eq!(s[3], y.iter().map(|a| a * a).sum::<f64>());

        let mut w = vec![0.0; n];
        cpu.scale(
            DenseRef::vector(&y),
            DenseRef::vector(&x),
            DenseMut::vector(&mut w),
            DenseMut::vector(&mut s),
            Some([0, 1]),
        )
        .unwrap();
        assert_eq!(w[6], x[6] * y[6]);
        let xyx: f64 = x.iter().zip(&y).map(|(a, b)| a * (b * a)).sum();
        assert_eq!((s[0], s[1]), (xyx, xx));

        let mut f = vec![0.0f32; n];
        cpu.convert(DenseRef::vector(&x), DenseMut::vector(&mut f))
            .unwrap();
        assert_eq!(f[1], x[1] as f32);
        let mut out = [0.0; 2];
        cpu.read_scalars(DenseRef::vector(&s), &mut out).unwrap();
        assert_eq!(out, [xyx, xx]);
        assert!(cpu
            .read_scalars(DenseRef::vector(&s), &mut [0.0; 5])
            .is_err());
    }
}
