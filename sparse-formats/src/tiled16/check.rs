//! The checks `validate` runs on one tile's payload, against the layouts of [`super::payload`].

use super::payload::{
    bit_indices, ell_bytes, mask_bit, read_u16, unpack_position, PackedNibbles, TileFormat, TILE,
};

/// Checks one tile's payload: lengths, in-tile indices within `h x w`, entry order, masks, and
/// that it holds exactly `nnz` entries. The message names the offending position.
pub(super) fn check(
    format: TileFormat,
    h: usize,
    w: usize,
    nnz: usize,
    bytes: &[u8],
    values: usize,
) -> Result<(), String> {
    let lengths = |expected_bytes: usize, expected_values: usize| {
        if bytes.len() != expected_bytes || values != expected_values {
            Err(format!(
                "payload holds {} bytes and {values} values, expected {expected_bytes} and \
                 {expected_values}",
                bytes.len()
            ))
        } else {
            Ok(())
        }
    };
    let in_tile = |what: &str, r: usize, c: usize| {
        if r >= h || c >= w {
            Err(format!("{what} is at ({r}, {c}), outside the {h}x{w} tile"))
        } else {
            Ok(())
        }
    };
    match format {
        TileFormat::Csr => {
            lengths(h + nnz.div_ceil(2), nnz)?;
            if bytes[0] != 0 {
                return Err(format!("row start 0 is {}, expected 0", bytes[0]));
            }
            let cols = PackedNibbles::new(&bytes[h..]);
            for r in 0..h {
                let start = usize::from(bytes[r]);
                let end = if r + 1 < h {
                    usize::from(bytes[r + 1])
                } else {
                    nnz
                };
                if end < start || end > nnz {
                    return Err(format!(
                        "row {r} spans entries {start}..{end}, which is reversed or past the \
                         tile's {nnz} entries"
                    ));
                }
                for k in start..end {
                    let c = cols.get(k);
                    in_tile(&format!("entry {k}"), r, c)?;
                    increasing((k > start).then(|| cols.get(k - 1)), c, r, k)?;
                }
            }
            unused_nibble_clear(cols.as_bytes(), nnz)
        }
        TileFormat::Coo => {
            lengths(nnz, nnz)?;
            check_coo(bytes, |_, _, _| Ok(()), &in_tile)
        }
        TileFormat::Ell | TileFormat::Hyb => {
            let k = match bytes.first() {
                Some(&k) => usize::from(k),
                None => return Err("payload has no ELL width byte".to_string()),
            };
            if k > w || (k == 0 && format == TileFormat::Hyb) {
                return Err(format!("ELL width {k} is outside 1..={w}"));
            }
            let ell_len = ell_bytes(k, h);
            if bytes.len() < ell_len {
                return lengths(ell_len, k * h);
            }
            let masks: Vec<u16> = (0..k).map(|j| read_u16(bytes, 1 + 2 * j)).collect();
            let ell_nnz: usize = masks.iter().map(|m| m.count_ones() as usize).sum();
            let coo_len = bytes.len() - ell_len;
            if format == TileFormat::Ell {
                lengths(ell_len, k * h)?;
            } else {
                lengths(ell_len + coo_len, k * h + coo_len)?;
            }
            let cols = PackedNibbles::new(&bytes[1 + 2 * k..ell_len]);
            let mut last_col: [Option<usize>; TILE] = [None; TILE];
            for (j, &mask) in masks.iter().enumerate() {
                if u32::from(mask) >> h != 0 {
                    return Err(format!("slot mask {j} marks a row outside the tile's {h}"));
                }
                let previous = if j == 0 { u16::MAX } else { masks[j - 1] };
                if mask & !previous != 0 || (j + 1 == k && mask == 0) {
                    return Err(format!(
                        "slot mask {j} is {mask:#06x}: each row's real slots must be a prefix \
                         and the last slot column must hold an entry"
                    ));
                }
                for r in bit_indices(mask) {
                    let slot = j * h + r;
                    let c = cols.get(slot);
                    in_tile(&format!("ELL slot {slot}"), r, c)?;
                    increasing(last_col[r], c, r, slot)?;
                    last_col[r] = Some(c);
                }
            }
            if ell_nnz + coo_len != nnz {
                return Err(format!(
                    "holds {} entries, expected {nnz}",
                    ell_nnz + coo_len
                ));
            }
            let full_rows = masks.last().copied().unwrap_or(0);
            check_coo(
                &bytes[ell_len..],
                |k, r, c| {
                    if full_rows >> r & 1 == 0 {
                        return Err(format!(
                            "COO entry {k} is in row {r}, whose ELL part is not full"
                        ));
                    }
                    increasing(last_col[r], c, r, k)
                },
                &in_tile,
            )
        }
        TileFormat::Dense => {
            lengths((h * w).div_ceil(8), h * w)?;
            let set: usize = bytes.iter().map(|b| b.count_ones() as usize).sum();
            if let Some(bit) = (h * w..bytes.len() * 8).find(|&b| mask_bit(bytes, b)) {
                return Err(format!(
                    "occupancy bit {bit} is set, outside the {h}x{w} tile"
                ));
            }
            if set != nnz {
                return Err(format!(
                    "occupancy mask marks {set} entries, expected {nnz}"
                ));
            }
            Ok(())
        }
        TileFormat::DenseRow | TileFormat::DenseCol => {
            let (extent, line) = if format == TileFormat::DenseRow {
                (h, w)
            } else {
                (w, h)
            };
            if bytes.len() != 2 {
                return lengths(2, nnz);
            }
            let mask = read_u16(bytes, 0);
            if u32::from(mask) >> extent != 0 {
                return Err(format!(
                    "mask {mask:#06x} marks a line outside the tile's {extent}"
                ));
            }
            let full = mask.count_ones() as usize;
            if full * line != nnz {
                return Err(format!(
                    "{full} full lines of {line} hold {} entries, expected {nnz}",
                    full * line
                ));
            }
            lengths(2, nnz)
        }
    }
}

fn increasing(previous: Option<usize>, c: usize, r: usize, entry: usize) -> Result<(), String> {
    match previous {
        Some(p) if c <= p => Err(format!(
            "entry {entry} of row {r}: column {c} follows column {p} (columns must increase)"
        )),
        _ => Ok(()),
    }
}

fn unused_nibble_clear(nibbles: &[u8], count: usize) -> Result<(), String> {
    if count % 2 == 1 && nibbles[count / 2] >> 4 != 0 {
        return Err("the unused high nibble of the last column byte is not zero".to_string());
    }
    Ok(())
}

/// COO positions: inside the tile, strictly increasing in row-major order, and accepted by
/// `entry_ok(entry, row, col)`.
fn check_coo(
    positions: &[u8],
    entry_ok: impl Fn(usize, usize, usize) -> Result<(), String>,
    in_tile: &impl Fn(&str, usize, usize) -> Result<(), String>,
) -> Result<(), String> {
    for (k, &p) in positions.iter().enumerate() {
        let (r, c) = unpack_position(p);
        in_tile(&format!("COO entry {k}"), r, c)?;
        if k > 0 && p <= positions[k - 1] {
            return Err(format!(
                "COO entry {k} at ({r}, {c}) does not follow the previous one in row-major order"
            ));
        }
        entry_ok(k, r, c)?;
    }
    Ok(())
}
