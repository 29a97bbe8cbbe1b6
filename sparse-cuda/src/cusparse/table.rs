//! The one table of what the cusparse backend runs: for each (operation, format, algorithm),
//! the cuSPARSE algorithm it maps to, the storage types and dense layouts cuSPARSE accepts for
//! it, and whether its documentation promises bit-identical results from run to run.
//!
//! `auto` means `vendor-default`, except where cuSPARSE's default does not compute the
//! precision as sparse-blas names it: in f16 SpMM the default, CSR_ALG1 and CSR_ALG2 round
//! partial results to f16 (errors of 20x to 750x the f32-accumulation bound, measured with
//! cuSPARSE 12.6.3 on an H100), so they take only f64 and f32 and f16 `auto` is CSR_ALG3, which
//! accumulates in f32.
//!
//! BSR SpMV is cuSPARSE's generic SpMV on a `cusparseCreateBsr` descriptor (row-major blocks;
//! its algorithm, `CUSPARSE_SPMV_BSR_ALG1`, is what the default picks for BSR and is named only
//! in CUDA 13's headers, so the row names the default). Its table row lists f64 and f32; a plan
//! refuses block shapes other than square ones from 2x2 with `Unsupported` (the legacy
//! `bsrmv` takes only square blocks above 1x1, and the generic API documents no others).
//! Blocked-ELL SpMM (`CUSPARSE_SPMM_BLOCKED_ELL_ALG1`) is not a row: Blocked-ELL is not a format
//! of sparse-blas, and the benchmarks reach it through `CusparseBackend::blocked_ell_spmm`.

use cudarc::cusparse::sys::{
    cusparseSDDMMAlg_t as Dd, cusparseSpMMAlg_t as Mm, cusparseSpMVAlg_t as Mv,
};
use sparse_core::{Algorithm, Compute, DType, Format, Layout, Offer, OpKind, Precision};

use crate::operand::{Bound, SpmmOperands};

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
    // BSR: no determinism promise is documented.
    entry!(Spmv, Bsr, VendorDefault, Spmv(Mv::CUSPARSE_SPMV_ALG_DEFAULT), WIDE, false, even_ld: &[]),
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

/// The storage type of a precision cuSPARSE computes as named: f64, f32, f16 with f32 compute.
fn storage(precision: Precision) -> Option<DType> {
    match (precision.storage, precision.compute) {
        (DType::F64, Compute::F64) | (DType::F32, Compute::F32) | (DType::F16, Compute::F32) => {
            Some(precision.storage)
        }
        _ => None,
    }
}

/// The rows that run `op` on `format` in `precision`.
fn rows(op: OpKind, format: Format, precision: Precision) -> impl Iterator<Item = &'static Entry> {
    let dtype = storage(precision);
    TABLE.iter().filter(move |e| {
        e.op == op && e.format == format && dtype.is_some_and(|d| e.dtypes.contains(&d))
    })
}

/// What the backend runs for `op` on `format` in `precision`: `CusparseBackend::table`.
pub(super) fn algorithms(op: OpKind, format: Format, precision: Precision) -> Vec<Offer> {
    rows(op, format, precision)
        .map(|e| Offer::native(e.algorithm, e.deterministic))
        .collect()
}

/// The row that runs `algorithm` for `op` on `format` in `precision`; `auto` is
/// `vendor-default`, or the first row that runs the precision where the default does not.
pub(super) fn find(
    op: OpKind,
    format: Format,
    precision: Precision,
    algorithm: Algorithm,
) -> Option<&'static Entry> {
    match algorithm {
        Algorithm::Auto => {
            rows(op, format, precision).min_by_key(|e| e.algorithm != Algorithm::VendorDefault)
        }
        chosen => rows(op, format, precision).find(|e| e.algorithm == chosen),
    }
}

impl Entry {
    /// Whether this row refuses an SpMM in `dtype` on `ops`: N above 1 with B and C both
    /// row-major of odd leading dimensions (see [`Entry::even_ld`]).
    pub fn refuses_odd_ld(&self, dtype: DType, ops: &SpmmOperands) -> bool {
        let odd = |d: &Bound| d.layout == Layout::RowMajor && d.ld % 2 == 1;
        self.even_ld.contains(&dtype) && ops.n > 1 && odd(&ops.b) && odd(&ops.c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparse_core::{check_offered, support_of, BackendKind, Error, Support};

    #[test]
    fn every_operation_and_format_has_one_default_and_no_row_repeats() {
        for (i, e) in TABLE.iter().enumerate() {
            assert!(
                find(e.op, e.format, Precision::F64, Algorithm::VendorDefault).is_some(),
                "{} {} {}",
                e.op,
                e.format,
                e.algorithm
            );
            assert!(
                TABLE[..i]
                    .iter()
                    .all(|o| (o.op, o.format, o.algorithm) != (e.op, e.format, e.algorithm)),
                "{} {} {} is listed twice",
                e.op,
                e.format,
                e.algorithm
            );
            assert_ne!(e.algorithm, Algorithm::Auto);
        }
        assert!(find(
            OpKind::Spmv,
            Format::Csr,
            Precision::F64,
            Algorithm::MergePath
        )
        .is_none());
    }

    #[test]
    fn auto_is_the_default_unless_the_default_cannot_run_the_precision() {
        let auto =
            |op, precision| find(op, Format::Csr, precision, Algorithm::Auto).map(|e| e.vendor);
        assert_eq!(
            auto(OpKind::Spmv, Precision::F16),
            Some(VendorAlg::Spmv(Mv::CUSPARSE_SPMV_ALG_DEFAULT))
        );
        assert_eq!(
            auto(OpKind::Spmm, Precision::F32),
            Some(VendorAlg::Spmm(Mm::CUSPARSE_SPMM_ALG_DEFAULT))
        );
        assert_eq!(
            auto(OpKind::Spmm, Precision::F16),
            Some(VendorAlg::Spmm(Mm::CUSPARSE_SPMM_CSR_ALG3))
        );
        assert_eq!(auto(OpKind::Spmm, Precision::BF16), None);
        assert_eq!(auto(OpKind::Spmm, Precision::TF32), None);
    }

    #[test]
    fn offers_and_errors_follow_the_table() {
        for (op, format, precision, support) in [
            (OpKind::Spmv, Format::Coo, Precision::F16, Support::Native),
            (
                OpKind::Spmm,
                Format::Csr,
                Precision::TF32,
                Support::Unsupported,
            ),
            (
                OpKind::Attention,
                Format::Csr,
                Precision::F32,
                Support::Unsupported,
            ),
            (OpKind::Spmv, Format::Bsr, Precision::F64, Support::Native),
            (
                OpKind::Spmv,
                Format::Bsr,
                Precision::F16,
                Support::Unsupported,
            ),
            (
                OpKind::Spmv,
                Format::Ell,
                Precision::F32,
                Support::Unsupported,
            ),
        ] {
            let offers = algorithms(op, format, precision);
            assert_eq!(support_of(&offers), support, "{op} {format} {precision}");
        }
        let deterministic: Vec<Algorithm> = algorithms(OpKind::Spmv, Format::Csr, Precision::F32)
            .iter()
            .filter(|o| o.deterministic)
            .map(|o| o.algorithm)
            .collect();
        assert_eq!(deterministic, [Algorithm::VendorAlg2]);
        let f16: Vec<Algorithm> = algorithms(OpKind::Spmm, Format::Csr, Precision::F16)
            .iter()
            .map(|o| o.algorithm)
            .collect();
        assert_eq!(f16, [Algorithm::VendorAlg3]);
        let check = |precision, algorithm| {
            check_offered(
                BackendKind::Cusparse,
                algorithms,
                OpKind::Spmm,
                Format::Csr,
                precision,
                algorithm,
            )
        };
        let err = check(Precision::F16, Algorithm::VendorAlg1).unwrap_err();
        assert!(
            matches!(err, Error::Unsupported { .. })
                && err.to_string().contains("with auto, vendor-alg3"),
            "{err}"
        );
        let err = check(Precision::TF32, Algorithm::Auto).unwrap_err();
        assert!(
            err.to_string().contains(
                "spmm on csr in f64 f32 (vendor-default, vendor-alg1, vendor-alg2, \
                 vendor-alg3); on csr in f16 (vendor-alg3)"
            ),
            "{err}"
        );
    }

    #[test]
    fn only_odd_row_major_leading_dimensions_of_both_operands_are_refused() {
        let alg3 = find(
            OpKind::Spmm,
            Format::Csr,
            Precision::F32,
            Algorithm::VendorAlg3,
        )
        .expect("a row");
        let operand = |layout, ld| Bound {
            address: 0,
            rows: 4,
            cols: 8,
            layout,
            ld,
        };
        let ops = |n, (b_layout, b_ld), (c_layout, c_ld)| SpmmOperands {
            n,
            b: operand(b_layout, b_ld),
            c: operand(c_layout, c_ld),
        };
        let (row, col) = (Layout::RowMajor, Layout::ColMajor);
        assert!(alg3.refuses_odd_ld(DType::F32, &ops(8, (row, 33), (row, 35))));
        assert!(!alg3.refuses_odd_ld(DType::F32, &ops(8, (row, 34), (row, 35))));
        assert!(!alg3.refuses_odd_ld(DType::F32, &ops(8, (col, 33), (row, 35))));
        assert!(!alg3.refuses_odd_ld(DType::F32, &ops(1, (row, 33), (row, 33))));
        assert!(!alg3.refuses_odd_ld(DType::F16, &ops(8, (row, 33), (row, 33))));
    }
}
