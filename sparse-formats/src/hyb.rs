//! HYB: an ELL part of a chosen width holding each row's first entries, plus a COO part holding
//! what overflows it. Rows longer than the width spill into COO, so one long row no longer
//! pads every other row to its length.
//!
//! ```text
//!   row 0   a b c d        width 2
//!   row 1   . e . .        ELL part: col_idx = [0 1 | 1 * ],  values = [a e | b 0]
//!                          COO part: rows = [0 0], cols = [2 3], values = [c d]
//! ```
//!
//! The COO part is sorted by row, then column, and a row has COO entries only when its ELL
//! slots are all real: its COO entries continue its ELL entries in column order. So each row's
//! entries are its ELL prefix followed by its COO run, already in CSR order.

use std::fmt;
use std::ops::Range;

use rayon::prelude::*;
use sparse_core::{CsrRef, Error, Format, Result, Scalar, SpIndex, StructureError, ValueOrder};

use crate::assembly::csr_from_rows;
use crate::checks::{check_length, check_source, checked_slots, validate_format};
use crate::csr::Csr;
use crate::ell::{Ell, EllParts};
use crate::format::{FillLimit, SparseFormat};
use crate::rejected::{validated, Rejected};
use crate::slots::{check_new_values, gather, order_from_rows};

/// How [`Hyb::from_csr`] chooses the ELL width.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum HybWidth {
    /// The width that minimises the stored bytes of both parts (ELL slots cost a column index
    /// and a value, COO entries a row index more).
    #[default]
    MinBytes,
    /// This width, or the longest row's length when that is shorter (wider only adds padding).
    Fixed(usize),
    /// The smallest width that holds every entry of at least this percentage of the rows;
    /// in (0, 100].
    Percentile(f64),
}

impl HybWidth {
    /// The ELL width this policy picks for `a`; an error for a percentage outside (0, 100].
    pub fn choose<T: Scalar, I: SpIndex>(self, a: CsrRef<'_, T, I>) -> Result<usize> {
        self.choose_from(&RowLengths::of(a), std::mem::size_of::<T>())
    }

    fn choose_from(self, lengths: &RowLengths, value_bytes: usize) -> Result<usize> {
        match self {
            HybWidth::MinBytes => Ok(lengths.min_bytes_width(value_bytes)),
            HybWidth::Fixed(width) => Ok(width.min(lengths.longest())),
            HybWidth::Percentile(p) if p > 0.0 && p <= 100.0 => Ok(lengths.percentile_width(p)),
            HybWidth::Percentile(p) => Err(Error::invalid(format!(
                "the HYB width percentile must lie in (0, 100], not {p}"
            ))),
        }
    }
}

/// The histogram of row lengths: what every width policy needs, in O(rows + longest row).
struct RowLengths {
    /// `rows_of_length[l]`: how many rows hold exactly `l` entries.
    rows_of_length: Vec<usize>,
    rows: usize,
    nnz: usize,
}

impl RowLengths {
    fn of<T, I: SpIndex>(a: CsrRef<'_, T, I>) -> Self {
        let longest = (0..a.rows()).map(|i| a.row_len(i)).max().unwrap_or(0);
        let mut rows_of_length = vec![0; longest + 1];
        for i in 0..a.rows() {
            rows_of_length[a.row_len(i)] += 1;
        }
        RowLengths {
            rows_of_length,
            rows: a.rows(),
            nnz: a.nnz(),
        }
    }

    fn longest(&self) -> usize {
        self.rows_of_length.len() - 1
    }

    /// Entries beyond the first `width` of their row, for every width from 0 to the longest
    /// row: going from width w to w + 1 moves one entry of each row longer than w into ELL.
    fn overflow_by_width(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut overflow = self.nnz;
        let mut longer = self.rows - self.rows_of_length[0];
        (0..=self.longest()).map(move |width| {
            let at = (width, overflow);
            overflow -= longer;
            if let Some(&n) = self.rows_of_length.get(width + 1) {
                longer -= n;
            }
            at
        })
    }

    fn overflow(&self, width: usize) -> usize {
        self.overflow_by_width()
            .nth(width)
            .map_or(0, |(_, overflow)| overflow)
    }

    fn min_bytes_width(&self, value_bytes: usize) -> usize {
        let ell_slot = (std::mem::size_of::<u32>() + value_bytes) as u128;
        let coo_entry = (2 * std::mem::size_of::<u32>() + value_bytes) as u128;
        let bytes = |width: usize, overflow: usize| {
            self.rows as u128 * width as u128 * ell_slot + overflow as u128 * coo_entry
        };
        // min_by_key keeps the first minimum: the narrowest of equally small widths.
        self.overflow_by_width()
            .min_by_key(|&(width, overflow)| bytes(width, overflow))
            .map_or(0, |(width, _)| width)
    }

    fn percentile_width(&self, percent: f64) -> usize {
        let needed = ((percent / 100.0) * self.rows as f64).ceil() as usize;
        let mut covered = 0;
        for (width, &n) in self.rows_of_length.iter().enumerate() {
            covered += n;
            if covered >= needed {
                return width;
            }
        }
        self.longest()
    }
}

/// The arrays of a HYB matrix, as [`Hyb::try_new`] takes them and gives them back.
#[derive(Clone, Default, PartialEq)]
pub struct HybParts<T> {
    pub ell: EllParts<T>,
    pub coo_rows: Vec<u32>,
    pub coo_cols: Vec<u32>,
    pub coo_values: Vec<T>,
}

/// A matrix in HYB; see the module documentation for the layout.
#[derive(Clone, PartialEq)]
pub struct Hyb<T> {
    ell: Ell<T>,
    coo_rows: Vec<u32>,
    coo_cols: Vec<u32>,
    coo_values: Vec<T>,
}

impl<T: Scalar> Hyb<T> {
    /// Converts a canonical CSR matrix, splitting at the width `policy` picks. The slots of both
    /// parts are counted before anything is allocated and checked against `limit`.
    pub fn from_csr<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        policy: HybWidth,
        limit: FillLimit,
    ) -> Result<Self> {
        check_source(a)?;
        let lengths = RowLengths::of(a);
        let width = policy.choose_from(&lengths, std::mem::size_of::<T>())?;
        let coo_nnz = lengths.overflow(width);
        let slots = checked_slots(a.rows(), width)?
            .checked_add(coo_nnz)
            .ok_or_else(|| Error::invalid("the HYB slot count overflows usize"))?;
        limit.check(Format::Hyb, slots, a.nnz())?;
        let ell = Ell::from_row_prefixes(a, width);
        let (coo_rows, (coo_cols, coo_values)) = (0..a.rows())
            .into_par_iter()
            .flat_map_iter(|i| {
                a.row_range(i).skip(width).map(move |e| {
                    // Fits: rows and columns fit u32 (check_source).
                    (i as u32, (a.col_idx()[e].to_usize() as u32, a.values()[e]))
                })
            })
            .collect();
        Ok(Hyb {
            ell,
            coo_rows,
            coo_cols,
            coo_values,
        })
    }

    /// Checks every invariant (see [`Hyb::validate`]); on failure the arrays come back with the
    /// error.
    // The inputs come back by value with the error (as sprs does); the error path is cold.
    #[allow(clippy::result_large_err)]
    pub fn try_new(
        rows: usize,
        cols: usize,
        width: usize,
        parts: HybParts<T>,
    ) -> Result<Self, Rejected<HybParts<T>>> {
        // SAFETY: validated before it is handed out; on failure the arrays go back to the caller.
        let m = unsafe { Self::new_unchecked(rows, cols, width, parts) };
        validated(m, Self::validate, Self::into_parts)
    }

    /// # Safety
    /// The arrays must satisfy the invariants [`Hyb::validate`] checks: kernels index dense
    /// operands with the stored indices without bounds checks.
    pub unsafe fn new_unchecked(
        rows: usize,
        cols: usize,
        width: usize,
        parts: HybParts<T>,
    ) -> Self {
        Hyb {
            ell: Ell::new_unchecked(rows, cols, width, parts.ell),
            coo_rows: parts.coo_rows,
            coo_cols: parts.coo_cols,
            coo_values: parts.coo_values,
        }
    }

    /// Checks that the dimensions and the entry count fit u32; the ELL part as
    /// [`Ell::validate`] does; the three COO arrays of one length, indices in range, sorted by
    /// row then strictly by column; and that a row has COO entries only after a full ELL row,
    /// with columns past its last ELL column.
    pub fn validate(&self) -> Result<()> {
        validate_format(Format::Hyb, (self.rows(), self.cols()), self.nnz(), || {
            self.ell.check_structure().and_then(|()| self.check_coo())
        })
    }

    fn check_coo(&self) -> Result<(), StructureError> {
        let n = self.coo_rows.len();
        check_length("coo_cols", n, self.coo_cols.len())?;
        check_length("coo_values", n, self.coo_values.len())?;
        let (rows, cols, width) = (self.rows(), self.cols(), self.width());
        let bad = |e: usize, what: String| StructureError::Other(format!("COO entry {e}: {what}"));
        let mut previous: Option<(usize, usize)> = None;
        for (e, (&row, &col)) in self.coo_rows.iter().zip(&self.coo_cols).enumerate() {
            let (row, col) = (row as usize, col as usize);
            if row >= rows {
                return Err(bad(e, format!("row {row} is outside 0..{rows}")));
            }
            if col >= cols {
                return Err(bad(e, format!("column {col} is outside 0..{cols}")));
            }
            match previous {
                Some(p) if p >= (row, col) => {
                    return Err(bad(
                        e,
                        format!(
                            "(row {row}, column {col}) does not follow (row {}, column {}): the \
                             COO part is sorted by row, then strictly by column",
                            p.0, p.1
                        ),
                    ))
                }
                Some((p, _)) if p == row => {}
                _ => {
                    let ell_len = self.ell.row_len(row);
                    if ell_len < width {
                        return Err(bad(
                            e,
                            format!(
                                "row {row} overflows into COO with only {ell_len} of its {width} \
                                 ELL slots used"
                            ),
                        ));
                    }
                    if let Some(last) = width.checked_sub(1) {
                        let last_col = self.ell.col_idx()[self.ell.slot(row, last)] as usize;
                        if col <= last_col {
                            return Err(bad(
                                e,
                                format!(
                                    "row {row}: column {col} does not follow the row's last ELL \
                                     column {last_col}"
                                ),
                            ));
                        }
                    }
                }
            }
            previous = Some((row, col));
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.ell.rows()
    }
    pub fn cols(&self) -> usize {
        self.ell.cols()
    }
    /// The ELL width: entries per row held in the ELL part.
    pub fn width(&self) -> usize {
        self.ell.width()
    }
    pub fn ell(&self) -> &Ell<T> {
        &self.ell
    }
    pub fn coo_rows(&self) -> &[u32] {
        &self.coo_rows
    }
    pub fn coo_cols(&self) -> &[u32] {
        &self.coo_cols
    }
    pub fn coo_values(&self) -> &[T] {
        &self.coo_values
    }
    /// Entries of the COO part.
    pub fn coo_nnz(&self) -> usize {
        self.coo_rows.len()
    }
    /// The COO entries of `rows`: one run, since the part is sorted by row.
    pub fn coo_range(&self, rows: Range<usize>) -> Range<usize> {
        let first = |row: usize| self.coo_rows.partition_point(|&r| (r as usize) < row);
        first(rows.start)..first(rows.end)
    }

    /// For each slot, the CSR entry it holds (in the order of [`SparseFormat::to_csr`]): the
    /// ELL part's slots come first, then the COO part's entries.
    pub fn value_order(&self) -> ValueOrder {
        let ell_slots = self.ell.stored_slots();
        order_from_rows(self.rows(), self.stored_slots(), |row| {
            let coo = self.coo_range(row..row + 1).map(move |e| ell_slots + e);
            self.ell.row_slots(row).chain(coo)
        })
    }

    /// New values for the same pattern: `csr_values` in CSR entry order, placed through `order`,
    /// which must be this matrix's [`Hyb::value_order`]. Padding stays zero.
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        let ell_slots = self.ell.stored_slots();
        check_new_values(
            Format::Hyb,
            (self.stored_slots(), self.nnz()),
            order,
            csr_values,
        )?;
        gather(order, 0, csr_values, self.ell.values_mut());
        gather(order, ell_slots, csr_values, &mut self.coo_values);
        Ok(())
    }

    pub fn into_parts(self) -> HybParts<T> {
        HybParts {
            ell: self.ell.into_parts(),
            coo_rows: self.coo_rows,
            coo_cols: self.coo_cols,
            coo_values: self.coo_values,
        }
    }
}

impl<T: Scalar> SparseFormat<T> for Hyb<T> {
    const FORMAT: Format = Format::Hyb;

    fn rows(&self) -> usize {
        self.ell.rows()
    }
    fn cols(&self) -> usize {
        self.ell.cols()
    }
    fn nnz(&self) -> usize {
        self.ell.nnz() + self.coo_nnz()
    }
    fn stored_slots(&self) -> usize {
        self.ell.stored_slots() + self.coo_nnz()
    }
    fn memory_bytes(&self) -> usize {
        self.ell.memory_bytes()
            + (self.coo_rows.len() + self.coo_cols.len()) * std::mem::size_of::<u32>()
            + self.coo_values.len() * std::mem::size_of::<T>()
    }
    fn validate(&self) -> Result<()> {
        Hyb::validate(self)
    }
    fn to_csr(&self) -> Csr<T, u32> {
        let overflow = |i: usize| self.coo_range(i..i + 1);
        csr_from_rows(
            self.rows(),
            self.cols(),
            |i| self.ell.row_len(i) + overflow(i).len(),
            |i| {
                let coo = overflow(i).map(|e| (self.coo_cols[e], self.coo_values[e]));
                self.ell.row_entries(i).chain(coo)
            },
        )
    }
}

impl<T: Scalar> fmt::Debug for Hyb<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Hyb {}x{}, nnz {} ({} in ELL of width {}, {} in COO), {} bytes",
            self.rows(),
            self.cols(),
            self.nnz(),
            self.ell.nnz(),
            self.width(),
            self.coo_nnz(),
            self.memory_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row lengths 4, 1, 0, 1, 1, 1, 2 (10 entries, 7 rows).
    fn skewed() -> Csr<f64> {
        let mut t = vec![(0, 0, 1.0), (0, 2, 2.0), (0, 5, 3.0), (0, 6, 4.0)];
        t.extend([(1, 1, 5.0), (3, 0, 6.0), (4, 4, 7.0), (5, 3, 8.0)]);
        t.extend([(6, 2, 9.0), (6, 6, 0.0)]);
        Csr::from_triplets(7, 7, &t).unwrap()
    }

    #[test]
    fn the_histogram_gives_every_overflow() {
        let a = skewed();
        let lengths = RowLengths::of(a.as_ref());
        let overflow: Vec<_> = lengths.overflow_by_width().collect();
        assert_eq!(overflow, [(0, 10), (1, 4), (2, 2), (3, 1), (4, 0)]);
        assert_eq!(lengths.overflow(9), 0);
    }

    #[test]
    fn policies_pick_their_widths() {
        let a = skewed();
        let choose = |p: HybWidth| p.choose(a.as_ref()).unwrap();
        // f64: ELL slot 12 bytes, COO entry 16: width 1 costs 7*12 + 4*16 = 148, the least.
        assert_eq!(choose(HybWidth::MinBytes), 1);
        assert_eq!(choose(HybWidth::Fixed(3)), 3);
        assert_eq!(choose(HybWidth::Fixed(50)), 4);
        assert_eq!(choose(HybWidth::Percentile(100.0)), 4);
        // 6 of 7 rows (85.7%) hold at most 2 entries, 5 of 7 (71.4%) at most 1.
        assert_eq!(choose(HybWidth::Percentile(80.0)), 2);
        assert_eq!(choose(HybWidth::Percentile(71.0)), 1);
        assert_eq!(choose(HybWidth::Percentile(1.0)), 0);
        for p in [0.0, -5.0, 100.5, f64::NAN] {
            assert!(matches!(
                HybWidth::Percentile(p).choose(a.as_ref()),
                Err(Error::InvalidArgument { .. })
            ));
        }
        let empty = Csr::<f64>::zeros(0, 0);
        assert_eq!(HybWidth::MinBytes.choose(empty.as_ref()).unwrap(), 0);
        assert_eq!(
            HybWidth::Percentile(50.0).choose(empty.as_ref()).unwrap(),
            0
        );
    }

    #[test]
    fn overflow_continues_the_ell_rows() {
        let a = skewed();
        let m = Hyb::from_csr(a.as_ref(), HybWidth::Fixed(2), FillLimit::UNLIMITED).unwrap();
        assert_eq!(m.width(), 2);
        assert_eq!(m.coo_rows(), &[0, 0]);
        assert_eq!(m.coo_cols(), &[5, 6]);
        assert_eq!(m.coo_values(), &[3.0, 4.0]);
        assert_eq!(m.coo_range(0..1), 0..2);
        assert_eq!(m.coo_range(1..7), 2..2);
        assert_eq!((m.nnz(), m.stored_slots()), (10, 16));
        assert_eq!(m.to_csr(), a);
        assert_eq!(
            format!("{m:?}"),
            format!(
                "Hyb 7x7, nnz 10 (8 in ELL of width 2, 2 in COO), {} bytes",
                m.memory_bytes()
            )
        );
    }

    #[test]
    fn coo_entries_of_a_short_ell_row_are_refused() {
        let p = Ell::<f64>::PADDING;
        let parts = HybParts {
            ell: EllParts {
                col_idx: vec![0, p],
                values: vec![1.0, 0.0],
            },
            coo_rows: vec![1],
            coo_cols: vec![2],
            coo_values: vec![2.0],
        };
        let rejected = Hyb::try_new(2, 3, 1, parts.clone()).unwrap_err();
        assert!(
            rejected.to_string().contains("only 0 of its 1 ELL slots"),
            "{rejected}"
        );
        assert!(rejected.parts == parts);
        let behind = HybParts {
            coo_rows: vec![0],
            coo_cols: vec![0],
            ..parts
        };
        let rejected = Hyb::try_new(2, 3, 1, behind).unwrap_err();
        assert!(
            rejected.to_string().contains("last ELL column 0"),
            "{rejected}"
        );
    }
}
