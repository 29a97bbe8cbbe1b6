//! Dense operands on the host, with their leading dimension and padding.

use sparse_blas::{
    Compute, Dense, DenseMut, DenseRef, Layout, Memory, MemoryMut, OpKind, Precision, Result,
    Scalar,
};

use crate::bound::round_to_tf32;
use crate::case::{Case, Strides};
use crate::generators::Rng;

/// Elements the memory holds past the entries of the last row (or column), where the leading
/// dimension leaves room: a gap there as wide as a padded operand's, and no wider, so that a
/// leading dimension far past the entries costs no memory.
const TAIL: usize = 3;

/// A host dense matrix as the plan under test will see it: layout, leading dimension, and
/// padding filled with NaN (0 in the integer types), so a kernel that reads it gives NaN.
#[derive(Clone, Debug)]
pub struct HostDense<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
    ld: usize,
    layout: Layout,
}

impl<T: Scalar> HostDense<T> {
    /// Entry (i, j) is `value(i * cols + j)`.
    pub fn new(
        (rows, cols): (usize, usize),
        layout: Layout,
        strides: Strides,
        mut value: impl FnMut(usize) -> T,
    ) -> Self {
        let (outer, inner) = match layout {
            Layout::RowMajor => (rows, cols),
            Layout::ColMajor => (cols, rows),
        };
        let ld = strides.ld(inner);
        let len = match outer {
            0 => 0,
            _ => (outer - 1) * ld + ld.min(inner + TAIL),
        };
        let mut d = HostDense {
            data: vec![T::from_f64(f64::NAN); len],
            rows,
            cols,
            ld,
            layout,
        };
        for i in 0..rows {
            for j in 0..cols {
                let at = d.offset(i, j);
                d.data[at] = value(i * cols + j);
            }
        }
        d
    }

    /// A host copy of a dense result (a download), with its geometry.
    pub fn from_dense(d: Dense<T>) -> Result<Self> {
        let (rows, cols, ld, layout) = (d.rows(), d.cols(), d.ld(), d.layout());
        Ok(HostDense {
            data: d.into_host_vec()?,
            rows,
            cols,
            ld,
            layout,
        })
    }

    fn offset(&self, i: usize, j: usize) -> usize {
        match self.layout {
            Layout::RowMajor => i * self.ld + j,
            Layout::ColMajor => i + j * self.ld,
        }
    }

    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub fn get(&self, i: usize, j: usize) -> T {
        self.data[self.offset(i, j)]
    }

    pub fn view(&self) -> Result<DenseRef<'_, T>> {
        DenseRef::try_new(
            Memory::Host(&self.data),
            self.rows,
            self.cols,
            self.ld,
            self.layout,
        )
    }

    pub fn view_mut(&mut self) -> Result<DenseMut<'_, T>> {
        DenseMut::try_new(
            MemoryMut::Host(&mut self.data),
            self.rows,
            self.cols,
            self.ld,
            self.layout,
        )
    }

    /// The entries in row-major order, as f64.
    pub fn values(&self) -> Vec<f64> {
        (0..self.rows)
            .flat_map(|i| (0..self.cols).map(move |j| self.get(i, j).to_f64()))
            .collect()
    }

    /// The same matrix with every entry `|v|` (padding kept).
    pub fn abs(&self) -> Self {
        HostDense {
            data: self
                .data
                .iter()
                .map(|v| T::from_f64(v.to_f64().abs()))
                .collect(),
            ..self.clone()
        }
    }

    /// Whether the elements outside the matrix are bit for bit those of `before`, where both
    /// hold them: a result with another geometry (a backend that tightened the leading
    /// dimension) shows no padding to check, and the last row's or column's padding may lie
    /// past the end of a copy.
    pub fn padding_unchanged(&self, before: &Self) -> bool {
        if (self.rows, self.cols, self.ld, self.layout)
            != (before.rows, before.cols, before.ld, before.layout)
        {
            return true;
        }
        let inner = match self.layout {
            Layout::RowMajor => self.cols,
            Layout::ColMajor => self.rows,
        };
        let same = |a: &T, b: &T| a.to_f64().to_bits() == b.to_f64().to_bits();
        self.data
            .chunks(self.ld)
            .zip(before.data.chunks(self.ld))
            .all(|(now, then)| {
                let gap = inner.min(now.len()).min(then.len());
                now[gap..].iter().zip(&then[gap..]).all(|(a, b)| same(a, b))
            })
    }
}

/// `v` stored in `S`. Integer types hold no NaN or infinity: those become 0 (as NaN does in
/// any conversion) rather than the type's extremes, from which further arithmetic overflows,
/// which the semantics leave undefined.
pub fn stored<S: Scalar>(v: f64) -> S {
    let integer = S::DTYPE.is_integer();
    S::from_f64(if integer && !v.is_finite() { 0.0 } else { v })
}

/// `v` as the kernel under test will read it: stored in `T`, then rounded to TF32 when that is
/// the compute mode, or saturated to the width of its side (`right`: the dense operand of SpMV
/// and SpMM, Y of SDDMM) when the precision names integer widths.
pub fn tested_value<T: Scalar>(v: f64, precision: Precision, right: bool) -> T {
    let t = stored::<T>(v);
    match precision.compute {
        Compute::Tf32 => T::from_f64(f64::from(round_to_tf32(t.to_f64() as f32))),
        Compute::IntBits { .. } => {
            let (low, high) = precision.value_range(right);
            T::from_f64(t.to_f64().clamp(f64::from(low), f64::from(high)))
        }
        _ => t,
    }
}

/// The dense operands of one case in one precision.
pub struct Operands<T: Scalar> {
    /// x; or B; or X and Y; or Q, K and V.
    pub inputs: Vec<HostDense<T>>,
    /// The output before the run.
    pub prior: HostDense<T::Out>,
}

impl<T: Scalar> Operands<T> {
    /// Operands for `case` on a `rows x cols` matrix with `nnz` entries.
    pub fn generate(
        case: &Case,
        (rows, cols, nnz): (usize, usize, usize),
        precision: Precision,
    ) -> Self {
        let w = case.width;
        let (inputs, output): (Vec<(usize, usize)>, _) = match case.op {
            OpKind::Spmv => (vec![(cols, 1)], (rows, 1)),
            OpKind::Spmm => (vec![(cols, w)], (rows, w)),
            OpKind::Sddmm => (vec![(rows, w), (cols, w)], (nnz, 1)),
            _ => {
                let w = case.heads * w;
                (vec![(rows, w), (cols, w), (cols, w)], (rows, w))
            }
        };
        let mut rng = Rng::new(case.seed);
        let inputs = inputs
            .into_iter()
            .enumerate()
            .map(|(index, shape)| {
                let right = !(case.op == OpKind::Sddmm && index == 0);
                let fill = case.inputs.of_input(case.op, index);
                HostDense::new(shape, case.input_layout, case.strides, |k| {
                    tested_value(fill.sample(&mut rng, k), precision, right)
                })
            })
            .collect();
        let prior = HostDense::new(output, case.output_layout, case.strides, |k| {
            stored::<T::Out>(case.prior.sample(&mut rng, k))
        });
        Operands { inputs, prior }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_blas::f16;

    #[test]
    fn padding_is_nan_and_views_see_the_entries() {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            let d = HostDense::<f32>::new((2, 3), layout, Strides::Padded, |k| k as f32);
            assert_eq!(d.values(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
            assert_eq!(d.view().unwrap().at(1, 2), 5.0);
            assert!(d.data.iter().filter(|v| v.is_nan()).count() > 0);
            let mut e = d.clone();
            assert!(e.padding_unchanged(&d));
            let last = e.data.len() - 1;
            e.data[last] = 0.0;
            assert!(!e.padding_unchanged(&d));
        }
    }

    #[test]
    fn leading_dimensions_follow_the_strides() {
        let odd = HostDense::<f32>::new((3, 8), Layout::RowMajor, Strides::Odd, |k| k as f32);
        assert_eq!(odd.view().unwrap().ld(), 9);
        let vector =
            HostDense::<f32>::new((5, 1), Layout::RowMajor, Strides::Fixed(3), |k| k as f32);
        assert_eq!(vector.view().unwrap().ld(), 3);
        assert_eq!(vector.values(), [0.0, 1.0, 2.0, 3.0, 4.0]);
        let wide = (1usize << 32) + 5;
        let row =
            HostDense::<f32>::new((1, 7), Layout::RowMajor, Strides::Fixed(wide), |k| k as f32);
        assert_eq!(row.data.len(), 7 + TAIL);
        let view = row.view().unwrap();
        assert_eq!((view.ld(), view.at(0, 6)), (wide, 6.0));
    }

    #[test]
    fn tf32_inputs_are_rounded_before_both_sides_see_them() {
        let v = 1.0 + 2f64.powi(-12);
        assert_eq!(tested_value::<f32>(v, Precision::F32, true), v as f32);
        assert_eq!(tested_value::<f32>(v, Precision::TF32, true), 1.0);
        assert_eq!(tested_value::<f16>(v, Precision::F16, true).to_f64(), 1.0);
    }

    #[test]
    fn integers_store_non_finite_values_as_zero() {
        assert_eq!(stored::<i32>(f64::NEG_INFINITY), 0);
        assert_eq!(stored::<i8>(f64::NAN), 0);
        assert_eq!(stored::<i8>(1e9), 127);
        assert_eq!(tested_value::<i16>(1e9, Precision::L16_R4, false), 32767);
        assert_eq!(tested_value::<i16>(-1e9, Precision::L16_R4, true), -8);
        assert_eq!(tested_value::<i16>(-1e9, Precision::L12_R4, false), -2048);
        assert_eq!(stored::<f32>(f64::INFINITY), f32::INFINITY);
    }
}
