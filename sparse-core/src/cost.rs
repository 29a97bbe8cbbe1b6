//! Work and minimal memory traffic of each operation: the floor performance figures are
//! measured against. Minimal bytes read every input once and write every output once.

use crate::precision::DType;

/// Floating-point (or integer) operations and the minimal bytes moved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    pub flops: f64,
    pub bytes: f64,
}

/// Shape of a sparse operand and the widths of its stored types.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SparseShape {
    pub rows: usize,
    pub cols: usize,
    pub nnz: usize,
    pub value: DType,
    pub index_bytes: usize,
}

impl SparseShape {
    fn structure_bytes(&self) -> f64 {
        ((self.rows + 1 + self.nnz) * self.index_bytes) as f64
    }
    fn value_bytes(&self) -> f64 {
        (self.nnz * self.value.bits()) as f64 / 8.0
    }
}

fn bytes(elements: usize, dtype: DType) -> f64 {
    (elements * dtype.bits()) as f64 / 8.0
}

/// `y = alpha*A*x + beta*y` (y read too when `reads_output`).
pub fn spmv(a: SparseShape, out: DType, reads_output: bool) -> Cost {
    let y = bytes(a.rows, out) * if reads_output { 2.0 } else { 1.0 };
    Cost {
        flops: 2.0 * a.nnz as f64,
        bytes: a.structure_bytes() + a.value_bytes() + bytes(a.cols, a.value) + y,
    }
}

/// `C = alpha*A*B + beta*C` with B cols x n.
pub fn spmm(a: SparseShape, n: usize, out: DType, reads_output: bool) -> Cost {
    let c = bytes(a.rows * n, out) * if reads_output { 2.0 } else { 1.0 };
    Cost {
        flops: 2.0 * (a.nnz * n) as f64,
        bytes: a.structure_bytes() + a.value_bytes() + bytes(a.cols * n, a.value) + c,
    }
}

/// `C = alpha*(X*Y^T) ∘ spy(S) + beta*C` with X rows x k, Y cols x k.
pub fn sddmm(
    s: SparseShape,
    k: usize,
    out: DType,
    scale_by_values: bool,
    reads_output: bool,
) -> Cost {
    let values = if scale_by_values {
        s.value_bytes()
    } else {
        0.0
    };
    let c = bytes(s.nnz, out) * if reads_output { 2.0 } else { 1.0 };
    Cost {
        flops: (2 * s.nnz * k + usize::from(scale_by_values) * s.nnz) as f64,
        bytes: s.structure_bytes() + values + bytes((s.rows + s.cols) * k, s.value) + c,
    }
}

/// Sparse attention with Q rows x d, K cols x d, V cols x dv (exponentials counted as one op).
pub fn attention(a: SparseShape, d: usize, dv: usize, out: DType) -> Cost {
    Cost {
        flops: (a.nnz * (2 * d + 2 * dv + 3)) as f64,
        bytes: a.structure_bytes()
            + bytes(a.rows * d + a.cols * (d + dv), a.value)
            + bytes(a.rows * dv, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spmv_counts_each_array_once() {
        let a = SparseShape {
            rows: 10,
            cols: 20,
            nnz: 100,
            value: DType::F64,
            index_bytes: 4,
        };
        let c = spmv(a, DType::F64, false);
        assert_eq!(c.flops, 200.0);
        assert_eq!(
            c.bytes,
            (11 + 100) as f64 * 4.0 + 100.0 * 8.0 + 20.0 * 8.0 + 10.0 * 8.0
        );
        assert!(spmv(a, DType::F64, true).bytes > c.bytes);
    }
}
