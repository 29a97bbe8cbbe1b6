//! Whether a CUDA device can be used here, and why not: never a panic.

use std::sync::OnceLock;

use cudarc::driver::CudaContext;
use sparse_core::{BackendKind, Error, Result};

use crate::libraries::{ensure_loaded, install_roots};

/// What the probe found.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub memory_bytes: usize,
    /// Streaming multiprocessors: how much work a launch needs to fill the device.
    pub multiprocessors: u32,
    pub devices: usize,
}

impl DeviceInfo {
    /// e.g. `NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)`.
    pub fn summary(&self) -> String {
        let (major, minor) = self.compute_capability;
        format!(
            "{} (sm_{major}{minor}, {:.1} GiB)",
            self.name,
            self.memory_bytes as f64 / (1u64 << 30) as f64
        )
    }
}

fn unavailable(reason: String) -> Error {
    Error::DeviceUnavailable {
        backend: BackendKind::Cuda,
        reason,
    }
}

fn searched() -> String {
    let roots: Vec<String> = install_roots()
        .iter()
        .map(|r| r.display().to_string())
        .collect();
    if roots.is_empty() {
        "no CUDA install found (looked at CUDA_HOME, CUDA_PATH, /usr/local/cuda* and pip's nvidia/cu13)".to_string()
    } else {
        format!("searched the loader path and {}", roots.join(", "))
    }
}

/// Loads the libraries the backend needs (driver, NVRTC and its builtins); an error names the
/// one missing. Done once per process.
pub fn load_libraries() -> Result<()> {
    static LOADED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            if ensure_loaded("cuda").is_none() {
                return Err(format!(
                    "the NVIDIA driver library (libcuda.so.1) is not installed; {}",
                    searched()
                ));
            }
            // NVRTC opens its builtins library by soname: load it first from the same places.
            ensure_loaded("nvrtc-builtins");
            if ensure_loaded("nvrtc").is_none() {
                return Err(format!("NVRTC (libnvrtc.so) was not found; {}", searched()));
            }
            Ok(())
        })
        .clone()
        .map_err(unavailable)
}

/// NVRTC alone, for compiling kernels on a machine without a GPU.
pub fn load_nvrtc() -> Result<()> {
    static LOADED: OnceLock<bool> = OnceLock::new();
    let ok = *LOADED.get_or_init(|| {
        ensure_loaded("nvrtc-builtins");
        ensure_loaded("nvrtc").is_some()
    });
    if ok {
        Ok(())
    } else {
        Err(unavailable(format!(
            "NVRTC (libnvrtc.so) was not found; {}",
            searched()
        )))
    }
}

/// Checks that device `ordinal` can be used and describes it.
pub fn probe(ordinal: usize) -> Result<DeviceInfo> {
    load_libraries()?;
    let driver = |what: &str, e: cudarc::driver::DriverError| unavailable(format!("{what}: {e}"));
    let devices =
        CudaContext::device_count().map_err(|e| driver("the driver found no usable GPU", e))?;
    let devices = usize::try_from(devices).unwrap_or(0);
    if ordinal >= devices {
        return Err(unavailable(format!(
            "device {ordinal} requested, {devices} present"
        )));
    }
    let ctx = CudaContext::new(ordinal).map_err(|e| driver("creating a context failed", e))?;
    Ok(DeviceInfo {
        ordinal,
        name: ctx
            .name()
            .map_err(|e| driver("reading the device name failed", e))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(|e| driver("reading the compute capability failed", e))?,
        memory_bytes: ctx
            .total_mem()
            .map_err(|e| driver("reading the memory size failed", e))?,
        multiprocessors: ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(|e| driver("reading the multiprocessor count failed", e))?
            .max(1) as u32,
        devices,
    })
}
