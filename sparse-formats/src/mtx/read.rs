//! The streaming reader: the banner, the size line, then one loop over the entries.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::num::IntErrorKind;
use std::path::{Path, PathBuf};
use std::str::SplitAsciiWhitespace;

use flate2::bufread::MultiGzDecoder;
use sparse_core::{check_dimensions, Dense, Error, Layout, Result, Scalar, SpIndex};

use super::{
    check_densify, is_integer, Header, MtxData, MtxField, MtxFormat, MtxSymmetry, ReadOptions,
};
use crate::coo::Coo;
use crate::csr::Csr;

/// Longest line accepted. Matrix Market lines are short; the cap keeps a file without newlines
/// from being pulled into memory whole.
const MAX_LINE: u64 = 1 << 20;
/// Most entries reserved before they arrive. Past this, storage grows as entries are read, so
/// memory follows the file's real length, not what its size line claims.
const MAX_RESERVE: usize = 1 << 20;
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const BANNER: &str = "%%MatrixMarket matrix <format> <field> <symmetry>";

/// Reads a `.mtx` file, gzip-compressed or not, with the default [`ReadOptions`].
pub fn read_matrix_market<T: Scalar>(path: impl AsRef<Path>) -> Result<MtxData<T>> {
    read_matrix_market_with(path, ReadOptions::default())
}

/// Reads a file with `options`; `I` is the index type of a sparse result, checked against the
/// dimensions before any entry is read.
pub fn read_matrix_market_with<T: Scalar, I: SpIndex>(
    path: impl AsRef<Path>,
    options: ReadOptions,
) -> Result<MtxData<T, I>> {
    let mut parser = Parser::open(path.as_ref())?;
    let header = parser.header()?;
    parser.body(header, options)
}

/// Reads from any buffered reader, gzip-compressed or not. Errors carry no path.
pub fn read_matrix_market_from<T: Scalar, I: SpIndex>(
    reader: impl BufRead,
    options: ReadOptions,
) -> Result<MtxData<T, I>> {
    let mut parser = Parser::new(reader, None)?;
    let header = parser.header()?;
    parser.body(header, options)
}

/// The banner and size line, without reading the entries, so that a caller can look at a file
/// (complex and hermitian ones included) before deciding to load it.
pub fn read_header(path: impl AsRef<Path>) -> Result<Header> {
    Parser::open(path.as_ref())?.header()
}

/// Reads a file as canonical CSR, duplicates summed. An array file gives its nonzero values.
/// The result needs `rows + 1` row pointers, however few entries the file has.
pub fn read_csr<T: Scalar, I: SpIndex>(path: impl AsRef<Path>) -> Result<Csr<T, I>> {
    read_matrix_market_with::<T, I>(path, ReadOptions::default())?.to_csr()
}

/// Reads a file as a column-major dense matrix. A coordinate file is densified (duplicates
/// summed). It is refused beyond [`MAX_DENSIFY`](super::MAX_DENSIFY) elements before any entry is read.
pub fn read_dense<T: Scalar>(path: impl AsRef<Path>) -> Result<Dense<T>> {
    let mut parser = Parser::open(path.as_ref())?;
    let header = parser.header()?;
    if header.format == MtxFormat::Coordinate {
        check_densify(header.rows, header.cols).map_err(|m| parser.error(parser.line, m))?;
    }
    parser
        .body::<T, usize>(header, ReadOptions::default())?
        .into_dense()
}

struct Parser<'a> {
    reader: Box<dyn BufRead + 'a>,
    path: Option<PathBuf>,
    /// The line last read, newline included.
    buf: Vec<u8>,
    /// 1-based number of the line in `buf`.
    line: usize,
}

impl Parser<'static> {
    fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(Some(path.to_path_buf()), e))?;
        Parser::new(
            BufReader::with_capacity(1 << 16, file),
            Some(path.to_path_buf()),
        )
    }
}

impl<'a> Parser<'a> {
    fn new(mut reader: impl BufRead + 'a, path: Option<PathBuf>) -> Result<Self> {
        let gzip = match reader.fill_buf() {
            Ok(start) => start.starts_with(&GZIP_MAGIC),
            Err(e) => return Err(Error::io(path, e)),
        };
        let reader: Box<dyn BufRead + 'a> = if gzip {
            Box::new(BufReader::new(MultiGzDecoder::new(reader)))
        } else {
            Box::new(reader)
        };
        Ok(Parser {
            reader,
            path,
            buf: Vec::new(),
            line: 0,
        })
    }

    fn error(&self, line: usize, message: impl Into<String>) -> Error {
        Error::MatrixMarket {
            path: self.path.clone(),
            line,
            message: message.into(),
        }
    }

    /// Reads the next line into `buf`; false at the end of the input.
    fn read_line(&mut self) -> Result<bool> {
        self.buf.clear();
        let read = (&mut self.reader)
            .take(MAX_LINE + 1)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| Error::io(self.path.clone(), e))?;
        if read == 0 {
            return Ok(false);
        }
        self.line += 1;
        if self.buf.len() as u64 > MAX_LINE {
            return Err(self.error(self.line, format!("line is longer than {MAX_LINE} bytes")));
        }
        Ok(true)
    }

    /// Parses the next line that is neither blank nor a comment; `None` at the end of the input.
    /// A parse error is reported at that line.
    fn next_data<V>(&mut self, parse: impl FnOnce(&str) -> Result<V, String>) -> Result<Option<V>> {
        loop {
            if !self.read_line()? {
                return Ok(None);
            }
            let text = self.buf.trim_ascii();
            if text.is_empty() || text.starts_with(b"%") {
                continue;
            }
            return std::str::from_utf8(text)
                .map_err(|_| "line is not valid UTF-8".to_string())
                .and_then(parse)
                .map(Some)
                .map_err(|m| self.error(self.line, m));
        }
    }

    fn header(&mut self) -> Result<Header> {
        if !self.read_line()? {
            return Err(self.error(1, format!("empty input, expected the banner {BANNER}")));
        }
        let (format, field, symmetry) = parse_banner(&self.buf).map_err(|m| self.error(1, m))?;
        let sizes = self.next_data(|text| parse_sizes(text, format, symmetry))?;
        let Some([rows, cols, entries]) = sizes else {
            return Err(self.error(self.line + 1, "missing size line"));
        };
        Ok(Header {
            format,
            field,
            symmetry,
            rows,
            cols,
            entries,
        })
    }

    fn body<T: Scalar, I: SpIndex>(
        &mut self,
        header: Header,
        options: ReadOptions,
    ) -> Result<MtxData<T, I>> {
        if header.field == MtxField::Complex {
            return Err(self.error(1, "complex matrices are not supported"));
        }
        if header.symmetry == MtxSymmetry::Hermitian {
            return Err(self.error(1, "hermitian matrices are not supported"));
        }
        let data = match header.format {
            MtxFormat::Coordinate => MtxData::Sparse {
                header,
                matrix: self.coordinate(&header, options)?,
            },
            MtxFormat::Array => MtxData::Dense {
                header,
                matrix: self.array(&header, options)?,
            },
        };
        if self.next_data(|_| Ok(()))?.is_some() {
            let declared = header.entries;
            return Err(self.error(
                self.line,
                format!("more entries than the {declared} the size line declares"),
            ));
        }
        Ok(data)
    }

    fn truncated(&self, read: usize, header: &Header) -> Error {
        let declared = header.entries;
        self.error(
            self.line + 1,
            format!("input ends after {read} of the {declared} entries the size line declares"),
        )
    }

    fn coordinate<T: Scalar, I: SpIndex>(
        &mut self,
        header: &Header,
        options: ReadOptions,
    ) -> Result<Coo<T, I>> {
        check_dimensions::<I>(header.rows, header.cols)?;
        let symmetric = header.symmetry != MtxSymmetry::General;
        let mut coo = Coo::empty(header.rows, header.cols);
        let expected = header.entries.saturating_mul(1 + usize::from(symmetric));
        coo.reserve(expected.min(MAX_RESERVE));
        // The line of each entry seen, kept only when duplicates are refused.
        let mut seen = options.reject_duplicates.then(HashMap::new);
        for read in 0..header.entries {
            let entry = self.next_data(|text| parse_entry::<T>(text, header, options))?;
            let Some((row, col, value, mirror)) = entry else {
                return Err(self.truncated(read, header));
            };
            if let Some(seen) = &mut seen {
                let key = if symmetric {
                    (row.max(col), row.min(col))
                } else {
                    (row, col)
                };
                if let Some(first) = seen.insert(key, self.line) {
                    let message = format!(
                        "entry ({}, {}) repeats the entry on line {first}",
                        row + 1,
                        col + 1
                    );
                    return Err(self.error(self.line, message));
                }
            }
            coo.push(row, col, value)?;
            if symmetric && row != col {
                coo.push(col, row, mirror)?;
            }
        }
        Ok(coo)
    }

    fn array<T: Scalar>(&mut self, header: &Header, options: ReadOptions) -> Result<Dense<T>> {
        let (rows, cols, ld) = (header.rows, header.cols, header.rows.max(1));
        let mut values = Vec::with_capacity(header.entries.min(MAX_RESERVE));
        for read in 0..header.entries {
            let value = self.next_data(|text| {
                let [value] = tokens(text.split_ascii_whitespace(), ["value"])?;
                parse_value::<T>(value, header, options)
            })?;
            let Some((value, _)) = value else {
                return Err(self.truncated(read, header));
            };
            values.push(value);
        }
        if header.symmetry == MtxSymmetry::General {
            return Dense::from_vec(values, rows, cols, ld, Layout::ColMajor);
        }
        // Allocated only now that the stored triangle has really arrived. rows*cols was checked
        // when the size line was read.
        let skew = header.symmetry == MtxSymmetry::SkewSymmetric;
        let mut full = vec![T::default(); rows * cols];
        let lower = (0..cols).flat_map(|j| (j + usize::from(skew)..rows).map(move |i| (i, j)));
        for ((i, j), v) in lower.zip(values) {
            full[i + j * ld] = v;
            // Exact: parse_value checked that the negation fits T.
            full[j + i * ld] = if skew { T::from_f64(-v.to_f64()) } else { v };
        }
        Dense::from_vec(full, rows, cols, ld, Layout::ColMajor)
    }
}

fn parse_banner(line: &[u8]) -> Result<(MtxFormat, MtxField, MtxSymmetry), String> {
    let mut words = std::str::from_utf8(line)
        .unwrap_or("")
        .split_ascii_whitespace();
    if !words
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("%%MatrixMarket"))
    {
        return Err(format!("expected the banner {BANNER}"));
    }
    let [object, format, field, symmetry] =
        tokens(words, ["object", "format", "field", "symmetry"])?;
    if !object.eq_ignore_ascii_case("matrix") {
        return Err(format!(
            "unsupported object {object:?}, only matrix files are read"
        ));
    }
    let format = MtxFormat::parse(format)?;
    let field = MtxField::parse(field)?;
    let symmetry = MtxSymmetry::parse(symmetry)?;
    if format == MtxFormat::Array && field == MtxField::Pattern {
        return Err("the pattern field is not valid in array format".into());
    }
    if field == MtxField::Pattern && symmetry == MtxSymmetry::SkewSymmetric {
        return Err("a pattern matrix cannot be skew-symmetric".into());
    }
    Ok((format, field, symmetry))
}

/// Rows, columns and the number of entries the file stores.
fn parse_sizes(text: &str, format: MtxFormat, symmetry: MtxSymmetry) -> Result<[usize; 3], String> {
    let words = text.split_ascii_whitespace();
    let [rows, cols, declared] = match format {
        MtxFormat::Coordinate => tokens(
            words,
            ["number of rows", "number of columns", "number of entries"],
        )?,
        MtxFormat::Array => {
            let [rows, cols] = tokens(words, ["number of rows", "number of columns"])?;
            [rows, cols, ""]
        }
    };
    let rows = count(rows, "number of rows")?;
    let cols = count(cols, "number of columns")?;
    if symmetry != MtxSymmetry::General && rows != cols {
        return Err(format!(
            "a {symmetry} matrix must be square, not {rows}x{cols}"
        ));
    }
    let entries = match format {
        MtxFormat::Coordinate => count(declared, "number of entries")?,
        MtxFormat::Array => {
            let total = rows.checked_mul(cols).ok_or_else(|| {
                format!("a {rows}x{cols} array has more elements than usize holds")
            })?;
            // Square unless general, so total - rows = n(n-1) >= 0.
            match symmetry {
                MtxSymmetry::General => total,
                MtxSymmetry::SkewSymmetric => (total - rows) / 2,
                MtxSymmetry::Symmetric | MtxSymmetry::Hermitian => (total - rows) / 2 + rows,
            }
        }
    };
    Ok([rows, cols, entries])
}

/// One coordinate line: 0-based row and column, the value, and the value of its mirror image.
fn parse_entry<T: Scalar>(
    text: &str,
    header: &Header,
    options: ReadOptions,
) -> Result<(usize, usize, T, T), String> {
    let words = text.split_ascii_whitespace();
    let [row, col, value] = if header.field == MtxField::Pattern {
        let [row, col] = tokens(words, ["row index", "column index"])?;
        [row, col, ""]
    } else {
        tokens(words, ["row index", "column index", "value"])?
    };
    let row = index(row, "row index", header.rows)?;
    let col = index(col, "column index", header.cols)?;
    let (value, mirror) = parse_value::<T>(value, header, options)?;
    if header.symmetry == MtxSymmetry::SkewSymmetric && row == col && value != T::default() {
        return Err(format!(
            "diagonal entry ({0}, {0}) of a skew-symmetric matrix is not zero",
            row + 1
        ));
    }
    Ok((row, col, value, mirror))
}

/// A value as `T`, and the value of its mirror image (negated in skew-symmetric files).
fn parse_value<T: Scalar>(
    text: &str,
    header: &Header,
    options: ReadOptions,
) -> Result<(T, T), String> {
    let x = match header.field {
        MtxField::Pattern => 1.0,
        MtxField::Integer => {
            text.parse::<i64>()
                .map_err(|_| format!("value {text:?} is not a 64-bit integer"))? as f64
        }
        MtxField::Real | MtxField::Complex => text
            .parse::<f64>()
            .map_err(|_| format!("value {text:?} is not a number"))?,
    };
    if !x.is_finite() && !options.allow_non_finite {
        return Err(format!(
            "value {text} is not finite (ReadOptions::allow_non_finite accepts it)"
        ));
    }
    let convert =
        |x: f64| convert::<T>(x).ok_or_else(|| format!("value {text} does not fit {}", T::DTYPE));
    let value = convert(x)?;
    let mirror = if header.symmetry == MtxSymmetry::SkewSymmetric {
        convert(-x)?
    } else {
        value
    };
    Ok((value, mirror))
}

/// `x` as `T`, or `None` where `T` cannot hold it: an integer would saturate, a float would
/// overflow to infinity. Rounding is not refused: it is what reading 0.1 into f32 means.
fn convert<T: Scalar>(x: f64) -> Option<T> {
    let v = T::from_f64(x);
    let back = v.to_f64();
    let fits = if is_integer::<T>() {
        back == x.round()
    } else {
        back.is_finite() || !x.is_finite()
    };
    fits.then_some(v)
}

/// Exactly `N` tokens. The error names the first missing one, or shows the first extra one.
fn tokens<'a, const N: usize>(
    mut words: SplitAsciiWhitespace<'a>,
    names: [&str; N],
) -> Result<[&'a str; N], String> {
    let mut found = [""; N];
    for (slot, name) in found.iter_mut().zip(names) {
        *slot = words.next().ok_or_else(|| format!("missing {name}"))?;
    }
    match words.next() {
        Some(extra) => Err(format!(
            "unexpected {extra:?} after the {}",
            names.join(", ")
        )),
        None => Ok(found),
    }
}

/// A non-negative integer; the error says why `text` is not one.
fn count(text: &str, what: &str) -> Result<usize, String> {
    text.parse().map_err(|e: std::num::ParseIntError| {
        let negative = text
            .strip_prefix('-')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        match e.kind() {
            IntErrorKind::PosOverflow => format!("{what} {text} does not fit in usize"),
            _ if negative => format!("{what} {text} is negative"),
            _ => format!("{what} {text:?} is not a non-negative integer"),
        }
    })
}

/// A 1-based index in `1..=n`, returned 0-based.
fn index(text: &str, what: &str, n: usize) -> Result<usize, String> {
    match count(text, what)? {
        i @ 1.. if i <= n => Ok(i - 1),
        i => Err(format!("{what} {i} is outside 1..={n}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENERAL_REAL: Header = Header {
        format: MtxFormat::Coordinate,
        field: MtxField::Real,
        symmetry: MtxSymmetry::General,
        rows: 3,
        cols: 4,
        entries: 1,
    };

    #[test]
    fn tokens_name_what_is_missing_or_extra() {
        let split = |s: &'static str| s.split_ascii_whitespace();
        assert_eq!(tokens(split(" 1\t2  "), ["a", "b"]), Ok(["1", "2"]));
        assert_eq!(tokens(split("1"), ["a", "b"]), Err("missing b".into()));
        assert_eq!(
            tokens(split("1 2 x"), ["a", "b"]),
            Err("unexpected \"x\" after the a, b".into())
        );
    }

    #[test]
    fn counts_and_indices_say_why_they_are_refused() {
        assert_eq!(count("+7", "n"), Ok(7));
        assert_eq!(count("-3", "n"), Err("n -3 is negative".into()));
        assert_eq!(
            count("1.5", "n"),
            Err("n \"1.5\" is not a non-negative integer".into())
        );
        assert!(count("99999999999999999999999", "n")
            .unwrap_err()
            .contains("does not fit"));
        assert_eq!(index("1", "row index", 3), Ok(0));
        assert_eq!(index("3", "row index", 3), Ok(2));
        assert_eq!(
            index("0", "row index", 3),
            Err("row index 0 is outside 1..=3".into())
        );
        assert_eq!(
            index("4", "row index", 3),
            Err("row index 4 is outside 1..=3".into())
        );
    }

    #[test]
    fn banner_keywords_are_case_insensitive() {
        assert_eq!(
            parse_banner(b"%%matrixmarket MATRIX Coordinate Pattern Skew-Symmetric\n").map(|b| b.0),
            Err("a pattern matrix cannot be skew-symmetric".into())
        );
        assert_eq!(
            parse_banner(b"%%MatrixMarket matrix ARRAY integer SYMMETRIC\r\n"),
            Ok((MtxFormat::Array, MtxField::Integer, MtxSymmetry::Symmetric))
        );
        assert!(
            parse_banner(b"%%MatrixMarket vector coordinate real general")
                .unwrap_err()
                .contains("unsupported object")
        );
        assert!(
            parse_banner(b"%MatrixMarket matrix coordinate real general")
                .unwrap_err()
                .contains("expected the banner")
        );
    }

    #[test]
    fn array_sizes_count_the_stored_triangle() {
        let sizes = |text, symmetry| parse_sizes(text, MtxFormat::Array, symmetry);
        assert_eq!(sizes("3 4", MtxSymmetry::General), Ok([3, 4, 12]));
        assert_eq!(sizes("4 4", MtxSymmetry::Symmetric), Ok([4, 4, 10]));
        assert_eq!(sizes("4 4", MtxSymmetry::SkewSymmetric), Ok([4, 4, 6]));
        assert_eq!(sizes("0 0", MtxSymmetry::SkewSymmetric), Ok([0, 0, 0]));
        assert!(sizes("3 4", MtxSymmetry::Symmetric)
            .unwrap_err()
            .contains("square"));
        assert!(sizes("4294967296 4294967296", MtxSymmetry::General)
            .unwrap_err()
            .contains("more elements than usize holds"));
    }

    #[test]
    fn values_are_refused_where_the_type_cannot_hold_them() {
        let options = ReadOptions::default();
        let int = Header {
            field: MtxField::Integer,
            ..GENERAL_REAL
        };
        assert_eq!(parse_value::<i8>("-128", &int, options), Ok((-128, -128)));
        assert!(parse_value::<i8>("128", &int, options).is_err());
        assert!(parse_value::<i32>("2.0", &int, options).is_err());
        assert_eq!(
            parse_value::<f32>("0.1", &GENERAL_REAL, options),
            Ok((0.1, 0.1))
        );
        assert!(parse_value::<f32>("1e39", &GENERAL_REAL, options).is_err());
        assert!(parse_value::<f64>("-inf", &GENERAL_REAL, options).is_err());
        let lenient = ReadOptions {
            allow_non_finite: true,
            ..options
        };
        assert!(parse_value::<f32>("NaN", &GENERAL_REAL, lenient).is_ok_and(|v| v.0.is_nan()));
        assert!(parse_value::<f32>("1e39", &GENERAL_REAL, lenient).is_err());
        let skew = Header {
            symmetry: MtxSymmetry::SkewSymmetric,
            ..int
        };
        assert_eq!(parse_value::<i8>("5", &skew, options), Ok((5, -5)));
        assert!(parse_value::<i8>("-128", &skew, options).is_err());
    }

    #[test]
    fn pattern_entries_have_two_tokens_and_read_as_one() {
        let pattern = Header {
            field: MtxField::Pattern,
            ..GENERAL_REAL
        };
        let options = ReadOptions::default();
        assert_eq!(
            parse_entry::<f64>("3 4", &pattern, options),
            Ok((2, 3, 1.0, 1.0))
        );
        assert!(parse_entry::<f64>("3 4 1.0", &pattern, options).is_err());
        assert_eq!(
            parse_entry::<f64>("3 4", &GENERAL_REAL, options),
            Err("missing value".into())
        );
    }
}
