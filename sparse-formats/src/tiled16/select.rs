//! Which format each tile is stored in: the selection rule of TileSpMV (Niu et al., IPDPS'21)
//! with configurable thresholds, a forced format for tests and ablations, and the paper's
//! deferred COO.

use sparse_core::{Error, Result};

use super::payload::{stored_bytes, TileEntries, TileFormat};

/// The paper's "deferred COO": tiles with at most `max_tile_nnz` entries leave the tile
/// structure for a separate CSR matrix stored alongside, which SpMV adds row by row. It applies
/// only to matrices with at least `min_matrix_nnz` entries: the paper runs its deferred variant
/// from 1.8M entries on and the plain adaptive one below.
///
/// The paper also defers the COO part of HYB tiles; here only whole tiles are deferred, so every
/// stored tile keeps all of its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferredCoo {
    pub max_tile_nnz: usize,
    pub min_matrix_nnz: usize,
}

impl Default for DeferredCoo {
    /// The paper's: the COO tiles (at most 12 entries) of matrices with at least 1.8M entries.
    fn default() -> Self {
        DeferredCoo {
            max_tile_nnz: 12,
            min_matrix_nnz: 1_800_000,
        }
    }
}

/// How each tile's format is chosen.
///
/// Unless `forced` is set, a tile of `h x w` cells holding `n` entries gets the first format of
/// the paper's order that fits:
/// 1. `Dense` when `n >= floor(dense_min_fill * h * w)` (0.75);
/// 2. `Coo` when `n <= coo_max_nnz` (12);
/// 3. `DenseRow` when every row is empty or full, else `DenseCol` when every column is;
/// 4. `Ell` when the row lengths' coefficient of variation (standard deviation over mean, over
///    the tile's `h` rows) is at most `ell_max_cv` (0.2);
/// 5. `Hyb` when, at the ELL width the paper's byte search picks, it stores fewer bytes than
///    `Csr` (values counted at their size, so the choice may differ between value types);
/// 6. `Csr`.
///
/// The paper's released code never picks HYB (that branch, CV >= 1.0 with at most 4 COO
/// entries, is commented out); the byte test keeps HYB for tiles that are nearly ELL but for a
/// few long rows.
///
/// With `forced`, every tile takes that format, except that a tile the format cannot hold
/// (`DenseRow` for a tile with a partial row, `DenseCol` with a partial column) falls back to
/// `Csr`. Deferral applies before either.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TileSelection {
    pub dense_min_fill: f64,
    pub coo_max_nnz: usize,
    pub ell_max_cv: f64,
    pub forced: Option<TileFormat>,
    pub deferred_coo: Option<DeferredCoo>,
}

impl Default for TileSelection {
    /// The paper's thresholds, deferred COO as the paper applies it.
    fn default() -> Self {
        TileSelection {
            dense_min_fill: 0.75,
            coo_max_nnz: 12,
            ell_max_cv: 0.2,
            forced: None,
            deferred_coo: Some(DeferredCoo::default()),
        }
    }
}

impl TileSelection {
    /// Every tile in `format` (CSR where it cannot hold the tile), nothing deferred.
    pub fn forced(format: TileFormat) -> Self {
        TileSelection {
            forced: Some(format),
            deferred_coo: None,
            ..TileSelection::default()
        }
    }

    /// Errors unless the thresholds are in their domains.
    pub fn check(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.dense_min_fill) {
            return Err(Error::invalid(format!(
                "tile selection: dense_min_fill {} is outside [0, 1]",
                self.dense_min_fill
            )));
        }
        if self.ell_max_cv.is_nan() || self.ell_max_cv < 0.0 {
            return Err(Error::invalid(format!(
                "tile selection: ell_max_cv {} is not a non-negative number",
                self.ell_max_cv
            )));
        }
        Ok(())
    }

    /// The largest tile deferred in a matrix of `matrix_nnz` entries, if deferral applies.
    pub fn deferred_max_nnz(&self, matrix_nnz: usize) -> Option<usize> {
        self.deferred_coo
            .filter(|d| matrix_nnz >= d.min_matrix_nnz)
            .map(|d| d.max_tile_nnz)
    }

    /// The format of a stored tile whose values take `value_bytes` each.
    pub(super) fn choose(&self, tile: &TileEntries, value_bytes: usize) -> TileFormat {
        if let Some(format) = self.forced {
            return if holds(format, tile) {
                format
            } else {
                TileFormat::Csr
            };
        }
        let (h, w, n) = (tile.height, tile.width, tile.nnz());
        // Truncated as the paper's integer threshold is; the fill is checked to lie in [0, 1].
        let dense_threshold = (self.dense_min_fill * (h * w) as f64) as usize;
        if n >= dense_threshold {
            TileFormat::Dense
        } else if n <= self.coo_max_nnz {
            TileFormat::Coo
        } else if tile.rows_empty_or_full() {
            TileFormat::DenseRow
        } else if tile.cols_empty_or_full() {
            TileFormat::DenseCol
        } else if row_length_cv(tile.row_lengths(), n) <= self.ell_max_cv {
            TileFormat::Ell
        } else if stored_bytes(TileFormat::Hyb, tile, value_bytes)
            < stored_bytes(TileFormat::Csr, tile, value_bytes)
        {
            TileFormat::Hyb
        } else {
            TileFormat::Csr
        }
    }
}

/// Whether `format` can store the tile.
fn holds(format: TileFormat, tile: &TileEntries) -> bool {
    match format {
        TileFormat::DenseRow => tile.rows_empty_or_full(),
        TileFormat::DenseCol => tile.cols_empty_or_full(),
        _ => true,
    }
}

/// Standard deviation over mean of the row lengths (`n` entries in all, at least one).
fn row_length_cv(row_len: &[usize], n: usize) -> f64 {
    let rows = row_len.len() as f64;
    let mean = n as f64 / rows;
    let variance = row_len
        .iter()
        .map(|&len| (len as f64 - mean).powi(2))
        .sum::<f64>()
        / rows;
    variance.sqrt() / mean
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(h: usize, w: usize, cells: impl IntoIterator<Item = (usize, usize)>) -> TileEntries {
        let mut t = TileEntries::default();
        t.clear(h, w);
        let mut cells: Vec<_> = cells.into_iter().collect();
        cells.sort_unstable();
        for (s, (r, c)) in cells.into_iter().enumerate() {
            t.push(r, c, s);
        }
        t
    }

    fn chosen(t: &TileEntries) -> TileFormat {
        TileSelection::default().choose(t, 8)
    }

    #[test]
    fn the_paper_rule_in_its_order() {
        let full = tile(16, 16, (0..16).flat_map(|r| (0..12).map(move |c| (r, c))));
        assert_eq!(chosen(&full), TileFormat::Dense);
        assert_eq!(
            chosen(&tile(16, 16, (0..12).map(|r| (r, r)))),
            TileFormat::Coo
        );
        let rows = tile(16, 16, (0..16).flat_map(|c| [(3, c), (9, c)]));
        assert_eq!(chosen(&rows), TileFormat::DenseRow);
        let cols = tile(16, 16, (0..16).flat_map(|r| [(r, 2), (r, 7)]));
        assert_eq!(chosen(&cols), TileFormat::DenseCol);
        let ell = tile(16, 16, (0..16).flat_map(|r| [(r, r), (r, (r + 1) % 16)]));
        assert_eq!(chosen(&ell), TileFormat::Ell);
        let hyb = tile(
            16,
            16,
            (0..16).map(|r| (r, r)).chain((0..3).map(|r| (r, r + 8))),
        );
        assert_eq!(chosen(&hyb), TileFormat::Hyb);
        let csr = tile(
            16,
            16,
            (0..16).map(|c| (0, c)).chain((1..5).map(|r| (r, 0))),
        );
        assert_eq!(chosen(&csr), TileFormat::Csr);
    }

    #[test]
    fn edge_tiles_use_their_own_extent() {
        // A 3x2 corner tile: floor(0.75 * 6) = 4 entries make it dense.
        assert_eq!(
            chosen(&tile(3, 2, [(0, 0), (0, 1), (1, 0), (2, 1)])),
            TileFormat::Dense
        );
    }

    #[test]
    fn forced_formats_fall_back_to_csr_where_they_cannot_hold_the_tile() {
        let partial = tile(16, 16, (0..20).map(|k| (k % 16, k / 16)));
        for format in TileFormat::ALL {
            let expected = match format {
                TileFormat::DenseRow | TileFormat::DenseCol => TileFormat::Csr,
                other => other,
            };
            assert_eq!(TileSelection::forced(format).choose(&partial, 8), expected);
        }
    }

    #[test]
    fn thresholds_are_checked() {
        assert!(TileSelection::default().check().is_ok());
        let bad_fill = TileSelection {
            dense_min_fill: f64::NAN,
            ..TileSelection::default()
        };
        assert!(bad_fill.check().is_err());
        let bad_cv = TileSelection {
            ell_max_cv: -1.0,
            ..TileSelection::default()
        };
        assert!(bad_cv.check().is_err());
    }

    #[test]
    fn deferral_follows_the_matrix_size() {
        let s = TileSelection::default();
        assert_eq!(s.deferred_max_nnz(1_000), None);
        assert_eq!(s.deferred_max_nnz(2_000_000), Some(12));
        assert_eq!(
            TileSelection::forced(TileFormat::Coo).deferred_max_nnz(1 << 30),
            None
        );
    }
}
