//! The one table of what the cusparse backend runs: for each (operation, format, algorithm),
//! the cuSPARSE algorithm it maps to, the storage types and dense layouts cuSPARSE accepts for
//! it, and whether its documentation promises bit-identical results from run to run.
//!
//! `auto` means `vendor-default`, except where cuSPARSE's default does not compute the
//! precision as sparse-blas names it: in f16 SpMM the default, CSR_ALG1 and CSR_ALG2 round
//! partial results to f16 (errors of 20x to 750x the f32-accumulation bound, measured with
//! cuSPARSE 12.6.3 on an H100), so they take only f64 and f32 and f16 `auto` is CSR_ALG3, which
//! accumulates in f32. Not here yet, because the formats do not exist in
//! this library yet: BSR SpMV (`CUSPARSE_SPMV_BSR_ALG1`, with the BSR format) and Blocked-ELL
//! SpMM (`CUSPARSE_SPMM_BLOCKED_ELL_ALG1`, with a Blocked-ELL format).

use cudarc::cusparse::sys::{
    cusparseSDDMMAlg_t as Dd, cusparseSpMMAlg_t as Mm, cusparseSpMVAlg_t as Mv,
};
use sparse_core::{Algorithm, Compute, DType, Format, OpKind, Precision, Support};

/// A cuSPARSE algorithm of one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum VendorAlg {
    Spmv(Mv),
    Spmm(Mm),
    Sddmm(Dd),
}

impl VendorAlg {
    /// The cuSPARSE name, e.g. `CUSPARSE_SPMV_CSR_ALG2`.
    pub fn name(self) -> String {
        match self {
            VendorAlg::Spmv(a) => format!("{a:?}"),
            VendorAlg::Spmm(a) => format!("{a:?}"),
            VendorAlg::Sddmm(a) => format!("{a:?}"),
        }
    }
}

/// One row of the table.
#[derive(Debug)]
pub(super) struct Entry {
    pub op: OpKind,
    pub format: Format,
    pub algorithm: Algorithm,
    pub vendor: VendorAlg,
    /// Storage types it runs; f16 always computes in f32.
    pub dtypes: &'static [DType],
    /// Storage types in which row-major B and C (N > 1) need even leading dimensions: with an
    /// odd one the algorithm faults on a misaligned vector access (seen with cuSPARSE 12.6.3
    /// on sm_90), which would poison the context, so such a run is refused instead.
    pub even_ld: &'static [DType],
    /// The cuSPARSE documentation promises bit-identical results for the same inputs.
    pub deterministic: bool,
}

const FLOATS: &[DType] = &[DType::F64, DType::F32, DType::F16];
const WIDE: &[DType] = &[DType::F64, DType::F32];

macro_rules! entry {
    ($op:ident, $format:ident, $alg:ident, $vendor:ident($v:expr), $dtypes:expr, $det:expr, even_ld: $even:expr) => {
        Entry {
            op: OpKind::$op,
            format: Format::$format,
            algorithm: Algorithm::$alg,
            vendor: VendorAlg::$vendor($v),
            dtypes: $dtypes,
            even_ld: $even,
            deterministic: $det,
        }
    };
}

pub(super) const TABLE: &[Entry] = &[
    // SpMV: CSR_ALG2 and COO_ALG2 are the documented deterministic ones.
    entry!(Spmv, Csr, VendorDefault, Spmv(Mv::CUSPARSE_SPMV_ALG_DEFAULT), FLOATS, false, even_ld: &[]),
    entry!(Spmv, Csr, VendorAlg1, Spmv(Mv::CUSPARSE_SPMV_CSR_ALG1), FLOATS, false, even_ld: &[]),
    entry!(Spmv, Csr, VendorAlg2, Spmv(Mv::CUSPARSE_SPMV_CSR_ALG2), FLOATS, true, even_ld: &[]),
    entry!(Spmv, Coo, VendorDefault, Spmv(Mv::CUSPARSE_SPMV_ALG_DEFAULT), FLOATS, false, even_ld: &[]),
    entry!(Spmv, Coo, VendorAlg1, Spmv(Mv::CUSPARSE_SPMV_COO_ALG1), FLOATS, false, even_ld: &[]),
    entry!(Spmv, Coo, VendorAlg2, Spmv(Mv::CUSPARSE_SPMV_COO_ALG2), FLOATS, true, even_ld: &[]),
    // SpMM on CSR: ALG3 is the only one whose f16 results are f32-accumulated. The documentation
    // calls it deterministic, but with column-major C two runs differed (cuSPARSE 12.6.3, H100,
    // conformance run of 2026-11-22), so it is not marked so.
    entry!(Spmm, Csr, VendorDefault, Spmm(Mm::CUSPARSE_SPMM_ALG_DEFAULT), WIDE, false, even_ld: &[]),
    entry!(Spmm, Csr, VendorAlg1, Spmm(Mm::CUSPARSE_SPMM_CSR_ALG1), WIDE, false, even_ld: &[]),
    entry!(Spmm, Csr, VendorAlg2, Spmm(Mm::CUSPARSE_SPMM_CSR_ALG2), WIDE, false, even_ld: &[]),
    entry!(Spmm, Csr, VendorAlg3, Spmm(Mm::CUSPARSE_SPMM_CSR_ALG3), FLOATS, false, even_ld: WIDE),
    // SDDMM has one algorithm; its documentation makes no determinism promise.
    entry!(Sddmm, Csr, VendorDefault, Sddmm(Dd::CUSPARSE_SDDMM_ALG_DEFAULT), FLOATS, false, even_ld: &[]),
];

/// The table row for `algorithm`; `auto` is `vendor-default`, or the first row that runs
/// `dtype` where the default does not.
pub(super) fn find(
    op: OpKind,
    format: Format,
    algorithm: Algorithm,
    dtype: DType,
) -> Option<&'static Entry> {
    let rows = || {
        TABLE
            .iter()
            .filter(move |e| e.op == op && e.format == format)
    };
    match algorithm {
        Algorithm::Auto => rows()
            .filter(|e| e.dtypes.contains(&dtype))
            .min_by_key(|e| e.algorithm != Algorithm::VendorDefault),
        chosen => rows().find(|e| e.algorithm == chosen),
    }
}

/// The storage type of a precision cuSPARSE computes as named: f64, f32, f16 with f32 compute.
fn storage(precision: Precision) -> Option<DType> {
    match (precision.storage, precision.compute) {
        (DType::F64, Compute::F64) | (DType::F32, Compute::F32) | (DType::F16, Compute::F32) => {
            Some(precision.storage)
        }
        _ => None,
    }
}

/// Native when some algorithm runs the combination, else Unsupported.
pub(super) fn capability(op: OpKind, format: Format, precision: Precision) -> Support {
    let runs = storage(precision).is_some_and(|dtype| {
        TABLE
            .iter()
            .any(|e| e.op == op && e.format == format && e.dtypes.contains(&dtype))
    });
    if runs {
        Support::Native
    } else {
        Support::Unsupported
    }
}

/// Every row of the table as `op format algorithm (CUSPARSE_NAME: dtypes[, layouts])`, for
/// errors that say what would run instead.
pub(super) fn supported() -> String {
    TABLE.iter().map(describe).collect::<Vec<_>>().join("; ")
}

pub(super) fn describe(e: &Entry) -> String {
    let names = |dtypes: &[DType]| {
        dtypes
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let even = if e.even_ld.is_empty() {
        String::new()
    } else {
        format!(
            ", even leading dimensions for row-major B and C in {}",
            names(e.even_ld)
        )
    };
    format!(
        "{} {} {} ({}: {}{even})",
        e.op,
        e.format,
        e.algorithm,
        e.vendor.name(),
        names(e.dtypes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_and_format_has_one_default_and_no_row_repeats() {
        for (i, e) in TABLE.iter().enumerate() {
            assert!(
                find(e.op, e.format, Algorithm::VendorDefault, DType::F64).is_some(),
                "{}",
                describe(e)
            );
            assert!(
                TABLE[..i]
                    .iter()
                    .all(|o| (o.op, o.format, o.algorithm) != (e.op, e.format, e.algorithm)),
                "{} is listed twice",
                describe(e)
            );
        }
        assert!(find(OpKind::Spmv, Format::Csr, Algorithm::MergePath, DType::F64).is_none());
    }

    #[test]
    fn auto_is_the_default_unless_the_default_cannot_run_the_type() {
        let auto = |op, dtype| find(op, Format::Csr, Algorithm::Auto, dtype).map(|e| e.vendor);
        assert_eq!(
            auto(OpKind::Spmv, DType::F16),
            Some(VendorAlg::Spmv(Mv::CUSPARSE_SPMV_ALG_DEFAULT))
        );
        assert_eq!(
            auto(OpKind::Spmm, DType::F32),
            Some(VendorAlg::Spmm(Mm::CUSPARSE_SPMM_ALG_DEFAULT))
        );
        assert_eq!(
            auto(OpKind::Spmm, DType::F16),
            Some(VendorAlg::Spmm(Mm::CUSPARSE_SPMM_CSR_ALG3))
        );
        assert_eq!(auto(OpKind::Spmm, DType::BF16), None);
    }

    #[test]
    fn capability_follows_the_table() {
        assert_eq!(
            capability(OpKind::Spmv, Format::Coo, Precision::F16),
            Support::Native
        );
        assert_eq!(
            capability(OpKind::Spmm, Format::Csr, Precision::TF32),
            Support::Unsupported
        );
        assert_eq!(
            capability(OpKind::Attention, Format::Csr, Precision::F32),
            Support::Unsupported
        );
        assert_eq!(
            capability(OpKind::Spmv, Format::Bsr, Precision::F64),
            Support::Unsupported
        );
        assert!(supported().contains("spmm csr vendor-alg3 (CUSPARSE_SPMM_CSR_ALG3"));
    }
}
