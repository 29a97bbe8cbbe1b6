//! Kernel sources compiled with NVRTC for the device's architecture, cached on disk.
//!
//! Every kernel file is compiled as one module: the prelude (types, conversions, reductions)
//! followed by the file, whose templates are instantiated for each precision by macros at its
//! end. The PTX is cached under `SPARSE_KERNEL_CACHE_DIR` (default: the user cache directory),
//! keyed by a hash of the source, the options, the architecture and the NVRTC version, so a
//! process pays for NVRTC only the first time a kernel is used on a machine.

use std::path::PathBuf;

use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions};
use sparse_core::{BackendKind, Error, Result};

use crate::libraries::include_dir;
use crate::probe::load_nvrtc;

/// A kernel source file embedded in the binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSource {
    pub name: &'static str,
    pub code: &'static str,
}

const PRELUDE: &str = include_str!("../kernels/prelude.cuh");

/// Every kernel file of the backend.
pub mod sources {
    use super::KernelSource;

    pub const SPMV: KernelSource = KernelSource {
        name: "spmv",
        code: include_str!("../kernels/spmv.cu"),
    };

    pub const SPMM: KernelSource = KernelSource {
        name: "spmm",
        code: include_str!("../kernels/spmm.cu"),
    };

    pub const SDDMM: KernelSource = KernelSource {
        name: "sddmm",
        code: include_str!("../kernels/sddmm.cu"),
    };

    pub const BLAS1: KernelSource = KernelSource {
        name: "blas1",
        code: include_str!("../kernels/blas1.cu"),
    };

    pub const RODE: KernelSource = KernelSource {
        name: "rode",
        code: include_str!("../kernels/rode.cu"),
    };

    pub const FLASHSPARSE: KernelSource = KernelSource {
        name: "flashsparse",
        code: include_str!("../kernels/flashsparse.cu"),
    };

    pub const ALL: &[KernelSource] = &[SPMV, SPMM, SDDMM, BLAS1, RODE, FLASHSPARSE];
}

/// The environment variable that moves the on-disk kernel cache.
pub const CACHE_DIR_ENV: &str = "SPARSE_KERNEL_CACHE_DIR";

fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(CACHE_DIR_ENV) {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("sparse-blas").join("kernels")
}

/// FNV-1a: stable across builds and platforms, which a cache key must be.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &b in part.iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// `sm_XY` for a compute capability, as NVRTC spells the real architecture.
pub fn arch_name(compute_capability: (i32, i32)) -> &'static str {
    match compute_capability {
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (12, 0) => "sm_120",
        (major, minor) => Box::leak(format!("sm_{major}{minor}").into_boxed_str()),
    }
}

fn options(arch: &'static str) -> CompileOptions {
    CompileOptions {
        arch: Some(arch),
        include_paths: include_dir()
            .into_iter()
            .map(|d| d.display().to_string())
            .collect(),
        options: vec![
            "-std=c++17".into(),
            "-lineinfo".into(),
            "-default-device".into(),
        ],
        ..Default::default()
    }
}

fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (checked by the caller) and writes two ints.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    format!("{major}.{minor}")
}

/// PTX for `source` on `arch`, from the disk cache or NVRTC. A compile error carries NVRTC's log.
pub fn compile(source: KernelSource, arch: &'static str) -> Result<String> {
    load_nvrtc()?;
    let code = format!("{PRELUDE}\n#line 1 \"{}.cu\"\n{}", source.name, source.code);
    let opts = options(arch);
    let key = fnv1a(&[
        code.as_bytes(),
        format!("{:?}", opts.options).as_bytes(),
        opts.include_paths.join(":").as_bytes(),
        arch.as_bytes(),
        nvrtc_version().as_bytes(),
    ]);
    let path = cache_dir().join(format!("{}-{arch}-{key:016x}.ptx", source.name));
    if let Ok(ptx) = std::fs::read_to_string(&path) {
        return Ok(ptx);
    }
    let ptx = compile_ptx_with_opts(
        &code,
        CompileOptions {
            name: Some(format!("{}.cu", source.name)),
            ..opts
        },
    )
    .map_err(|e| compile_error(source.name, e))?
    .to_src();
    store(&path, &ptx);
    Ok(ptx)
}

/// Writes the cache entry atomically (temp file + rename); a cache that cannot be written only
/// costs a recompilation next time.
fn store(path: &PathBuf, ptx: &str) {
    let Some(dir) = path.parent() else { return };
    let tmp = dir.join(format!(
        ".{}.{}",
        std::process::id(),
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, ptx))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn compile_error(name: &str, e: CompileError) -> Error {
    let message = match e {
        CompileError::CompileError { log, .. } => format!(
            "NVRTC failed to compile {name}.cu:\n{}",
            log.to_string_lossy()
        ),
        other => format!("NVRTC failed on {name}.cu: {other:?}"),
    };
    Error::Device {
        backend: BackendKind::Cuda,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_keys_are_stable_and_sensitive() {
        assert_eq!(fnv1a(&[b"a", b"b"]), fnv1a(&[b"a", b"b"]));
        assert_ne!(fnv1a(&[b"ab"]), fnv1a(&[b"a", b"b"]));
    }

    #[test]
    fn arch_names() {
        assert_eq!(arch_name((9, 0)), "sm_90");
        assert_eq!(arch_name((7, 5)), "sm_75");
    }
}
