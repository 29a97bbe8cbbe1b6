//! The checks the stored formats share: the sizes that must fit the u32 indices they store,
//! slot counts that must not overflow, array lengths, and the frame of every `validate`.

use sparse_core::{check_dimensions, CsrRef, Error, Format, Result, SpIndex, StructureError};

/// The checks every conversion from CSR starts with: the dimensions fit the u32 indices the
/// formats store, and the entry count fits the u32 row pointers of
/// [`crate::SparseFormat::to_csr`].
pub(crate) fn check_source<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> Result<()> {
    check_dimensions::<u32>(a.rows(), a.cols())?;
    fits_u32("number of entries", a.nnz())
}

/// `n` as a u32, or an overflow error naming `what` it counts.
pub(crate) fn to_u32(what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::overflow::<u32>(what, n))
}

/// An overflow error naming `what` unless `n` fits a u32.
pub(crate) fn fits_u32(what: &str, n: usize) -> Result<()> {
    to_u32(what, n).map(drop)
}

/// `count * per_item` slots, or an error when that overflows.
pub(crate) fn checked_slots(count: usize, per_item: usize) -> Result<usize> {
    count.checked_mul(per_item).ok_or_else(|| {
        Error::invalid(format!(
            "{count} x {per_item} slots are more than usize counts"
        ))
    })
}

/// A [`StructureError::Length`] unless `array` holds `expected` elements.
pub(crate) fn check_length(
    array: &'static str,
    expected: usize,
    found: usize,
) -> Result<(), StructureError> {
    if expected == found {
        Ok(())
    } else {
        Err(StructureError::Length {
            array,
            expected,
            found,
        })
    }
}

/// What a format's `validate` checks: that the dimensions and the entry count fit u32, then
/// `check_structure`, whose error is reported against `format`.
pub(crate) fn validate_format(
    format: Format,
    (rows, cols): (usize, usize),
    nnz: usize,
    check_structure: impl FnOnce() -> Result<(), StructureError>,
) -> Result<()> {
    check_dimensions::<u32>(rows, cols)?;
    fits_u32("number of entries", nnz)?;
    check_structure().map_err(|error| Error::InvalidStructure { format, error })
}
