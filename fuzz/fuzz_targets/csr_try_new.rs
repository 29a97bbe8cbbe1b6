//! Arbitrary arrays into `Csr::try_new` and `Csr::from_unsorted`. Neither may panic. Whatever
//! they accept must hold the canonical CSR invariants that kernels index by without bounds checks.

#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use sparse_core::SpIndex;
use sparse_formats::Csr;

#[derive(Arbitrary, Debug)]
struct Input {
    /// `None` takes one fewer than `row_ptr`'s length, so that the fuzzer gets past the length
    /// check often; `Some` tests that check.
    rows: Option<usize>,
    cols: usize,
    row_ptr: RowPtr,
    /// Column index and value of each entry: paired so that the two arrays have one length, which
    /// independent vectors almost never do (the first runs stored no entry at all).
    entries: Vec<(u32, f32)>,
    /// Drops the last value, to test the length check all the same.
    drop_value: bool,
}

#[derive(Arbitrary, Debug)]
enum RowPtr {
    /// Taken as is: exercises the pointer checks.
    Raw(Vec<u32>),
    /// Row lengths, made into pointers that end at the number of entries (the last row takes the
    /// rest), so that the fuzzer spends its time on the column checks and the sort.
    Lengths(Vec<u8>),
}

/// Largest dimension for conversions whose output needs one pointer per row or column.
const CONVERT_LIMIT: usize = 1 << 16;

fuzz_target!(|input: Input| {
    let (col_idx, mut values): (Vec<u32>, Vec<f32>) = input.entries.into_iter().unzip();
    if input.drop_value {
        values.pop();
    }
    let row_ptr = match input.row_ptr {
        RowPtr::Raw(p) => p,
        RowPtr::Lengths(lengths) => pointers(&lengths, col_idx.len()),
    };
    let rows = input.rows.unwrap_or(row_ptr.len().saturating_sub(1));
    let cols = input.cols;
    let lengths = (row_ptr.len(), col_idx.len(), values.len());

    let unsorted = Csr::<f32, u32>::from_unsorted(
        rows,
        cols,
        row_ptr.clone(),
        col_idx.clone(),
        values.clone(),
    );
    if let Ok(b) = &unsorted {
        check_canonical(b);
        assert!(b.nnz() <= values.len());
    }

    match Csr::<f32, u32>::try_new(rows, cols, row_ptr, col_idx, values) {
        Ok(a) => {
            check_canonical(&a);
            let b = unsorted.expect("from_unsorted accepts what try_new accepts");
            assert!(same(&a, &b), "from_unsorted changed a canonical matrix");
            assert!(same(&a, &a.to_coo().to_csr().expect("COO round trip")));
            if cols <= CONVERT_LIMIT {
                let t = a.transpose().expect("transpose");
                check_canonical(&t);
                assert!(same(&a, &t.transpose().expect("transpose back")));
            }
            let stats = a.row_stats();
            assert!(stats.min <= stats.max && stats.empty_rows <= rows);
        }
        Err(rejected) => {
            let (p, c, v) = &rejected.parts;
            assert_eq!(
                (p.len(), c.len(), v.len()),
                lengths,
                "inputs handed back whole"
            );
        }
    }
});

/// Prefix sums of `lengths`, capped at `nnz`, the last one set to `nnz`.
fn pointers(lengths: &[u8], nnz: usize) -> Vec<u32> {
    let nnz = u32::try_from(nnz).unwrap_or(u32::MAX);
    let mut total = 0u32;
    let mut ptr = vec![0];
    ptr.extend(lengths.iter().map(|&l| {
        total = total.saturating_add(u32::from(l)).min(nnz);
        total
    }));
    if let Some(last) = ptr.last_mut() {
        *last = nnz;
    }
    ptr
}

/// Checks the invariants through `as_ref()`, the view kernels use.
fn check_canonical(a: &Csr<f32, u32>) {
    let r = a.as_ref();
    r.validate().expect("a Csr is canonical");
    assert_eq!(r.row_ptr().len(), a.rows() + 1);
    assert_eq!(r.row_ptr()[0], 0);
    assert_eq!(r.row_ptr()[a.rows()].to_usize(), r.nnz());
    assert_eq!((r.col_idx().len(), r.values().len()), (r.nnz(), r.nnz()));
    let mut total = 0;
    for i in 0..a.rows() {
        let (cols, vals) = r.row(i);
        assert_eq!((cols.len(), vals.len()), (r.row_len(i), r.row_len(i)));
        assert!(cols.windows(2).all(|w| w[0] < w[1]));
        assert!(cols.iter().all(|&c| c.to_usize() < a.cols()));
        total += cols.len();
    }
    assert_eq!(total, r.nnz());
}

/// Same structure and the same value bits.
fn same(a: &Csr<f32, u32>, b: &Csr<f32, u32>) -> bool {
    let bits = |m: &Csr<f32, u32>| m.values().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    (a.shape(), a.row_ptr(), a.col_idx()) == (b.shape(), b.row_ptr(), b.col_idx())
        && bits(a) == bits(b)
}
