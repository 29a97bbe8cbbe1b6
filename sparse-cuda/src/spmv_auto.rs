//! `auto` for SpMV on CSR in the `cuda` backend, with cuSPARSE's CSR and COO algorithms among
//! the candidates, so that `auto` is never the vendor's slower cousin.
//!
//! By default a rule from row statistics chooses (free). With `SpmvDesc::tuned`, every
//! candidate is planned and timed on the matrix itself instead (`tuning.rs`).
//!
//! The rule, calibrated on an H100 over the 49 corpus matrices and four generated ones of 26M to
//! 34M entries in f64, f32 and f16 (`docs/results/spmv.md` has the figures):
//! - in f64 and f32, a small matrix whose longest row takes a `vector` warp many dependent
//!   iterations ([`TINY_NNZ`], [`TINY_CHAIN`]): our COO `atomic`, whose threads each take a few
//!   entries; the whole product lasts about as long as that one row otherwise;
//! - skewed rows (one longer than [`LONG_ROW`] entries, or a coefficient of variation of the
//!   row lengths above [`SKEWED_CV`]), or a longest row whose iterations outlast the stream of
//!   the whole matrix by more than [`CHAIN_EXCESS_US`]: below [`SPLIT_MAX_NNZ`] entries,
//!   `vector-split`, which gives the long rows whole warps in segments within its one launch
//!   (pruned layers with rows of hundreds of entries too, since whole warps issue four steps'
//!   loads at once: `docs/results/h200-2026-11-27i.md`); otherwise cuSPARSE's COO SpMV in f64
//!   and f32, which balances entries over threads, and our merge-path in f16 (cuSPARSE's f16
//!   SpMV is slower than our `vector` even there). Rows skewed only in their lengths, none
//!   longer than [`SHORT_ROW`] (a web graph with many empty rows), take `scalar` where it
//!   streams them (below);
//! - in f32 and f16, large and local matrices of regular rows ([`rows_stream`]) made of whole
//!   4 x 4 blocks ([`whole_blocks`]: each aligned group of four rows holds the same columns, in
//!   aligned runs of four): our BSR SpMV with 4 x 4 blocks, which stores no fill there and
//!   reads a block column index per 16 entries instead of a column index per entry. On 3D
//!   stencils of 4 x 4 blocks (1.9M to 30M entries, H200) it ran 1.2x-1.6x as fast as the CSR
//!   pick in f32 and 1.3x-1.7x in f16; its plan took 0.2 s against 0.02 s at 30M entries (the
//!   conversion), repaid after 6,000 (f32) to 8,000 (f16) products. In f64 it was 1.05x-1.1x as
//!   fast, which would take some 35,000 products to repay, so f64 stays on CSR
//!   (`docs/results/h200-2026-11-29g.md`);
//! - long rows (a mean of [`LONG_MEAN`] entries or more): `vector`, 32 lanes a row, or in a
//!   large and local matrix of regular rows ([`rows_stream`]) a lane for about four entries,
//!   each lane's loads of four steps issued together (`spmv::vector_shape`);
//! - large and local matrices (at least [`LARGE_NNZ`] entries, rows whose columns span at most
//!   [`LOCAL_SPAN`] of the columns on average) with regular rows (a coefficient of variation at
//!   most [`REGULAR_CV`]: stencils, FEM) whose rows hold [`STREAM_ROW_BYTES`] or more of
//!   indices and values on average: `vector` in that shape, which streams a 3D Poisson stencil
//!   of 26M entries at 97% of the copy bandwidth in f64 (in 14% less time than `scalar`; in f32
//!   the same time, in f16 9% more) and one of 4 x 4 blocks (28 entries a row) at 1.28x
//!   cuSPARSE in f64, where 32 lanes a row ran at 0.50x (H200,
//!   `docs/results/h200-2026-11-29f.md`);
//! - the same matrices with shorter rows, or with short rows (none over [`SHORT_ROW`]) of any
//!   lengths, or a mean below 1.5: `scalar`, one thread a row, which streams the matrix at 90%
//!   or more of the copy bandwidth on the stencils;
//! - otherwise `vector`, with lanes by the mean row length.

use std::cell::OnceCell;

use rayon::prelude::*;

use sparse_core::{Algorithm, BlockShape, CsrRef, DType, Format, Precision, RowStats, SpIndex};

use crate::spmv::{vector_width, LONG_ROW};

/// Row lengths whose standard deviation is more than this many means are skewed.
pub const SKEWED_CV: f64 = 1.5;
/// Rows of at least this many entries on average take a whole warp each.
pub const LONG_MEAN: f64 = 24.0;
/// Regular rows of at least this many bytes of indices and values on average stream faster on
/// `vector`, in the shape of [`rows_stream`] matrices, than on `scalar`, whose thread walks a
/// row alone: a 3D Poisson stencil's 6.7 entries a row hold 80 bytes in f64, where `vector`
/// was faster, and 54 in f32, where the two took the same time.
pub const STREAM_ROW_BYTES: f64 = 64.0;
/// Matrices from this many entries on stream past the L2 enough for `scalar` to pay.
pub const LARGE_NNZ: usize = 500_000;
/// Skewed matrices of fewer entries run on `vector-split`: there launches and chains of
/// dependent loads set the time, and one launch with short chains wins; on larger ones the
/// stream does, and cuSPARSE's COO SpMV streams a power-law matrix better (on R-MAT of 34M
/// entries `vector-split` was 0.72x-0.81x of it).
pub const SPLIT_MAX_NNZ: usize = 1 << 20;
/// Row lengths regular enough for one thread a row.
pub const REGULAR_CV: f64 = 0.5;
/// Rows short enough for one thread a row however their lengths vary: no thread walks more
/// than this many entries.
pub const SHORT_ROW: usize = 64;
/// Rows local enough for `scalar`: their columns span at most this fraction of the columns on
/// average. Matrices with random columns span nearly all of them; there a warp's x gathers
/// evict the lines `scalar` streams its rows through before it reads them again.
pub const LOCAL_SPAN: f64 = 0.6;

/// The block edge of the BSR [`Choice::Blocks`] takes: 4 x 4 blocks, as stencils of four
/// unknowns a point have, and those of 8 or 16.
pub const BLOCK_EDGE: usize = 4;

/// Matrices of fewer entries stream in a microsecond or two: the walk of their longest row, not
/// their bytes, sets the time of `vector`.
pub const TINY_NNZ: usize = 32_768;
/// `vector` iterations of the longest row (its entries over the lanes a row gets) from which
/// such a matrix runs on COO `atomic`.
pub const TINY_CHAIN: f64 = 16.0;
/// How much longer, in microseconds, the longest row's walk may last than the stream of the whole
/// matrix before cuSPARSE's COO SpMV, which takes about that much more to start than `vector`
/// but balances entries across threads, is faster.
pub const CHAIN_EXCESS_US: f64 = 3.0;
/// Bytes a microsecond the matrix streams at when the walk does not hide it (an H100's HBM3).
const STREAM_BYTES_PER_US: f64 = 3.0e6;

/// Microseconds one `vector` iteration of a row takes when nothing hides its latency: the
/// column index, then x, each a dependent load, with more bytes to wait for in f64.
fn iteration_us(precision: Precision) -> f64 {
    if precision.storage == DType::F64 {
        0.25
    } else {
        0.17
    }
}

/// What `auto` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// One of this backend's kernels, on CSR or on a format it builds from the CSR.
    Cuda(Format, Algorithm),
    /// cuSPARSE on this format.
    Vendor(Format, Algorithm),
    /// This backend's BSR SpMV (`vector`) with these blocks.
    Blocks(BlockShape),
}

/// Whether `a` is made of whole `b` x `b` blocks: each aligned group of `b` rows holds the same
/// columns, in aligned runs of `b`, so that BSR with such blocks stores no fill. Stops at the
/// first group that is not (on most matrices the first row), and looks at the groups in
/// parallel.
pub(crate) fn whole_blocks<T, I: SpIndex>(a: CsrRef<'_, T, I>, b: usize) -> bool {
    if a.rows() % b != 0 || a.cols() % b != 0 {
        return false;
    }
    let cols = a.col_idx();
    let aligned_runs = |row: &[I]| {
        row.len() % b == 0
            && row.chunks(b).all(|run| {
                let first = run[0].to_usize();
                first % b == 0 && run.iter().zip(first..).all(|(c, j)| c.to_usize() == j)
            })
    };
    let row_ptr = a.row_ptr();
    let row = |i: usize| &cols[row_ptr[i].to_usize()..row_ptr[i + 1].to_usize()];
    (0..a.rows() / b).into_par_iter().all(|group| {
        let lead = row(group * b);
        aligned_runs(lead) && (group * b + 1..group * b + b).all(|i| row(i) == lead)
    })
}

/// Whether the stream of a large matrix, not its chains of dependent loads, sets the time of
/// its SpMV, with regular rows whose columns lie close together (stencils, FEM): x's entries are
/// then reused from L1, and a warp does best with many rows' bytes in flight at once.
pub(crate) fn rows_stream(stats: &RowStats, nnz: usize, span: impl FnOnce() -> f64) -> bool {
    nnz >= LARGE_NNZ && stats.cv <= REGULAR_CV && span() <= LOCAL_SPAN
}

/// Whether one thread a row streams these rows best: a mean below 1.5, or a large matrix of
/// regular or short rows that span few columns (x reused from L1).
pub(crate) fn scalar_streams(stats: &RowStats, nnz: usize, span: impl FnOnce() -> f64) -> bool {
    stats.mean < 1.5
        || (nnz >= LARGE_NNZ
            && (stats.cv <= REGULAR_CV || stats.max <= SHORT_ROW)
            && span() <= LOCAL_SPAN)
}

/// The rule's choice for a CSR matrix of `rows` rows and `nnz` entries with these row
/// statistics, column span and whether it is made of whole [`BLOCK_EDGE`] blocks (each asked
/// for only where it decides).
pub(crate) fn csr_choice(
    stats: &RowStats,
    (rows, nnz): (usize, usize),
    span: impl Fn() -> f64,
    blocks: impl FnOnce() -> bool,
    precision: Precision,
) -> Choice {
    let span = {
        let once = OnceCell::new();
        move || *once.get_or_init(&span)
    };
    let wide = matches!(precision.storage, DType::F64 | DType::F32);
    let chain = stats.max as f64 / f64::from(vector_width(stats.mean));
    let value_bytes = (precision.storage.bits() / 8) as f64;
    let stream_us = (nnz as f64 * (value_bytes + 4.0) + rows as f64 * (2.0 * value_bytes + 4.0))
        / STREAM_BYTES_PER_US;
    let walk_outlasts_stream = chain * iteration_us(precision) - stream_us > CHAIN_EXCESS_US;
    let skewed = stats.max > LONG_ROW as usize || stats.cv > SKEWED_CV || walk_outlasts_stream;
    let skewed_choice = || {
        if nnz < SPLIT_MAX_NNZ {
            Choice::Cuda(Format::Csr, Algorithm::VectorSplit)
        } else if wide {
            Choice::Vendor(Format::Coo, Algorithm::VendorDefault)
        } else {
            Choice::Cuda(Format::Csr, Algorithm::MergePath)
        }
    };
    if wide && nnz < TINY_NNZ && chain >= TINY_CHAIN {
        Choice::Cuda(Format::Coo, Algorithm::Atomic)
    } else if skewed && stats.max > SHORT_ROW {
        skewed_choice()
    } else if precision.storage != DType::F64 && rows_stream(stats, nnz, &span) && blocks() {
        Choice::Blocks(BlockShape::new(BLOCK_EDGE, BLOCK_EDGE))
    } else if stats.mean >= LONG_MEAN
        || (stats.mean * (value_bytes + 4.0) >= STREAM_ROW_BYTES && rows_stream(stats, nnz, &span))
    {
        Choice::Cuda(Format::Csr, Algorithm::Vector)
    } else if scalar_streams(stats, nnz, &span) {
        Choice::Cuda(Format::Csr, Algorithm::Scalar)
    } else if skewed {
        skewed_choice()
    } else {
        Choice::Cuda(Format::Csr, Algorithm::Vector)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(mean: f64, max: usize, cv: f64) -> RowStats {
        RowStats {
            min: 0,
            max,
            mean,
            cv,
            empty_rows: 0,
        }
    }

    #[test]
    fn the_rule_picks_by_shape() {
        let (f64, f32, f16) = (Precision::F64, Precision::F32, Precision::F16);
        let pick = |s: RowStats, rows, nnz, span: f64, p| {
            csr_choice(&s, (rows, nnz), || span, || false, p)
        };
        let blocks =
            |s: RowStats, rows, nnz, span: f64, p| csr_choice(&s, (rows, nnz), || span, || true, p);
        let bsr = Choice::Blocks(BlockShape::new(4, 4));
        let vendor = Choice::Vendor(Format::Coo, Algorithm::VendorDefault);
        let scalar = Choice::Cuda(Format::Csr, Algorithm::Scalar);
        let vector = Choice::Cuda(Format::Csr, Algorithm::Vector);
        let split = Choice::Cuda(Format::Csr, Algorithm::VectorSplit);
        let merge_path = Choice::Cuda(Format::Csr, Algorithm::MergePath);
        let atomic = Choice::Cuda(Format::Coo, Algorithm::Atomic);
        // Skewed graphs.
        for p in [f64, f32, f16] {
            assert_eq!(pick(stats(15.0, 9458, 5.3), 37_700, 578_006, 0.1, p), split);
        }
        assert_eq!(pick(stats(12.5, 893, 3.2), 8_297, 103_689, 0.1, f32), split);
        // Skewed with long rows on average.
        for p in [f64, f16] {
            assert_eq!(pick(stats(100.6, 2_000, 1.6), 496, 49_920, 0.9, p), split);
        }
        // A large power-law graph.
        for p in [f64, f32] {
            assert_eq!(
                pick(stats(16.0, 40_000, 3.0), 1 << 21, 34_000_000, 0.9, p),
                vendor
            );
        }
        assert_eq!(
            pick(stats(16.0, 40_000, 3.0), 1 << 21, 34_000_000, 0.9, f16),
            merge_path
        );
        // A web graph: most rows empty, none long, columns near their row.
        for p in [f64, f32, f16] {
            assert_eq!(
                pick(stats(2.85, 60, 1.95), 325_729, 929_849, 0.27, p),
                scalar
            );
        }
        // The same lengths on fewer entries stay on `vector-split`.
        assert_eq!(
            pick(stats(2.85, 60, 1.95), 32_573, 92_985, 0.27, f32),
            split
        );
        // A 3D Poisson stencil, a 2D one, one of 4 x 4 blocks, and the same rows with random
        // columns.
        assert_eq!(
            pick(stats(6.7, 7, 0.05), 3_800_000, 26_000_000, 0.01, f64),
            vector
        );
        for p in [f32, f16] {
            assert_eq!(
                pick(stats(6.7, 7, 0.05), 3_800_000, 26_000_000, 0.01, p),
                scalar
            );
        }
        assert_eq!(
            pick(stats(5.0, 5, 0.05), 4_900_000, 24_600_000, 0.01, f32),
            scalar
        );
        for p in [f64, f32, f16] {
            assert_eq!(
                pick(stats(27.6, 28, 0.05), 1_100_000, 30_000_000, 0.01, p),
                vector
            );
        }
        assert_eq!(
            pick(stats(16.0, 30, 0.25), 1_800_000, 29_000_000, 0.9, f64),
            vector
        );
        // Made of whole 4 x 4 blocks: BSR where the rows stream in f32 and f16, not in f64, on
        // a small matrix, nor on skewed or random rows.
        for p in [f32, f16] {
            assert_eq!(
                blocks(stats(27.6, 28, 0.05), 1_100_000, 30_000_000, 0.01, p),
                bsr
            );
        }
        assert_eq!(
            blocks(stats(27.6, 28, 0.05), 1_100_000, 30_000_000, 0.01, f64),
            vector
        );
        assert_eq!(
            blocks(stats(27.6, 28, 0.05), 4_000, 110_000, 0.01, f32),
            vector
        );
        assert_eq!(
            blocks(stats(16.0, 30, 0.25), 1_800_000, 29_000_000, 0.9, f64),
            vector
        );
        assert_eq!(
            blocks(stats(16.0, 40_000, 3.0), 1 << 21, 34_000_000, 0.1, f64),
            vendor
        );
        // Small, and long rows.
        assert_eq!(pick(stats(7.0, 7, 0.05), 1_400, 10_000, 0.01, f64), vector);
        assert_eq!(pick(stats(1.2, 3, 0.3), 830, 1_000, 0.5, f64), scalar);
        assert_eq!(
            pick(stats(102.0, 276, 0.37), 1_200, 122_713, 0.5, f64),
            vector
        );
        // A small citation graph: its longest row takes a vector warp 50 iterations.
        assert_eq!(pick(stats(2.8, 99, 1.2), 3_327, 9_228, 0.3, f64), atomic);
        assert_eq!(pick(stats(2.8, 99, 1.2), 3_327, 9_228, 0.3, f16), split);
        // A pruned layer of 256 rows of 460 entries: the longest row's 26 iterations outlast
        // its stream; with 2048 such rows the stream hides them.
        assert_eq!(pick(stats(460.8, 833, 0.17), 256, 117_964, 1.0, f64), split);
        assert_eq!(pick(stats(460.8, 833, 0.17), 256, 117_964, 1.0, f16), split);
        assert_eq!(
            pick(stats(512.0, 623, 0.06), 2_048, 1_048_576, 1.0, f64),
            vector
        );
    }

    #[test]
    fn whole_blocks_need_aligned_runs_shared_by_their_rows() {
        let block_rows = |pattern: &[&[usize]], cols: usize| {
            let triplets: Vec<_> = pattern
                .iter()
                .enumerate()
                .flat_map(|(i, row)| row.iter().map(move |&j| (i, j, 1.0f64)))
                .collect();
            sparse_formats::Csr::<f64>::from_triplets(pattern.len(), cols, &triplets).unwrap()
        };
        let whole: &[&[usize]] = &[&[0, 1, 4, 5], &[0, 1, 4, 5], &[2, 3], &[2, 3]];
        assert!(whole_blocks(block_rows(whole, 6).as_ref(), 2));
        assert!(
            !whole_blocks(block_rows(whole, 6).as_ref(), 4),
            "4 does not divide 6"
        );
        let unaligned: &[&[usize]] = &[&[1, 2], &[1, 2]];
        assert!(!whole_blocks(block_rows(unaligned, 4).as_ref(), 2));
        let differing: &[&[usize]] = &[&[0, 1], &[2, 3]];
        assert!(!whole_blocks(block_rows(differing, 4).as_ref(), 2));
        let partial: &[&[usize]] = &[&[0, 1, 2], &[0, 1, 2]];
        assert!(!whole_blocks(block_rows(partial, 4).as_ref(), 2));
        let empty: &[&[usize]] = &[&[], &[], &[0, 1], &[0, 1]];
        assert!(whole_blocks(block_rows(empty, 2).as_ref(), 2));
    }
}
