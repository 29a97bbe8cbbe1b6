//! The writers: a banner, a size line, then one line per value.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use sparse_core::{DenseRef, Error, Result, Scalar, SpIndex};

use super::{is_integer, MtxField};
use crate::csr::Csr;

/// Writes `a` as `coordinate real general` (`integer` for integer types). A path ending in `.gz`
/// is compressed.
pub fn write_csr<T: Scalar, I: SpIndex>(path: impl AsRef<Path>, a: &Csr<T, I>) -> Result<()> {
    to_file(path.as_ref(), |w| csr(w, a))
}

/// Writes `a` as `coordinate` to any writer (buffered here, so a plain `File` is fine).
pub fn write_csr_to<T: Scalar, I: SpIndex>(writer: impl Write, a: &Csr<T, I>) -> Result<()> {
    to_writer(writer, |w| csr(w, a))
}

/// Writes a host matrix as `array real general` (`integer` for integer types), column by column
/// as the format requires, whatever the layout of `a`. A path ending in `.gz` is compressed.
pub fn write_dense<T: Scalar>(path: impl AsRef<Path>, a: DenseRef<'_, T>) -> Result<()> {
    a.host("write_dense")?;
    to_file(path.as_ref(), |w| dense(w, a))
}

/// Writes a host matrix as `array` to any writer (buffered here).
pub fn write_dense_to<T: Scalar>(writer: impl Write, a: DenseRef<'_, T>) -> Result<()> {
    a.host("write_dense_to")?;
    to_writer(writer, |w| dense(w, a))
}

fn field<T: Scalar>() -> MtxField {
    if is_integer::<T>() {
        MtxField::Integer
    } else {
        MtxField::Real
    }
}

fn csr<T: Scalar, I: SpIndex>(w: &mut dyn Write, a: &Csr<T, I>) -> io::Result<()> {
    writeln!(
        w,
        "%%MatrixMarket matrix coordinate {} general",
        field::<T>()
    )?;
    writeln!(w, "{} {} {}", a.rows(), a.cols(), a.nnz())?;
    let a = a.as_ref();
    for i in 0..a.rows() {
        let (cols, values) = a.row(i);
        for (&j, &v) in cols.iter().zip(values) {
            write!(w, "{} {} ", i + 1, j.to_usize() + 1)?;
            value(w, v)?;
        }
    }
    Ok(())
}

/// `a` must be in host memory (checked by the callers).
fn dense<T: Scalar>(w: &mut dyn Write, a: DenseRef<'_, T>) -> io::Result<()> {
    writeln!(w, "%%MatrixMarket matrix array {} general", field::<T>())?;
    writeln!(w, "{} {}", a.rows(), a.cols())?;
    for j in 0..a.cols() {
        for i in 0..a.rows() {
            value(w, a.at(i, j))?;
        }
    }
    Ok(())
}

/// Writes `v` and a newline in the shortest text that parses back to the same f64. Everyday
/// magnitudes get plain notation, which is what people expect to read. Other magnitudes get
/// exponent notation, where plain notation would spell out hundreds of zeros.
fn value<T: Scalar>(w: &mut dyn Write, v: T) -> io::Result<()> {
    let x = v.to_f64();
    if x == 0.0 || (1e-4..1e16).contains(&x.abs()) {
        writeln!(w, "{x}")
    } else {
        writeln!(w, "{x:e}")
    }
}

/// Creates `path` and writes `body` to it, gzip-compressed when the name ends in `.gz`.
fn to_file(path: &Path, body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    let gzip = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"));
    let write = || -> io::Result<()> {
        let file = File::create(path)?;
        if gzip {
            let mut w = BufWriter::new(GzEncoder::new(file, Compression::default()));
            body(&mut w)?;
            w.into_inner()
                .map_err(io::IntoInnerError::into_error)?
                .finish()?;
        } else {
            let mut w = BufWriter::new(file);
            body(&mut w)?;
            w.flush()?;
        }
        Ok(())
    };
    write().map_err(|e| Error::io(Some(path.to_path_buf()), e))
}

fn to_writer(
    writer: impl Write,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    let mut w = BufWriter::new(writer);
    body(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| Error::io(None, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<T: Scalar>(v: T) -> String {
        let mut out = Vec::new();
        value(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn values_are_short_and_parse_back_exactly() {
        assert_eq!(text(3.0f64), "3\n");
        assert_eq!(text(-0.0f64), "-0\n");
        assert_eq!(text(0.1f32), "0.10000000149011612\n");
        assert_eq!(text(-7i8), "-7\n");
        assert_eq!(text(i32::MIN), "-2147483648\n");
        assert_eq!(text(1e300f64), "1e300\n");
        for x in [
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            -1.0 / 3.0,
            1e-4,
            9.999999999999998e15,
            1e16,
            123456789.125,
        ] {
            let back: f64 = text(x).trim().parse().unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{x:e}");
        }
    }

    #[test]
    fn integer_types_are_written_as_integer_files() {
        let a = Csr::<i8>::from_triplets(2, 3, &[(0, 2, -5), (1, 0, 7)]).unwrap();
        let mut out = Vec::new();
        write_csr_to(&mut out, &a).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "%%MatrixMarket matrix coordinate integer general\n2 3 2\n1 3 -5\n2 1 7\n"
        );
    }
}
