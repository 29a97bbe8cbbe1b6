//! What a benchmark needs to time device work honestly: CUDA events recorded on the backend's
//! stream (so a time covers the device's work, not the host's launches), an L2 flush (so a
//! matrix that fits in the cache is not timed from it), and the device's copy bandwidth (the
//! practical ceiling that bandwidth fractions are stated against).

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{result, CudaEvent, CudaSlice, DevicePtrMut};
use sparse_core::{Error, Result};

use crate::device::{driver_error, Device};
use crate::executor::CudaBackend;

/// Any byte but zero: a memory system may treat zeros specially, and a benchmark must not.
const FILL_BYTE: u8 = 0xA5;

/// Times work on the stream of a [`CudaBackend`] (and of every backend sharing its device,
/// such as [`crate::CusparseBackend::sharing`]) with a pair of CUDA events.
pub struct DeviceTimer {
    device: Arc<Device>,
    start: CudaEvent,
    stop: CudaEvent,
    l2_bytes: usize,
    /// Twice the L2, written in full by [`DeviceTimer::flush_l2`]; allocated on first use.
    flush: Option<CudaSlice<u8>>,
}

impl DeviceTimer {
    pub fn new(backend: &CudaBackend) -> Result<Self> {
        let device = backend.device().clone();
        let event = || {
            device
                .ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| driver_error("creating a timing event", e))
        };
        let (start, stop) = (event()?, event()?);
        let l2 = device
            .ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(|e| driver_error("reading the L2 cache size", e))?;
        Ok(DeviceTimer {
            l2_bytes: usize::try_from(l2).unwrap_or(0),
            device,
            start,
            stop,
            flush: None,
        })
    }

    /// Bytes of the device's L2 cache.
    pub fn l2_bytes(&self) -> usize {
        self.l2_bytes
    }

    /// Marks the start of the timed work: everything submitted to the stream after this call.
    pub fn start(&self) -> Result<()> {
        self.start
            .record(&self.device.stream)
            .map_err(|e| driver_error("recording the start event", e))
    }

    /// The device time from [`DeviceTimer::start`] to now, once the device has done the work
    /// submitted in between (waits for it).
    pub fn stop(&self) -> Result<Duration> {
        self.stop
            .record(&self.device.stream)
            .map_err(|e| driver_error("recording the stop event", e))?;
        let ms = self
            .start
            .elapsed_ms(&self.stop)
            .map_err(|e| driver_error("reading the elapsed time", e))?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    /// Evicts the L2 cache by writing twice its size on the stream: what runs next reads its
    /// operands from device memory. Call it before [`DeviceTimer::start`] so its own time is
    /// not counted.
    pub fn flush_l2(&mut self) -> Result<()> {
        let bytes = (2 * self.l2_bytes).max(1);
        let flush = match self.flush.take() {
            Some(buffer) => buffer,
            None => self.alloc(bytes)?,
        };
        let flush = self.flush.insert(flush);
        fill(&self.device, flush)
    }

    /// Device-to-device copy bandwidth in bytes per second, counting bytes read plus bytes
    /// written: the median of `copies` timed copies of a `bytes` buffer (after one untimed
    /// copy), each timed with the events.
    pub fn copy_bandwidth(&self, bytes: usize, copies: usize) -> Result<f64> {
        let bytes = bytes.max(1);
        let mut src = self.alloc(bytes)?;
        let mut dst = self.alloc(bytes)?;
        fill(&self.device, &mut src)?;
        let copy = |dst: &mut CudaSlice<u8>| {
            self.device
                .stream
                .memcpy_dtod(&src, dst)
                .map_err(|e| driver_error("copying on the device", e))
        };
        copy(&mut dst)?;
        let mut times = Vec::with_capacity(copies.max(1));
        for _ in 0..copies.max(1) {
            self.start()?;
            copy(&mut dst)?;
            times.push(self.stop()?.as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        if median > 0.0 {
            Ok(2.0 * bytes as f64 / median)
        } else {
            Err(Error::invalid(
                "the timed device copies took no measurable time",
            ))
        }
    }

    fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        // SAFETY: the buffer is written in full by `fill` or a copy before anything reads it.
        unsafe { self.device.stream.alloc::<u8>(bytes) }.map_err(|e| {
            self.device
                .alloc_error("allocating a timing buffer", bytes, e)
        })
    }
}

/// Writes [`FILL_BYTE`] over all of `buffer` on the device's stream.
fn fill(device: &Device, buffer: &mut CudaSlice<u8>) -> Result<()> {
    let bytes = buffer.len();
    let (ptr, _written) = buffer.device_ptr_mut(&device.stream);
    // SAFETY: `ptr` addresses `bytes` bytes of this context's memory, and the memset is ordered
    // on the stream that every other use of the buffer runs on.
    unsafe { result::memset_d8_async(ptr, FILL_BYTE, bytes, device.stream.cu_stream()) }
        .map_err(|e| driver_error("filling a device buffer", e))
}
