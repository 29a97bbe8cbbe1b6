//! How the windows are cut into warp-sized work (flashsparse.rs explains why): SpMM tasks of
//! consecutive windows or of one chunk of a long window, with workspace slots for the windows
//! cut in several, and SDDMM tiles of the vectors one MMA covers. Computed on the host from the
//! window pointers (a pass over `windows + 1` integers), then uploaded.

use cudarc::driver::CudaSlice;
use sparse_core::Result;

use crate::device::Device;
use crate::operand::to_u32;

/// Vectors per SpMM task at most: 32 blocks of 8 (f16) or 64 of 4 (tf32), the split of the
/// published balanced kernels. A window longer than a task is cut into chunks of the task
/// length, whole blocks each.
pub(crate) const TASK_VECTORS: u32 = 256;
/// ... and at least, for matrices too small to give every multiprocessor [`TASKS_PER_SM`] tasks
/// of [`TASK_VECTORS`]: shorter tasks split more windows, whose partial sums cost a second pass.
pub(crate) const MIN_TASK_VECTORS: u32 = 64;
/// Tasks per multiprocessor the task length is chosen to give: a few waves of warps, so that
/// their load latencies overlap.
const TASKS_PER_SM: u64 = 32;
/// Windows per task at most: a lane of the warp holds each window pointer of the task
/// (`FS_TASK_WINDOWS`).
pub(crate) const TASK_WINDOWS: u32 = 31;
/// A task that updates C itself (`FS_NONE` in flashsparse.cu).
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// Vectors per task for `vectors` in all on a device of `multiprocessors`: [`TASK_VECTORS`],
/// shorter (a multiple of 8, so of every block width) down to [`MIN_TASK_VECTORS`] when that
/// leaves fewer than [`TASKS_PER_SM`] tasks per multiprocessor.
pub(crate) fn task_vectors(vectors: u64, multiprocessors: u32) -> u32 {
    let per_task = vectors / (u64::from(multiprocessors.max(1)) * TASKS_PER_SM);
    (per_task.min(u64::from(TASK_VECTORS)) as u32 / 8 * 8).max(MIN_TASK_VECTORS)
}

/// The SpMM task lists, host side. A task is `windows[i]` consecutive whole windows from
/// `window[i]` (their vectors `start[i]..end[i]` summing to at most the task length), or one
/// chunk `start[i]..end[i]` of a longer window (`windows[i]` = 1), which has a workspace slot.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Tasks {
    pub window: Vec<u32>,
    pub windows: Vec<u32>,
    pub start: Vec<u32>,
    pub end: Vec<u32>,
    /// Workspace slot of a chunk of a split window, [`NO_SLOT`] otherwise.
    pub slot: Vec<u32>,
    /// Windows cut in several chunks, and the slot of their first chunk (the others follow).
    pub split_window: Vec<u32>,
    pub split_slot: Vec<u32>,
    /// Workspace slots in all.
    pub slots: u32,
}

impl Tasks {
    /// Every window belongs to a task, an empty one too: its rows of C still become beta * C.
    pub fn new(window_ptr: &[u32], task_len: u32) -> Self {
        let mut t = Tasks::default();
        // The open task: its first window and how many it holds.
        let mut open: Option<(u32, u32)> = None;
        for (w, pair) in window_ptr.windows(2).enumerate() {
            // Fits: the window count is at most the row count, a u32.
            let w = w as u32;
            let (start, end) = (pair[0], pair[1]);
            if end - start > task_len {
                t.close(open.take(), window_ptr);
                let parts = (end - start).div_ceil(task_len);
                t.split_window.push(w);
                t.split_slot.push(t.slots);
                for p in 0..parts {
                    let chunk = start + p * task_len;
                    t.push(w, 1, chunk, (chunk + task_len).min(end), t.slots + p);
                }
                t.slots += parts;
                continue;
            }
            open = match open {
                Some((first, count))
                    if count < TASK_WINDOWS && end - window_ptr[first as usize] <= task_len =>
                {
                    Some((first, count + 1))
                }
                other => {
                    t.close(other, window_ptr);
                    Some((w, 1))
                }
            };
        }
        t.close(open, window_ptr);
        t
    }

    fn push(&mut self, window: u32, windows: u32, start: u32, end: u32, slot: u32) {
        self.window.push(window);
        self.windows.push(windows);
        self.start.push(start);
        self.end.push(end);
        self.slot.push(slot);
    }

    fn close(&mut self, open: Option<(u32, u32)>, window_ptr: &[u32]) {
        if let Some((first, count)) = open {
            let (start, end) = (
                window_ptr[first as usize],
                window_ptr[(first + count) as usize],
            );
            self.push(first, count, start, end, NO_SLOT);
        }
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
                // Fits: as in Tasks::new.
                t.window.push(w as u32);
                t.start.push(start);
            }
        }
        t
    }
}

/// A host list on the device (one spare element when empty, so the pointer stays valid).
fn upload(device: &Device, host: &[u32]) -> Result<CudaSlice<u32>> {
    device.upload_converted(host, 0, |&v| v)
}

/// The length of a list, as the kernels count it.
fn count(host: &[u32]) -> Result<u32> {
    to_u32("FlashSparse work items", host.len())
}

/// The SpMM task lists on the device ([`Tasks`]), with their counts.
pub(crate) struct DeviceTasks {
    pub window: CudaSlice<u32>,
    pub windows: CudaSlice<u32>,
    pub start: CudaSlice<u32>,
    pub end: CudaSlice<u32>,
    pub slot: CudaSlice<u32>,
    pub split_window: CudaSlice<u32>,
    pub split_slot: CudaSlice<u32>,
    /// Tasks, split windows and workspace slots.
    pub count: u32,
    pub split: u32,
    pub slots: u32,
    /// Vectors per task, also the chunk length of split windows.
    pub len: u32,
}

impl DeviceTasks {
    pub fn upload(device: &Device, tasks: &Tasks, len: u32) -> Result<Self> {
        Ok(DeviceTasks {
            window: upload(device, &tasks.window)?,
            windows: upload(device, &tasks.windows)?,
            start: upload(device, &tasks.start)?,
            end: upload(device, &tasks.end)?,
            slot: upload(device, &tasks.slot)?,
            split_window: upload(device, &tasks.split_window)?,
            split_slot: upload(device, &tasks.split_slot)?,
            count: count(&tasks.window)?,
            split: count(&tasks.split_window)?,
            slots: tasks.slots,
            len,
        })
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        (5 * self.count as usize + 2 * self.split as usize) * size_of::<u32>()
    }
}

/// The SDDMM tiles on the device ([`Tiles`]).
pub(crate) struct DeviceTiles {
    pub window: CudaSlice<u32>,
    pub start: CudaSlice<u32>,
    pub count: u32,
}

impl DeviceTiles {
    pub fn upload(device: &Device, tiles: &Tiles) -> Result<Self> {
        Ok(DeviceTiles {
            window: upload(device, &tiles.window)?,
            start: upload(device, &tiles.start)?,
            count: count(&tiles.window)?,
        })
    }

    /// Bytes held on the device.
    pub fn bytes(&self) -> usize {
        2 * self.count as usize * size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_windows_share_tasks_and_long_ones_are_cut_into_slotted_chunks() {
        // Windows of 0, 3, 10, 4 and 1 vectors, tasks of 4.
        let t = Tasks::new(&[0, 0, 3, 13, 17, 18], 4);
        assert_eq!(t.window, vec![0, 2, 2, 2, 3, 4]);
        assert_eq!(t.windows, vec![2, 1, 1, 1, 1, 1]);
        assert_eq!(t.start, vec![0, 3, 7, 11, 13, 17]);
        assert_eq!(t.end, vec![3, 7, 11, 13, 17, 18]);
        assert_eq!(t.slot, vec![NO_SLOT, 0, 1, 2, NO_SLOT, NO_SLOT]);
        assert_eq!(
            (t.split_window, t.split_slot, t.slots),
            (vec![2], vec![0], 3)
        );
        // Many empty windows: at most TASK_WINDOWS per task.
        let empty = vec![0u32; 40];
        let t = Tasks::new(&empty, 4);
        assert_eq!(t.windows, vec![TASK_WINDOWS, 39 - TASK_WINDOWS]);
    }

    #[test]
    fn tasks_shorten_until_they_fill_the_device() {
        assert_eq!(task_vectors(0, 132), MIN_TASK_VECTORS);
        assert_eq!(task_vectors(132 * 32 * 100, 132), 96);
        assert_eq!(task_vectors(u64::MAX, 132), TASK_VECTORS);
        assert_eq!(task_vectors(u64::MAX, 0), TASK_VECTORS);
    }

    #[test]
    fn tiles_cover_each_window_without_crossing_it() {
        let t = Tiles::new(&[0, 0, 3, 20], 16);
        assert_eq!(t.window, vec![1, 2, 2]);
        assert_eq!(t.start, vec![0, 3, 19]);
    }
}
