//! How the windows are cut into warp-sized work (flashsparse.rs explains why): SpMM chunks of
//! at most [`CHUNK_VECTORS`] vectors, with workspace slots for the windows cut in several, and
//! SDDMM tiles of the vectors one MMA covers. Computed on the host from the window pointers
//! (a pass over `windows + 1` integers), then uploaded.

use cudarc::driver::CudaSlice;
use sparse_core::{Error, Result};

use crate::device::{driver_error, Device};

/// Vectors per SpMM chunk: 32 blocks of 8 (f16) or 64 of 4 (tf32), the split of the published
/// balanced kernels. A multiple of every block width, so chunks hold whole blocks.
pub(crate) const CHUNK_VECTORS: u32 = 256;
/// A chunk that updates C itself (`FS_NONE` in flashsparse.cu).
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// The SpMM chunk lists, host side.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Chunks {
    pub window: Vec<u32>,
    pub start: Vec<u32>,
    /// Workspace slot of a chunk of a split window, [`NO_SLOT`] otherwise.
    pub slot: Vec<u32>,
    /// Windows cut in several chunks, and the slot of their first chunk (the others follow).
    pub split_window: Vec<u32>,
    pub split_slot: Vec<u32>,
    /// Workspace slots in all.
    pub slots: u32,
}

impl Chunks {
    /// Every window gets at least one chunk, an empty one too: its rows of C still become
    /// beta * C.
    pub fn new(window_ptr: &[u32], chunk_len: u32) -> Self {
        let mut c = Chunks::default();
        for (w, pair) in window_ptr.windows(2).enumerate() {
            // Fits: the window count is at most the row count, a u32.
            let w = w as u32;
            let (start, end) = (pair[0], pair[1]);
            let parts = (end - start).div_ceil(chunk_len).max(1);
            if parts > 1 {
                c.split_window.push(w);
                c.split_slot.push(c.slots);
            }
            for p in 0..parts {
                c.window.push(w);
                c.start.push(start + p * chunk_len);
                c.slot.push(if parts > 1 { c.slots + p } else { NO_SLOT });
            }
            if parts > 1 {
                c.slots += parts;
            }
        }
        c
    }
}

/// The SDDMM tiles: `per_tile` consecutive vectors of one window each.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tiles {
    pub window: Vec<u32>,
    pub start: Vec<u32>,
}

impl Tiles {
    pub fn new(window_ptr: &[u32], per_tile: u32) -> Self {
        let mut t = Tiles::default();
        for (w, pair) in window_ptr.windows(2).enumerate() {
            for start in (pair[0]..pair[1]).step_by(per_tile as usize) {
                // Fits: as in Chunks::new.
                t.window.push(w as u32);
                t.start.push(start);
            }
        }
        t
    }
}

/// A host list on the device (one spare element when empty, so the pointer stays valid), and
/// its length as the kernels' count.
pub(crate) fn upload(device: &Device, host: &[u32]) -> Result<(CudaSlice<u32>, u32)> {
    let len = u32::try_from(host.len())
        .map_err(|_| Error::overflow::<u32>("FlashSparse work items", host.len()))?;
    let padded: &[u32] = if host.is_empty() { &[0] } else { host };
    let slice = device
        .stream
        .clone_htod(padded)
        .map_err(|e| driver_error("copying FlashSparse work lists", e))?;
    Ok((slice, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_windows_are_cut_into_slotted_chunks() {
        // Windows of 0, 3, 10 and 4 vectors, chunks of 4.
        let c = Chunks::new(&[0, 0, 3, 13, 17], 4);
        assert_eq!(c.window, vec![0, 1, 2, 2, 2, 3]);
        assert_eq!(c.start, vec![0, 0, 3, 7, 11, 13]);
        assert_eq!(c.slot, vec![NO_SLOT, NO_SLOT, 0, 1, 2, NO_SLOT]);
        assert_eq!(
            (c.split_window, c.split_slot, c.slots),
            (vec![2], vec![0], 3)
        );
    }

    #[test]
    fn tiles_cover_each_window_without_crossing_it() {
        let t = Tiles::new(&[0, 0, 3, 20], 16);
        assert_eq!(t.window, vec![1, 2, 2]);
        assert_eq!(t.start, vec![0, 3, 19]);
    }
}
