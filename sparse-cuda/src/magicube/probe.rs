//! The integer MMA rates of a device, measured: how many s8 (`m16n8k32`) and s4 (`m16n8k64`)
//! tensor-core operations per second a full device issues from registers. Ampere runs s4 at
//! twice the s8 rate; Hopper has no 4-bit tensor cores, and this is how to see what it does
//! with the 4-bit MMA instead (docs/integer.md).

use std::sync::Arc;

use cudarc::driver::LaunchConfig;
use sparse_core::Result;

use super::{SOURCE, THREADS, WARPS};
use crate::device::Device;
use crate::executor::CudaBackend;
use crate::kernel::{kernel_params, Entry, KernelSpec, MutPtr};
use crate::timing::DeviceTimer;

/// Independent MMAs a warp keeps in flight per round (`MC_PROBE_CHAINS`).
pub(super) const CHAINS: u32 = 4;
/// Rounds per warp: long enough that the launch costs nothing beside it.
const ITERATIONS: u32 = 1 << 14;
/// Blocks per multiprocessor: several, so the tensor pipes see warps from more than one.
const BLOCKS_PER_SM: u32 = 8;

kernel_params! {
    /// `mc_mma_probe<BITS>`: `iterations` rounds per warp; `out` written only if the sums
    /// equal `never` (which keeps the MMAs from being optimized away).
    pub(crate) struct McProbe {
        iterations: u32,
        never: u32,
        out: out(u32),
    }
}

fn entry(bits: u32) -> Result<Entry<McProbe>> {
    Entry::new(&SOURCE, "mc_mma_probe", &[&bits])
}

pub(super) fn all_specs() -> Result<Vec<KernelSpec>> {
    Ok(vec![entry(8)?.spec().clone(), entry(4)?.spec().clone()])
}

/// Integer tensor-core operations per second (2 per multiply-add) of a device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MmaRates {
    /// `mma.m16n8k32` with s8 operands.
    pub s8: f64,
    /// `mma.m16n8k64` with s4 operands.
    pub s4: f64,
}

/// Times each MMA width on the whole device (one warm-up launch, then one timed).
pub fn mma_rates(backend: &CudaBackend) -> Result<MmaRates> {
    let device: &Arc<Device> = backend.device();
    let (s8, s4) = (entry(8)?, entry(4)?);
    device.prepare(&[s8.spec(), s4.spec()])?;
    let out = device.alloc_zeros::<u32>(1, "allocating the probe's output")?;
    let timer = DeviceTimer::new(backend)?;
    let blocks = device.info.multiprocessors.max(1) * BLOCKS_PER_SM;
    let config = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let params = McProbe {
        iterations: ITERATIONS,
        never: 0x7eed_f00d,
        out: MutPtr::of(&out, device),
    };
    let mmas = f64::from(blocks) * f64::from(WARPS) * f64::from(ITERATIONS) * f64::from(CHAINS);
    let rate = |e: &Entry<McProbe>, k: f64| -> Result<f64> {
        let kernel = device.kernel(e)?;
        // SAFETY: the kernel writes at most out[0], an allocation of one u32.
        unsafe { kernel.launch(config, &params) }?;
        timer.start()?;
        // SAFETY: as above.
        unsafe { kernel.launch(config, &params) }?;
        let seconds = timer.stop()?.as_secs_f64();
        Ok(mmas * 2.0 * 16.0 * 8.0 * k / seconds.max(f64::MIN_POSITIVE))
    };
    Ok(MmaRates {
        s8: rate(&s8, 32.0)?,
        s4: rate(&s4, 64.0)?,
    })
}
