//! How one kernel is timed, and the ceilings its figures are stated against.
//!
//! 1. Warm-up: runs in doubling chunks until the warm-up time has passed (so every kernel
//!    faster than warm-up/100 runs at least 100 times first).
//! 2. Batch: the number of calls between one pair of clock readings, chosen from the warm-up so
//!    that a batch lasts at least the batch time; short kernels are not timed one launch at a
//!    time. With the L2 flushed the batch is one call.
//! 3. Samples: `samples` batches, each giving a time per call; reported are the median, the
//!    quartiles and the minimum. A kernel stops early at the time limit (warm-up included).
//!
//! On a GPU the clock is a pair of CUDA events on the backend's stream, so a time is the
//! device's; the L2 flush runs before the start event, outside the time. On the CPU it is the
//! host clock (the runners are synchronous), and caches are left warm.

use std::time::{Duration, Instant};

use sparse_blas::{DeviceTimer, Result};

use crate::args::Method;

/// Where times come from.
pub enum Clock {
    /// The host clock, for kernels that run on the host.
    Host { started: Instant },
    /// CUDA events on the stream shared by the cuda and cusparse backends.
    Device(DeviceTimer),
}

/// Bytes per buffer of the device copy-bandwidth measurement: far past any L2.
const DEVICE_COPY_BYTES: usize = 512 << 20;
/// Least bytes per buffer of the host copy-bandwidth measurement (at least 4x the LLC).
const HOST_COPY_BYTES: usize = 256 << 20;
/// Last-level cache assumed when the host does not report one.
const FALLBACK_LLC_BYTES: usize = 32 << 20;
/// Most calls in one batch or warm-up chunk (a u32 divisor, and a bound on a no-op kernel).
const MAX_BATCH: usize = 1 << 20;

impl Clock {
    pub fn host() -> Self {
        Clock::Host {
            started: Instant::now(),
        }
    }

    fn start(&mut self) -> Result<()> {
        match self {
            Clock::Host { started } => {
                *started = Instant::now();
                Ok(())
            }
            Clock::Device(timer) => timer.start(),
        }
    }

    fn stop(&mut self) -> Result<Duration> {
        match self {
            Clock::Host { started } => Ok(started.elapsed()),
            Clock::Device(timer) => timer.stop(),
        }
    }

    /// Whether this clock evicts its cache between samples of a small working set.
    pub fn flushes(&self) -> bool {
        matches!(self, Clock::Device(_))
    }

    fn flush(&mut self) -> Result<()> {
        match self {
            Clock::Host { .. } => Ok(()),
            Clock::Device(timer) => timer.flush_l2(),
        }
    }

    /// The cache a working set must exceed to be timed from memory: the device's L2, or the
    /// host's last-level cache.
    pub fn cache_bytes(&self) -> usize {
        match self {
            Clock::Host { .. } => host_llc_bytes().unwrap_or(FALLBACK_LLC_BYTES),
            Clock::Device(timer) => timer.l2_bytes(),
        }
    }

    /// Copy bandwidth in bytes per second (read plus written): device-to-device on the GPU,
    /// a parallel memcpy on the host, each over buffers far larger than the cache.
    pub fn copy_bandwidth(&mut self, quick: bool) -> Result<f64> {
        let copies = if quick { 3 } else { 20 };
        match self {
            Clock::Host { .. } => {
                let bytes = HOST_COPY_BYTES.max(4 * self.cache_bytes());
                Ok(benches::host_copy_bandwidth(bytes, copies))
            }
            Clock::Device(timer) => {
                let bytes = DEVICE_COPY_BYTES.max(8 * timer.l2_bytes());
                timer.copy_bandwidth(bytes, copies)
            }
        }
    }

    /// One line on how this clock times.
    pub fn describe(&self) -> &'static str {
        match self {
            Clock::Host { .. } => "host clock around synchronous calls; caches left warm",
            Clock::Device(_) => "CUDA events on the backend's stream",
        }
    }
}

/// The host's last-level cache, as Linux reports it.
fn host_llc_bytes() -> Option<usize> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut best: Option<(u32, usize)> = None;
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        let read = |name: &str| std::fs::read_to_string(path.join(name)).ok();
        let (Some(level), Some(size)) = (read("level"), read("size")) else {
            continue;
        };
        let (Ok(level), Some(bytes)) = (level.trim().parse::<u32>(), parse_size(size.trim()))
        else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, bytes));
        }
    }
    best.map(|(_, bytes)| bytes)
}

/// `32K`, `1024K`, `105M` as bytes.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: usize = digits.parse().ok()?;
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// The times of one kernel, per call.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub median: Duration,
    pub q1: Duration,
    pub q3: Duration,
    pub min: Duration,
    pub samples: usize,
    /// Calls per sample.
    pub batch: usize,
    /// The cache was flushed before each sample.
    pub flushed: bool,
    /// The time limit stopped the samples short.
    pub limited: bool,
}

/// Times `run` as the module describes; `flush` evicts the cache before each sample.
pub fn time(
    clock: &mut Clock,
    method: &Method,
    flush: bool,
    run: &mut dyn FnMut() -> Result<()>,
) -> Result<Timing> {
    let started = Instant::now();
    let out_of_time = || started.elapsed() >= method.time_limit;
    let mut batch = |clock: &mut Clock, calls: usize| -> Result<Duration> {
        clock.start()?;
        for _ in 0..calls {
            run()?;
        }
        Ok(clock.stop()? / calls as u32)
    };

    let mut chunk = 1usize;
    let per_call = loop {
        let per_call = batch(clock, chunk)?;
        if started.elapsed() >= method.warmup || out_of_time() {
            break per_call;
        }
        chunk = (2 * chunk).min(MAX_BATCH);
    };

    let calls = if flush {
        1
    } else {
        let wanted = method.batch.as_secs_f64() / per_call.as_secs_f64().max(1e-9);
        (wanted.ceil() as usize).clamp(1, MAX_BATCH)
    };
    let mut times = Vec::with_capacity(method.samples);
    while times.len() < method.samples {
        if flush {
            clock.flush()?;
        }
        times.push(batch(clock, calls)?);
        if out_of_time() {
            break;
        }
    }
    times.sort();
    let n = times.len();
    let median = if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2
    };
    Ok(Timing {
        median,
        q1: times[n / 4],
        q3: times[(3 * n) / 4],
        min: times[0],
        samples: n,
        batch: calls,
        flushed: flush,
        limited: n < method.samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("105M"), Some(105 << 20));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn a_kernel_gets_its_samples_and_a_batch_of_at_least_the_batch_time() {
        let method = Method {
            warmup: Duration::from_millis(5),
            samples: 7,
            batch: Duration::from_micros(200),
            time_limit: Duration::from_secs(10),
        };
        let mut calls = 0usize;
        let mut run = || {
            calls += 1;
            std::hint::black_box((0..200).sum::<u64>());
            Ok(())
        };
        let t = time(&mut Clock::host(), &method, false, &mut run).unwrap();
        assert_eq!(t.samples, 7);
        assert!(!t.limited && !t.flushed);
        assert!(t.batch > 1, "{t:?}");
        assert!(t.min <= t.q1 && t.q1 <= t.median && t.median <= t.q3);
        assert!(calls >= 7 * t.batch);
    }

    #[test]
    fn the_time_limit_stops_a_slow_kernel() {
        let method = Method {
            warmup: Duration::from_millis(1),
            samples: 1000,
            batch: Duration::from_micros(1),
            time_limit: Duration::from_millis(30),
        };
        let mut run = || {
            std::thread::sleep(Duration::from_millis(5));
            Ok(())
        };
        let t = time(&mut Clock::host(), &method, false, &mut run).unwrap();
        assert!(t.limited && t.samples < 1000 && t.samples >= 1, "{t:?}");
    }
}
