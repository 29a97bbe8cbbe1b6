//! The matrix a CPU plan runs on: the caller's CSR, borrowed, or its conversion to the format
//! the descriptor names, owned by the plan. Which (op, format) pairs have kernels is decided here.

use sparse_core::{
    BlockShape, CsrRef, DenseMut, DenseRef, Error, Format, OpKind, Result, Scalar, SpIndex,
    ValueOrder,
};
use sparse_formats::{Converted, FillLimit};

use crate::formats;
use crate::formats::coo::CooPart;
use crate::partition::part_count;

/// The formats that have a kernel for `op` on the CPU.
pub(crate) fn formats_for(op: OpKind) -> &'static [Format] {
    match op {
        OpKind::Spmv => &[
            Format::Csr,
            Format::Coo,
            Format::Ell,
            Format::Hyb,
            Format::Bsr,
            Format::MeBcrs,
            Format::SrBcrs,
            Format::Tiled16,
        ],
        OpKind::Spmm => &[Format::Csr, Format::Bsr, Format::MeBcrs, Format::SrBcrs],
        OpKind::Sddmm => &[Format::Csr, Format::MeBcrs, Format::SrBcrs],
        _ => &[Format::Csr],
    }
}

pub(crate) enum Stored<'a, T, I> {
    Csr(CsrRef<'a, T, I>),
    /// A conversion, and for COO the row partition its SpMV walks.
    Converted(Box<Converted<T>>, Vec<CooPart>),
}

impl<'a, T: Scalar, I: SpIndex> Stored<'a, T, I> {
    /// `a` in `format`; `block` as in [`BlockShape`].
    pub(crate) fn convert(
        a: CsrRef<'a, T, I>,
        format: Format,
        block: Option<BlockShape>,
    ) -> Result<Self> {
        if format == Format::Csr {
            return match block {
                Some(b) => Err(Error::invalid(format!(
                    "csr has no block shape, but {b} was asked for"
                ))),
                None => Ok(Stored::Csr(a)),
            };
        }
        let converted = Converted::from_csr(a, format, block, FillLimit::default())?;
        let coo_parts = if format == Format::Coo {
            formats::coo::partition(a, part_count(a.nnz() + a.rows()))
        } else {
            Vec::new()
        };
        Ok(Stored::Converted(Box::new(converted), coo_parts))
    }

    fn converted(&self) -> Option<&Converted<T>> {
        match self {
            Stored::Csr(_) => None,
            Stored::Converted(m, _) => Some(m),
        }
    }

    pub(crate) fn format(&self) -> Format {
        match self {
            Stored::Csr(_) => Format::Csr,
            Stored::Converted(m, _) => m.format(),
        }
    }

    /// Bytes of the conversion the plan owns (none for the borrowed CSR).
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Stored::Csr(_) => 0,
            Stored::Converted(m, parts) => {
                m.memory_bytes() + std::mem::size_of_val(parts.as_slice())
            }
        }
    }

    /// The order SDDMM writes its output in, for formats that are not CSR.
    pub(crate) fn value_order(&self) -> Option<ValueOrder> {
        match self {
            Stored::Csr(_) => None,
            Stored::Converted(m, _) => m.value_order(),
        }
    }

    /// SpMV on a format other than CSR (the CSR kernels take their partition from the plan).
    pub(crate) fn spmv(
        &self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        y: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let Stored::Converted(m, parts) = self else {
            return Err(no_kernel(OpKind::Spmv, Format::Csr));
        };
        match m.as_ref() {
            Converted::Coo(m) => formats::coo::spmv(m, parts, alpha, x, beta, y),
            Converted::Ell(m) => formats::ell::spmv(m, alpha, x, beta, y),
            Converted::Hyb(m) => formats::hyb::spmv(m, alpha, x, beta, y),
            Converted::Bsr(m) => formats::bsr::spmv(m, alpha, x, beta, y),
            Converted::MeBcrs(m) => formats::me_bcrs::spmv(m, alpha, x, beta, y),
            Converted::SrBcrs(m) => formats::sr_bcrs::spmv(m, alpha, x, beta, y),
            Converted::Tiled16(m) => formats::tiled16::spmv(m, alpha, x, beta, y),
        }
    }

    pub(crate) fn spmm(
        &self,
        alpha: T::Acc,
        b: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        match self.converted() {
            Some(Converted::Bsr(m)) => formats::bsr::spmm(m, alpha, b, beta, c),
            Some(Converted::MeBcrs(m)) => formats::me_bcrs::spmm(m, alpha, b, beta, c),
            Some(Converted::SrBcrs(m)) => formats::sr_bcrs::spmm(m, alpha, b, beta, c),
            _ => Err(no_kernel(OpKind::Spmm, self.format())),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sddmm(
        &self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        y: DenseRef<'_, T>,
        beta: T::Acc,
        c: DenseMut<'_, T::Out>,
        scale_by_values: bool,
    ) -> Result<()> {
        match self.converted() {
            Some(Converted::MeBcrs(m)) => {
                formats::me_bcrs::sddmm(m, alpha, x, y, beta, c, scale_by_values)
            }
            Some(Converted::SrBcrs(m)) => {
                formats::sr_bcrs::sddmm(m, alpha, x, y, beta, c, scale_by_values)
            }
            _ => Err(no_kernel(OpKind::Sddmm, self.format())),
        }
    }
}

/// The executor routes only pairs listed in [`formats_for`] here; anything else is a bug caught
/// as an error rather than a panic.
fn no_kernel(op: OpKind, format: Format) -> Error {
    Error::invalid(format!("the cpu backend has no {op} kernel for {format}"))
}
