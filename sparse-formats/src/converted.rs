//! A CSR matrix converted to any other format, chosen at run time by [`Format`] and
//! [`BlockShape`]: what executors plan from and what `spblas info` and the round-trip tests walk.

use std::fmt;

use sparse_core::{BlockShape, CsrRef, DType, Error, Format, Result, Scalar, SpIndex, ValueOrder};

use crate::{
    Bsr, Coo, Csr, Ell, FillLimit, Hyb, HybWidth, MeBcrs, MeBcrsShape, SparseFormat, SrBcrs,
    SrBcrsShape, TileSelection, Tiled16,
};

/// The formats a CSR matrix converts to, with their parameters fixed.
#[derive(Clone)]
pub enum Converted<T> {
    Coo(Coo<T, u32>),
    Ell(Ell<T>),
    Hyb(Hyb<T>),
    Bsr(Bsr<T>),
    MeBcrs(MeBcrs<T>),
    SrBcrs(SrBcrs<T>),
    Tiled16(Tiled16<T>),
}

/// Runs `$body` with `$m` bound to the structure inside a [`Converted`] that implements
/// [`SparseFormat`]; `$coo` handles COO, which does not (its triplets may repeat).
macro_rules! each_format {
    ($c:expr, $m:ident => $body:expr, coo $cm:ident => $coo:expr) => {
        match $c {
            Converted::Coo($cm) => $coo,
            Converted::Ell($m) => $body,
            Converted::Hyb($m) => $body,
            Converted::Bsr($m) => $body,
            Converted::MeBcrs($m) => $body,
            Converted::SrBcrs($m) => $body,
            Converted::Tiled16($m) => $body,
        }
    };
}

impl<T: Scalar> Converted<T> {
    /// The block shape used when a request names none: BSR 4x4; ME-BCRS the tensor-core block
    /// of the precision a GPU would run (8 vectors for 16-bit and 8-bit types, m16n8k8; 4 for
    /// 32- and 64-bit, m16n8k4 TF32); SR-BCRS 8-row vectors with the int8 stride 16.
    pub fn default_block(format: Format, storage: DType) -> Option<BlockShape> {
        match format {
            Format::Bsr => Some(BlockShape::new(4, 4)),
            Format::MeBcrs => Some(match storage {
                DType::F16 | DType::BF16 | DType::I8 | DType::I16 => BlockShape::new(8, 8),
                _ => BlockShape::new(8, 4),
            }),
            Format::SrBcrs => Some(BlockShape::new(8, 16)),
            _ => None,
        }
    }

    /// `a` in `format`, with `block` (or [`Converted::default_block`]) for the blocked formats;
    /// a block shape for a format without one is refused. HYB splits at the width that
    /// minimises bytes and Tiled16 picks tile formats by the paper's rule.
    pub fn from_csr<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        format: Format,
        block: Option<BlockShape>,
        limit: FillLimit,
    ) -> Result<Self> {
        let block = match (block, Self::default_block(format, T::DTYPE)) {
            (Some(b), None) => {
                return Err(Error::invalid(format!(
                    "{format} has no block shape, but {b} was asked for"
                )))
            }
            (b, default) => b.or(default),
        };
        let shape = block.unwrap_or(BlockShape::new(0, 0));
        Ok(match format {
            Format::Coo => Converted::Coo(coo_from_csr(a)?),
            Format::Ell => Converted::Ell(Ell::from_csr(a, limit)?),
            Format::Hyb => Converted::Hyb(Hyb::from_csr(a, HybWidth::MinBytes, limit)?),
            Format::Bsr => Converted::Bsr(Bsr::from_csr(a, shape.rows, shape.cols, limit)?),
            Format::MeBcrs => Converted::MeBcrs(MeBcrs::from_csr(
                a,
                MeBcrsShape::new(shape.rows, shape.cols)?,
                limit,
            )?),
            Format::SrBcrs => Converted::SrBcrs(SrBcrs::from_csr(
                a,
                SrBcrsShape::new(shape.rows, shape.cols)?,
                limit,
            )?),
            Format::Tiled16 => {
                Converted::Tiled16(Tiled16::from_csr(a, &TileSelection::default(), limit)?)
            }
            other => {
                return Err(Error::invalid(format!(
                    "{other} is not a conversion target (csr is the interchange format)"
                )))
            }
        })
    }

    pub fn format(&self) -> Format {
        each_format!(self, m => format_of(m), coo _m => Format::Coo)
    }

    pub fn memory_bytes(&self) -> usize {
        each_format!(self, m => m.memory_bytes(), coo m => m.memory_bytes())
    }

    /// Slots stored, padding included.
    pub fn stored_slots(&self) -> usize {
        each_format!(self, m => m.stored_slots(), coo m => m.nnz())
    }

    pub fn validate(&self) -> Result<()> {
        each_format!(self, m => m.validate(), coo m => m.validate())
    }

    /// Back to canonical CSR: the identity on what [`Converted::from_csr`] was given.
    pub fn to_csr(&self) -> Result<Csr<T, u32>> {
        each_format!(self, m => Ok(m.to_csr()), coo m => m.to_csr())
    }

    /// For each stored slot ([`Converted::stored_slots`] of them), the CSR entry it holds:
    /// how new values reach the slots ([`Converted::set_values`]), and the order SDDMM writes
    /// C in for the formats whose kernels write their own slots (ME-BCRS, SR-BCRS). An error
    /// only for a COO with repeated positions (a conversion from CSR has none).
    pub fn value_order(&self) -> Result<ValueOrder> {
        each_format!(self, m => Ok(m.value_order()), coo m => m.value_order())
    }

    /// New values for the same pattern, `csr_values` in the CSR entry order of
    /// [`Converted::to_csr`], placed through `order`, which must be this matrix's
    /// [`Converted::value_order`]: a gather, no conversion. Padding stays zero.
    pub fn set_values(&mut self, order: &ValueOrder, csr_values: &[T]) -> Result<()> {
        each_format!(
            self,
            m => m.set_values(order, csr_values),
            coo m => m.set_values(order, csr_values)
        )
    }
}

impl<T: Scalar> fmt::Debug for Converted<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        each_format!(self, m => m.fmt(f), coo m => m.fmt(f))
    }
}

fn format_of<T: Scalar, F: SparseFormat<T>>(_: &F) -> Format {
    F::FORMAT
}

/// The row-sorted COO of `a`, with u32 indices.
fn coo_from_csr<T: Scalar, I: SpIndex>(a: CsrRef<'_, T, I>) -> Result<Coo<T, u32>> {
    sparse_core::check_dimensions::<u32>(a.rows(), a.cols())?;
    let mut row_idx = Vec::with_capacity(a.nnz());
    for i in 0..a.rows() {
        row_idx.extend(std::iter::repeat_n(i as u32, a.row_range(i).len()));
    }
    let col_idx = a.col_idx().iter().map(|c| c.to_usize() as u32).collect();
    // SAFETY: the indices come from a validated CSR whose dimensions fit u32 (checked above).
    Ok(unsafe { Coo::new_unchecked(a.rows(), a.cols(), row_idx, col_idx, a.values().to_vec()) })
}
