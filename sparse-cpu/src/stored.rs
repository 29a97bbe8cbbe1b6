//! What the CPU runs, and the matrix a CPU plan runs on: the caller's CSR, borrowed, or its
//! conversion to the format the descriptor names, owned by the plan.

use sparse_core::{
    Algorithm, BlockShape, Compute, CsrRef, DenseMut, DenseRef, Error, Format, Offer, OpKind,
    Precision, Result, Scalar, SpIndex, ValueOrder,
};
use sparse_formats::{Converted, DeferredCoo, FillLimit, TileSelection, Tiled16};

use crate::formats;
use crate::formats::coo::CooPart;
use crate::partition::part_count;

/// The one table of what the CPU runs ([`sparse_core::Executor::algorithms`]): every format
/// with a kernel for `op`, in the precisions the kernels compute natively; the first offer is
/// what `auto` picks. All are deterministic: their partitions are fixed at plan time.
pub(crate) fn algorithms(op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
    let precisions: &[Precision] = match op {
        OpKind::Attention => &[
            Precision::F64,
            Precision::F32,
            Precision::F16,
            Precision::BF16,
        ],
        _ => &[
            Precision::F64,
            Precision::F32,
            Precision::F16,
            Precision::BF16,
            Precision::I8,
        ],
    };
    // The integer widths of Magicube's modes: SpMM and SDDMM on CSR and SR-BCRS, the
    // formats the GPU runs them on.
    let widths = matches!(precision.compute, Compute::IntBits { .. })
        && matches!(op, OpKind::Spmm | OpKind::Sddmm)
        && matches!(format, Format::Csr | Format::SrBcrs);
    if !formats_for(op).contains(&format) || !(precisions.contains(&precision) || widths) {
        return Vec::new();
    }
    let algorithms: &[Algorithm] = match (op, format) {
        (OpKind::Spmv, Format::Csr) => &[Algorithm::NnzSplit, Algorithm::Reference],
        (_, Format::Csr) => &[Algorithm::RowSplit, Algorithm::Reference],
        // Every other format runs its one kernel, parallel over rows or blocks of rows.
        _ => &[Algorithm::RowSplit],
    };
    algorithms
        .iter()
        .map(|&algorithm| Offer::native(algorithm, true))
        .collect()
}

/// The formats that have a kernel for `op` on the CPU.
fn formats_for(op: OpKind) -> &'static [Format] {
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

/// Tiles of at most this many entries go to Tiled16's deferred CSR in CPU plans.
const DEFERRED_TILE_MAX: usize = 32;

/// The tile formats of CPU plans on Tiled16: the paper's rule, but every tile of at most
/// [`DEFERRED_TILE_MAX`] entries deferred whatever the matrix's size. The kernel pays for each
/// tile's view, its format's dispatch and its payload's decoding whatever the tile holds, which
/// tiles of a few entries do not repay: as CSR rows they are walked like any other.
pub fn tile_selection() -> TileSelection {
    TileSelection {
        deferred_coo: Some(DeferredCoo {
            max_tile_nnz: DEFERRED_TILE_MAX,
            min_matrix_nnz: 0,
        }),
        ..TileSelection::default()
    }
}

pub(crate) enum Stored<T> {
    /// The caller's CSR, which the plan borrows; with values of its own once
    /// [`Stored::set_values`] gave it new ones.
    Csr(Option<Vec<T>>),
    /// A conversion, the CSR entry of each of its slots (analysis kept for new values, and
    /// SDDMM's output order in ME-BCRS and SR-BCRS), and for COO the row partition its SpMV
    /// walks.
    Converted {
        matrix: Box<Converted<T>>,
        order: ValueOrder,
        coo_parts: Vec<CooPart>,
    },
}

impl<T: Scalar> Stored<T> {
    /// `a` in `format`; `block` as in [`BlockShape`].
    pub(crate) fn convert<I: SpIndex>(
        a: CsrRef<'_, T, I>,
        format: Format,
        block: Option<BlockShape>,
    ) -> Result<Self> {
        if format == Format::Csr {
            return match block {
                Some(b) => Err(Error::invalid(format!(
                    "csr has no block shape, but {b} was asked for"
                ))),
                None => Ok(Stored::Csr(None)),
            };
        }
        let matrix = match (format, block) {
            (Format::Tiled16, None) => Converted::Tiled16(Tiled16::from_csr(
                a,
                &tile_selection(),
                FillLimit::default(),
            )?),
            _ => Converted::from_csr(a, format, block, FillLimit::default())?,
        };
        let order = matrix.value_order()?;
        let coo_parts = if format == Format::Coo {
            formats::coo::partition(a, part_count(a.nnz() + a.rows()))
        } else {
            Vec::new()
        };
        Ok(Stored::Converted {
            matrix: Box::new(matrix),
            order,
            coo_parts,
        })
    }

    fn converted(&self) -> Option<&Converted<T>> {
        match self {
            Stored::Csr(_) => None,
            Stored::Converted { matrix, .. } => Some(matrix),
        }
    }

    pub(crate) fn format(&self) -> Format {
        self.converted().map_or(Format::Csr, Converted::format)
    }

    /// Bytes the plan owns here: the conversion and its value order, or the CSR's own values
    /// (none while they are borrowed).
    pub(crate) fn bytes(&self) -> usize {
        match self {
            Stored::Csr(values) => values.as_ref().map_or(0, |v| std::mem::size_of_val(&v[..])),
            Stored::Converted {
                matrix,
                order,
                coo_parts,
            } => {
                matrix.memory_bytes()
                    + order.len() * std::mem::size_of::<usize>()
                    + std::mem::size_of_val(coo_parts.as_slice())
            }
        }
    }

    /// The CSR values given since planning, when there were any.
    pub(crate) fn csr_values(&self) -> Option<&[T]> {
        match self {
            Stored::Csr(values) => values.as_deref(),
            Stored::Converted { .. } => None,
        }
    }

    /// The order SDDMM writes C in when it is not the CSR entry order: the slots of ME-BCRS and
    /// SR-BCRS, which their kernels write directly.
    pub(crate) fn sddmm_order(&self) -> Option<&ValueOrder> {
        match self {
            Stored::Converted { matrix, order, .. }
                if matches!(**matrix, Converted::MeBcrs(_) | Converted::SrBcrs(_)) =>
            {
                Some(order)
            }
            _ => None,
        }
    }

    /// New values in the CSR entry order of the matrix planned from (`csr_values.len()` is its
    /// nnz, checked by the caller): kept for the CSR, or placed into the conversion's slots.
    pub(crate) fn set_values(&mut self, csr_values: &[T]) -> Result<()> {
        match self {
            Stored::Csr(Some(values)) => values.copy_from_slice(csr_values),
            Stored::Csr(values) => *values = Some(csr_values.to_vec()),
            Stored::Converted { matrix, order, .. } => matrix.set_values(order, csr_values)?,
        }
        Ok(())
    }

    /// SpMV on a format other than CSR (the CSR kernels take their partition from the plan).
    pub(crate) fn spmv(
        &self,
        alpha: T::Acc,
        x: DenseRef<'_, T>,
        beta: T::Acc,
        y: DenseMut<'_, T::Out>,
    ) -> Result<()> {
        let Stored::Converted {
            matrix, coo_parts, ..
        } = self
        else {
            return Err(no_kernel(OpKind::Spmv, Format::Csr));
        };
        match matrix.as_ref() {
            Converted::Coo(m) => formats::coo::spmv(m, coo_parts, alpha, x, beta, y),
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

/// The executor routes only pairs listed in [`algorithms`] here; anything else is a bug caught
/// as an error rather than a panic.
fn no_kernel(op: OpKind, format: Format) -> Error {
    Error::internal(format!("the cpu backend has no {op} kernel for {format}"))
}
