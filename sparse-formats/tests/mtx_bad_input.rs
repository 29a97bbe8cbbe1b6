//! The Matrix Market reader on malformed and hostile input: one test per class of defect, each
//! checking the error's type and line. Then write→read round trips, which must be bit-exact.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sparse_core::{Dense, Error, Layout, Result, Scalar};
use sparse_formats::mtx::{self, MtxData, MtxField, MtxFormat, MtxSymmetry, ReadOptions};
use sparse_formats::{dense_from_csr, Csr};

const STRICT: ReadOptions = ReadOptions {
    allow_non_finite: false,
    reject_duplicates: true,
};
const LENIENT: ReadOptions = ReadOptions {
    allow_non_finite: true,
    reject_duplicates: false,
};

fn read(text: &str, options: ReadOptions) -> Result<MtxData<f64>> {
    mtx::read_matrix_market_from(text.as_bytes(), options)
}

fn csr(text: &str, options: ReadOptions) -> Csr<f64> {
    read(text, options)
        .and_then(|m| m.to_csr())
        .unwrap()
        .with_index()
        .unwrap()
}

/// Asserts that `text` is refused at `line` with a message containing `needle`.
#[track_caller]
fn refused_with(text: &str, options: ReadOptions, line: usize, needle: &str) {
    match read(text, options) {
        Err(Error::MatrixMarket {
            path: None,
            line: found,
            message,
        }) => {
            assert_eq!(found, line, "wrong line for {message:?}");
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
            assert!(!message.contains('\n'), "{message:?} spans lines");
        }
        other => panic!("expected a Matrix Market error on line {line}, got {other:?}"),
    }
}

#[track_caller]
fn refused(text: &str, line: usize, needle: &str) {
    refused_with(text, ReadOptions::default(), line, needle);
}

const REAL: &str = "%%MatrixMarket matrix coordinate real general\n";

#[test]
fn malformed_banner() {
    refused("", 1, "empty input");
    refused("3 3 1\n1 1 1\n", 1, "expected the banner");
    refused(
        "%MatrixMarket matrix coordinate real general\n1 1 0\n",
        1,
        "expected the banner",
    );
    refused(
        "%%MatrixMarket matrix coordinate real\n1 1 0\n",
        1,
        "missing symmetry",
    );
    refused(
        "%%MatrixMarket matrix coordinate real general extra\n1 1 0\n",
        1,
        "unexpected \"extra\"",
    );
    refused(
        "%%MatrixMarket vector coordinate real general\n",
        1,
        "object \"vector\"",
    );
    refused(
        "%%MatrixMarket matrix sparse real general\n",
        1,
        "unknown format \"sparse\"",
    );
    refused(
        "%%MatrixMarket matrix array pattern general\n",
        1,
        "pattern field is not valid",
    );
    refused(
        "%%MatrixMarket matrix coordinate real lower\n",
        1,
        "unknown symmetry \"lower\"",
    );
    // The banner must be the first line, comments included.
    refused(
        "% a comment\n%%MatrixMarket matrix coordinate real general\n",
        1,
        "banner",
    );
}

#[test]
fn unknown_and_complex_fields() {
    refused(
        "%%MatrixMarket matrix coordinate quaternion general\n",
        1,
        "unknown field",
    );
    refused(
        "%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1.0 2.0\n",
        1,
        "complex matrices are not supported",
    );
    refused(
        "%%MatrixMarket matrix coordinate real hermitian\n2 2 1\n1 1 1.0\n",
        1,
        "hermitian matrices are not supported",
    );
}

#[test]
fn missing_size_line() {
    refused(
        &format!("{REAL}% only comments\n\n"),
        4,
        "missing size line",
    );
    refused(&format!("{REAL}3 3\n"), 2, "missing number of entries");
    refused(
        "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n",
        2,
        "must be square",
    );
}

#[test]
fn truncated_file() {
    refused(
        &format!("{REAL}2 2 3\n1 1 1\n% comment\n2 2 1\n"),
        6,
        "input ends after 2 of the 3",
    );
    // No newline at the end of the last line changes nothing.
    refused(
        &format!("{REAL}2 2 3\n1 1 1"),
        4,
        "input ends after 1 of the 3",
    );
}

#[test]
fn more_entries_than_declared() {
    refused(
        &format!("{REAL}2 2 1\n1 1 1\n\n2 2 1\n"),
        5,
        "more entries than the 1",
    );
    // Comments and blank lines after the last entry are not entries.
    let a = csr(&format!("{REAL}2 2 1\n1 1 1\n\n% trailer\n   \n"), STRICT);
    assert_eq!(a.nnz(), 1);
}

#[test]
fn header_count_that_lies_both_ways() {
    let entries = "1 1 1.0\n2 1 2.0\n2 2 3.0\n";
    refused(
        &format!("{REAL}2 2 4\n{entries}"),
        6,
        "input ends after 3 of the 4",
    );
    refused(
        &format!("{REAL}2 2 2\n{entries}"),
        5,
        "more entries than the 2",
    );
    assert_eq!(csr(&format!("{REAL}2 2 3\n{entries}"), STRICT).nnz(), 3);
}

#[test]
fn index_zero() {
    refused(
        &format!("{REAL}2 2 1\n0 1 1.0\n"),
        3,
        "row index 0 is outside 1..=2",
    );
    refused(
        &format!("{REAL}2 2 1\n1 0 1.0\n"),
        3,
        "column index 0 is outside 1..=2",
    );
}

#[test]
fn index_past_the_size() {
    refused(
        &format!("{REAL}2 3 1\n3 1 1.0\n"),
        3,
        "row index 3 is outside 1..=2",
    );
    refused(
        &format!("{REAL}2 3 1\n2 4 1.0\n"),
        3,
        "column index 4 is outside 1..=3",
    );
    refused(
        &format!("{REAL}0 0 1\n1 1 1.0\n"),
        3,
        "row index 1 is outside 1..=0",
    );
}

#[test]
fn negative_index() {
    refused(
        &format!("{REAL}2 2 1\n-1 1 1.0\n"),
        3,
        "row index -1 is negative",
    );
    refused(
        &format!("{REAL}2 2 1\n1 -2 1.0\n"),
        3,
        "column index -2 is negative",
    );
    refused(
        &format!("{REAL}-2 2 0\n"),
        2,
        "number of rows -2 is negative",
    );
}

#[test]
fn numbers_that_overflow_usize() {
    refused(
        &format!("{REAL}99999999999999999999 2 0\n"),
        2,
        "does not fit in usize",
    );
    refused(
        &format!("{REAL}2 2 1\n1 18446744073709551616 1.0\n"),
        3,
        "column index 18446744073709551616 does not fit in usize",
    );
}

#[test]
fn non_numeric_token() {
    refused(
        &format!("{REAL}2 2 1\n1 x 1.0\n"),
        3,
        "column index \"x\" is not",
    );
    refused(
        &format!("{REAL}2 2 1\n1.0 1 1.0\n"),
        3,
        "row index \"1.0\" is not",
    );
    refused(
        &format!("{REAL}2 2 1\n1 1 one\n"),
        3,
        "value \"one\" is not a number",
    );
    refused(&format!("{REAL}2 2 1\n1 1 1.0d0\n"), 3, "is not a number");
    refused(&format!("{REAL}2 x 1\n"), 2, "number of columns \"x\"");
    refused(
        "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n",
        3,
        "value \"1.5\" is not a 64-bit integer",
    );
    refused(&format!("{REAL}2 2 1\n1 1 \u{e9}\n"), 3, "not a number");
}

#[test]
fn missing_value_and_extra_tokens() {
    refused(&format!("{REAL}2 2 1\n1 1\n"), 3, "missing value");
    refused(&format!("{REAL}2 2 1\n1\n"), 3, "missing column index");
    refused(&format!("{REAL}2 2 1\n1 1 1.0 7\n"), 3, "unexpected \"7\"");
    refused(
        "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1.0\n",
        3,
        "unexpected \"1.0\"",
    );
    refused(
        "%%MatrixMarket matrix array real general\n1 1\n1 2\n",
        3,
        "unexpected \"2\"",
    );
}

#[test]
fn nan_is_refused_unless_allowed() {
    let text = format!("{REAL}2 2 2\n1 1 1.0\n2 2 NaN\n");
    refused(&text, 4, "value NaN is not finite");
    assert!(csr(&text, LENIENT).values()[1].is_nan());
}

#[test]
fn inf_is_refused_unless_allowed() {
    for inf in ["inf", "-Infinity", "1e400"] {
        refused(&format!("{REAL}2 2 1\n\n2 2 {inf}\n"), 4, "is not finite");
    }
    let a = csr(&format!("{REAL}2 2 1\n2 2 -inf\n"), LENIENT);
    assert_eq!(a.values(), &[f64::NEG_INFINITY]);
    // A finite value that overflows the target type is refused even when non-finite ones pass.
    let big = format!("{REAL}1 1 1\n1 1 1e300\n");
    let err = mtx::read_matrix_market_from::<f32, u32>(big.as_bytes(), LENIENT).unwrap_err();
    assert!(
        err.to_string()
            .contains("line 3: value 1e300 does not fit f32"),
        "{err}"
    );
}

#[test]
fn duplicates_are_summed_by_default() {
    let text = format!("{REAL}2 2 3\n1 2 1.5\n2 1 1.0\n1 2 2.0\n");
    let a = csr(&text, ReadOptions::default());
    assert_eq!(a.col_idx(), &[1, 0]);
    assert_eq!(a.values(), &[3.5, 1.0]);
}

#[test]
fn duplicates_are_rejected_with_the_option() {
    let text = format!("{REAL}2 2 3\n1 2 1.5\n% between\n2 1 1.0\n1 2 2.0\n");
    refused_with(&text, STRICT, 6, "entry (1, 2) repeats the entry on line 3");
    // In a symmetric file (i, j) and (j, i) are the same entry.
    let sym = "%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n2 1 1.0\n1 2 1.0\n";
    refused_with(sym, STRICT, 4, "entry (1, 2) repeats the entry on line 3");
}

#[test]
fn symmetric_expansion() {
    // Lower and upper triangle entries are both mirrored; the diagonal is not doubled.
    let text = "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 4\n3 1 2\n2 3 -1\n";
    let a = csr(text, STRICT);
    assert_eq!(a.row_ptr(), &[0, 2, 3, 5]);
    assert_eq!(a.col_idx(), &[0, 2, 2, 0, 1]);
    assert_eq!(a.values(), &[4.0, 2.0, -1.0, 2.0, -1.0]);
    assert!(a.is_symmetric().unwrap());
    let pattern = "%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n2 1\n2 2\n";
    assert_eq!(csr(pattern, STRICT).values(), &[1.0, 1.0, 1.0]);
}

#[test]
fn skew_symmetric_with_a_diagonal_entry() {
    let head = "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n";
    refused(
        &format!("{head}2 1 5\n2 2 1.0\n"),
        4,
        "diagonal entry (2, 2)",
    );
    let a = csr(&format!("{head}2 1 5\n1 3 -2\n"), STRICT);
    let dense = dense_from_csr(&a, Layout::RowMajor);
    assert_eq!(
        (
            dense.at(1, 0),
            dense.at(0, 1),
            dense.at(0, 2),
            dense.at(2, 0)
        ),
        (5.0, -5.0, -2.0, 2.0)
    );
}

#[test]
fn huge_header_sizes_fail_fast_without_allocating() {
    let text = format!("{REAL}1000000000 1000000000 1000000000000\n1 1 1.0\n");
    let start = Instant::now();
    refused(&text, 4, "input ends after 1 of the 1000000000000");
    let err = mtx::read_matrix_market_from::<f32, u32>(text.as_bytes(), STRICT).unwrap_err();
    assert!(matches!(err, Error::MatrixMarket { line: 4, .. }), "{err}");
    let array = "%%MatrixMarket matrix array real symmetric\n1000000 1000000\n1.0\n";
    refused(array, 4, "input ends after 1 of the 500000500000");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_line_longer_than_a_mebibyte_is_refused_without_reading_on() {
    let long = format!("{REAL}%{}\n1 1 0\n", " ".repeat(1 << 21));
    refused(&long, 2, "line is longer than 1048576 bytes");
}

#[test]
fn array_with_overflowing_size() {
    refused(
        "%%MatrixMarket matrix array real general\n4294967296 4294967297\n1.0\n",
        2,
        "a 4294967296x4294967297 array has more elements than usize holds",
    );
}

#[test]
fn dimensions_that_do_not_fit_the_index_type() {
    let text = format!("{REAL}4294967296 1 0\n");
    let err = mtx::read_matrix_market_from::<f32, u32>(text.as_bytes(), STRICT).unwrap_err();
    assert!(matches!(err, Error::IndexOverflow { .. }), "{err}");
}

#[test]
fn arrays_are_column_major_and_symmetric_ones_expanded() {
    let general = "%%MatrixMarket matrix array integer general\n% c\n2 3\n1\n2\n3\n4\n5\n6\n";
    let MtxData::Dense { header, matrix } = read(general, STRICT).unwrap() else {
        panic!("an array file reads as dense");
    };
    assert_eq!(
        (header.format, header.field, header.symmetry, header.entries),
        (MtxFormat::Array, MtxField::Integer, MtxSymmetry::General, 6)
    );
    assert_eq!(
        (matrix.at(1, 0), matrix.at(0, 1), matrix.at(1, 2)),
        (2.0, 3.0, 6.0)
    );

    let symmetric = "%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n";
    let d = read(symmetric, STRICT).unwrap().into_dense().unwrap();
    let rows: Vec<Vec<f64>> = (0..3)
        .map(|i| (0..3).map(|j| d.at(i, j)).collect())
        .collect();
    assert_eq!(rows, [[1.0, 2.0, 3.0], [2.0, 4.0, 5.0], [3.0, 5.0, 6.0]]);

    let skew = "%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\n3\n";
    let d = read(skew, STRICT).unwrap().into_dense().unwrap();
    let rows: Vec<Vec<f64>> = (0..3)
        .map(|i| (0..3).map(|j| d.at(i, j)).collect())
        .collect();
    assert_eq!(rows, [[0.0, -1.0, -2.0], [1.0, 0.0, -3.0], [2.0, 3.0, 0.0]]);
    refused(
        skew.trim_end_matches("3\n"),
        5,
        "input ends after 2 of the 3",
    );

    // to_csr keeps only the nonzero values of an array file.
    let a = read(skew, STRICT).unwrap().to_csr().unwrap();
    assert_eq!(a.nnz(), 6);
}

#[test]
fn crlf_case_and_whitespace_variations() {
    let text =
        "%%matrixmarket MATRIX Coordinate REAL General\r\n\r\n 2\t2 1 \r\n\t2  1\t-3.5e0\r\n";
    assert_eq!(csr(text, STRICT).values(), &[-3.5]);
}

#[test]
fn invalid_utf8_in_data_is_an_error_but_not_in_comments() {
    let mut bytes = format!("{REAL}% caf\u{e9} in Latin-1: ").into_bytes();
    bytes.extend_from_slice(b"caf\xe9\n1 1 1\n1 1 \xff\n");
    let err = mtx::read_matrix_market_from::<f64, u32>(&bytes[..], STRICT).unwrap_err();
    assert!(
        matches!(err, Error::MatrixMarket { line: 4, ref message, .. } if message.contains("UTF-8")),
        "{err}"
    );
}

#[test]
fn gzip_is_detected_by_magic_bytes() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(format!("{REAL}2 2 1\n2 1 7\n").as_bytes())
        .unwrap();
    let bytes = gz.finish().unwrap();
    let a: Csr<f64> = read_bytes(&bytes).to_csr().unwrap().with_index().unwrap();
    assert_eq!(a.values(), &[7.0]);

    // A file named .mtx holding gzip data, and a .gz name holding plain text, both read.
    let gz_inside = TempFile::new("magic.mtx");
    std::fs::write(&gz_inside.0, &bytes).unwrap();
    assert_eq!(mtx::read_csr::<f64, u32>(&gz_inside.0).unwrap(), a);
    let plain_inside = TempFile::new("plain.mtx.gz");
    std::fs::write(&plain_inside.0, format!("{REAL}2 2 1\n2 1 7\n")).unwrap();
    assert_eq!(mtx::read_csr::<f64, u32>(&plain_inside.0).unwrap(), a);

    // Damaged compressed data is an I/O error, not a panic.
    let damaged = &bytes[..bytes.len() / 2];
    assert!(matches!(
        mtx::read_matrix_market_from::<f64, usize>(damaged, STRICT),
        Err(Error::Io { .. }) | Err(Error::MatrixMarket { .. })
    ));
}

fn read_bytes(bytes: &[u8]) -> MtxData<f64> {
    mtx::read_matrix_market_from(bytes, STRICT).unwrap()
}

#[test]
fn errors_from_files_name_the_path_and_line() {
    let file = TempFile::new("bad.mtx");
    std::fs::write(&file.0, format!("{REAL}2 2 1\n3 1 1\n")).unwrap();
    let err = mtx::read_csr::<f64, u32>(&file.0).unwrap_err();
    assert!(matches!(&err, Error::MatrixMarket { path: Some(p), line: 3, .. } if p == &file.0));
    assert_eq!(
        err.to_string(),
        format!("{}: line 3: row index 3 is outside 1..=2", file.0.display())
    );
    let missing = mtx::read_csr::<f64, u32>(file.0.with_extension("absent")).unwrap_err();
    assert!(
        matches!(missing, Error::Io { path: Some(_), .. }),
        "{missing}"
    );
}

#[test]
fn read_header_describes_files_the_reader_refuses() {
    let file = TempFile::new("complex.mtx");
    std::fs::write(
        &file.0,
        "%%MatrixMarket matrix coordinate complex hermitian\n% c\n5 5 2\n1 1 1 0\n",
    )
    .unwrap();
    let header = mtx::read_header(&file.0).unwrap();
    assert_eq!(
        (header.field, header.symmetry, header.rows, header.entries),
        (MtxField::Complex, MtxSymmetry::Hermitian, 5, 2)
    );
    assert!(mtx::read_csr::<f64, u32>(&file.0).is_err());
}

#[test]
fn read_dense_densifies_coordinate_files_within_a_limit() {
    let file = TempFile::new("densify.mtx");
    std::fs::write(&file.0, format!("{REAL}2 3 3\n1 3 1.5\n2 1 1\n1 3 1\n")).unwrap();
    let d: Dense<f64> = mtx::read_dense(&file.0).unwrap();
    assert_eq!((d.shape(), d.layout()), ((2, 3), Layout::ColMajor));
    assert_eq!((d.at(0, 2), d.at(1, 0), d.at(1, 1)), (2.5, 1.0, 0.0));

    // Refused from the size line, before any entry is read.
    std::fs::write(&file.0, format!("{REAL}100000 100000 1\n1 1 1\n")).unwrap();
    let err = mtx::read_dense::<f32>(&file.0).unwrap_err();
    assert!(
        matches!(&err, Error::MatrixMarket { line: 2, message, .. } if message.contains("too large to densify")),
        "{err}"
    );
    let m = mtx::read_matrix_market::<f32>(&file.0).unwrap();
    assert!(matches!(m.into_dense(), Err(Error::InvalidArgument { .. })));
}

/// A file under the temp directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir();
        TempFile(dir.join(format!(
            "sparse-formats-mtx-{}-{n}-{name}",
            std::process::id()
        )))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn bits<T: Scalar>(values: &[T]) -> Vec<u64> {
    values.iter().map(|v| v.to_f64().to_bits()).collect()
}

/// Writes `values` as CSR and as a padded row-major dense matrix, to plain and gzip files and to
/// memory, and checks that every value reads back with the same bits.
fn round_trip<T: Scalar>(values: &[T]) {
    let (rows, cols) = (5, 7);
    // k -> (k mod 5, 3k mod 7) is one-to-one for k < 35, so no entry repeats.
    let triplets: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(k, &v)| (k % rows, (3 * k) % cols, v))
        .collect();
    let a = Csr::<T, u32>::from_triplets(rows, cols, &triplets).unwrap();
    let ld = cols + 2;
    let mut padded = vec![T::default(); rows * ld];
    for &(i, j, v) in &triplets {
        padded[i * ld + j] = v;
    }
    let d = Dense::from_vec(padded, rows, cols, ld, Layout::RowMajor).unwrap();

    let check_csr = |b: Csr<T, u32>| {
        assert_eq!(
            (b.shape(), b.row_ptr(), b.col_idx()),
            (a.shape(), a.row_ptr(), a.col_idx())
        );
        assert_eq!(bits(b.values()), bits(a.values()), "{:?}", T::DTYPE);
    };
    let check_dense = |e: Dense<T>| {
        assert_eq!(e.shape(), (rows, cols));
        for i in 0..rows {
            for j in 0..cols {
                assert_eq!(e.at(i, j).to_f64().to_bits(), d.at(i, j).to_f64().to_bits());
            }
        }
    };
    for name in ["round-trip.mtx", "round-trip.mtx.gz"] {
        let file = TempFile::new(name);
        mtx::write_csr(&file.0, &a).unwrap();
        assert_eq!(is_gzip(&file.0), name.ends_with(".gz"));
        check_csr(mtx::read_csr(&file.0).unwrap());
        mtx::write_dense(&file.0, d.as_ref()).unwrap();
        check_dense(mtx::read_dense(&file.0).unwrap());
    }
    let mut bytes = Vec::new();
    mtx::write_csr_to(&mut bytes, &a).unwrap();
    check_csr(
        mtx::read_matrix_market_from(&bytes[..], STRICT)
            .unwrap()
            .to_csr()
            .unwrap(),
    );
    bytes.clear();
    mtx::write_dense_to(&mut bytes, d.as_ref()).unwrap();
    check_dense(
        mtx::read_matrix_market_from::<T, u32>(&bytes[..], STRICT)
            .unwrap()
            .into_dense()
            .unwrap(),
    );
}

fn is_gzip(path: &Path) -> bool {
    std::fs::read(path).unwrap().starts_with(&[0x1f, 0x8b])
}

#[test]
fn round_trip_f64_is_bit_exact() {
    round_trip::<f64>(&[
        0.1,
        -0.0,
        5e-324,
        f64::MIN_POSITIVE,
        f64::MAX,
        f64::MIN,
        -1.0 / 3.0,
        1e-300,
        123456789.12345679,
        1e16,
        9.999999999999998e15,
        2.0,
    ]);
}

#[test]
fn round_trip_f32_is_bit_exact() {
    round_trip::<f32>(&[
        0.1,
        -0.0,
        f32::MIN_POSITIVE / 8.0,
        f32::MIN_POSITIVE,
        f32::MAX,
        f32::MIN,
        -1.0 / 3.0,
        1e-30,
        16_777_217.0,
        3.0,
    ]);
}

#[test]
fn round_trip_i32_is_exact() {
    round_trip::<i32>(&[i32::MIN, i32::MAX, -1, 0, 1, 123_456_789]);
}
