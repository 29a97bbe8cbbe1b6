//! Arbitrary bytes into the Matrix Market reader, under both option settings and several value
//! types. Reading must never panic. What it accepts must survive a write and a second read
//! bit for bit.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sparse_core::{Dense, Scalar, SpIndex};
use sparse_formats::mtx::{self, MtxData, MtxSymmetry, ReadOptions};
use sparse_formats::Csr;

const DEFAULT: ReadOptions = ReadOptions {
    allow_non_finite: false,
    reject_duplicates: false,
};
const OTHER: ReadOptions = ReadOptions {
    allow_non_finite: true,
    reject_duplicates: true,
};
/// Largest rows, or rows*cols when densifying, converted after a successful read. A CSR needs
/// rows + 1 pointers however few entries there are, so a 20-byte file can ask for gigabytes.
const CONVERT_LIMIT: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    read::<f64, usize>(data, DEFAULT);
    read::<f64, u32>(data, OTHER);
    read::<f32, u32>(data, OTHER);
    read::<i8, u32>(data, DEFAULT);
});

fn read<T: Scalar, I: SpIndex>(data: &[u8], options: ReadOptions) {
    let Ok(m) = mtx::read_matrix_market_from::<T, I>(data, options) else {
        return;
    };
    let h = *m.header();
    match &m {
        MtxData::Sparse { matrix, .. } => {
            assert_eq!(matrix.shape(), (h.rows, h.cols));
            let expanded = matrix.nnz();
            match h.symmetry {
                MtxSymmetry::General => assert_eq!(expanded, h.entries),
                _ => assert!((h.entries..=2 * h.entries).contains(&expanded)),
            }
            if h.rows <= CONVERT_LIMIT {
                let a = m.to_csr().expect("a read matrix converts to CSR");
                a.validate().expect("to_csr gives canonical CSR");
                round_trip_csr(&a);
            }
        }
        MtxData::Dense { matrix, .. } => {
            assert_eq!(matrix.shape(), (h.rows, h.cols));
            round_trip_dense(matrix);
        }
    }
    if h.rows.saturating_mul(h.cols) <= CONVERT_LIMIT {
        m.into_dense().expect("a small matrix densifies");
    }
}

/// Non-finite values compare by class: NaN payloads are not written.
fn same<T: Scalar>(a: T, b: T) -> bool {
    let (a, b) = (a.to_f64(), b.to_f64());
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// Duplicates summed by to_csr may overflow to infinity, so the second read allows it.
const REREAD: ReadOptions = ReadOptions {
    allow_non_finite: true,
    reject_duplicates: true,
};

fn round_trip_csr<T: Scalar, I: SpIndex>(a: &Csr<T, I>) {
    let mut bytes = Vec::new();
    mtx::write_csr_to(&mut bytes, a).expect("writing to memory");
    let b = mtx::read_matrix_market_from::<T, I>(&bytes[..], REREAD)
        .and_then(|m| m.to_csr())
        .expect("what was written reads back");
    assert_eq!(
        (b.shape(), b.row_ptr(), b.col_idx()),
        (a.shape(), a.row_ptr(), a.col_idx())
    );
    assert!(a.values().iter().zip(b.values()).all(|(&x, &y)| same(x, y)));
}

fn round_trip_dense<T: Scalar>(a: &Dense<T>) {
    let mut bytes = Vec::new();
    mtx::write_dense_to(&mut bytes, a.as_ref()).expect("writing to memory");
    let b = mtx::read_matrix_market_from::<T, usize>(&bytes[..], REREAD)
        .and_then(|m| m.into_dense())
        .expect("what was written reads back");
    assert_eq!(b.shape(), a.shape());
    for j in 0..a.cols() {
        for i in 0..a.rows() {
            assert!(same(a.at(i, j), b.at(i, j)));
        }
    }
}
