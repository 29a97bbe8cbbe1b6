//! Kernels compiled with NVRTC, one instantiation per module, cached on disk.
//!
//! A module is one [`KernelSpec`]: the prelude (types, conversions, loads), the parameter
//! structs of its file, the file, and the checks that the instantiation takes its parameter
//! struct, compiled with the file's `-D` constants. A plan compiles only the instantiations it
//! can launch, in parallel, so the first plan of a process pays for a few small compiles rather
//! than every precision and variant of a file.
//!
//! The target is machine code (CUBIN) for the device's own architecture, which the driver loads
//! without a JIT step; where NVRTC does not know the architecture, PTX for the newest one it
//! knows, which the driver compiles. The result is cached under `SPARSE_KERNEL_CACHE_DIR`
//! (default: the user cache directory), keyed by a hash of everything compiled, the options,
//! the target and the NVRTC version.

use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use cudarc::nvrtc::result::NvrtcError;
use cudarc::nvrtc::sys;
use sparse_core::{Error, Result};

use crate::kernel::KernelSpec;
use crate::libraries::include_dir;
use crate::probe::load_nvrtc;

const PRELUDE: &str = include_str!("../kernels/prelude.cuh");

/// The environment variable that moves the on-disk kernel cache.
pub const CACHE_DIR_ENV: &str = "SPARSE_KERNEL_CACHE_DIR";

/// What NVRTC produces for a device: machine code for its architecture, or PTX for the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// CUBIN for `sm_XY`, given as `10 * X + Y`.
    Cubin(u32),
    /// PTX for `compute_XY`.
    Ptx(u32),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Cubin(arch) => write!(f, "sm_{arch}"),
            Target::Ptx(arch) => write!(f, "compute_{arch}"),
        }
    }
}

impl Target {
    /// What to compile for a device of `compute_capability`: its own machine code when NVRTC
    /// knows the architecture, else PTX for the newest architecture NVRTC knows below it.
    pub fn for_device(compute_capability: (i32, i32)) -> Result<Self> {
        let (major, minor) = compute_capability;
        let arch = u32::try_from(10 * major + minor)
            .map_err(|_| Error::internal(format!("compute capability {major}.{minor}")))?;
        let known = supported_archs()?;
        if known.contains(&arch) {
            return Ok(Target::Cubin(arch));
        }
        known
            .iter()
            .copied()
            .filter(|&a| a <= arch)
            .max()
            .map(Target::Ptx)
            .ok_or_else(|| Error::DeviceUnavailable {
                backend: sparse_core::BackendKind::Cuda,
                reason: format!("NVRTC {} cannot compile for sm_{arch}", nvrtc_version()),
            })
    }
}

/// A compiled module: its image and the symbol of its one kernel.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// CUBIN bytes, or PTX text (NUL-terminated).
    pub image: Vec<u8>,
    /// The mangled name of the entry.
    pub symbol: String,
}

impl Compiled {
    /// The PTX text of a [`Target::Ptx`] compile.
    pub fn ptx(&self) -> &str {
        std::str::from_utf8(&self.image)
            .unwrap_or("")
            .trim_end_matches('\0')
    }
}

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

fn nvrtc_error(e: sys::nvrtcResult) -> Error {
    Error::Device {
        backend: sparse_core::BackendKind::Cuda,
        context: "NVRTC".into(),
        source: Box::new(NvrtcError(e)),
    }
}

fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (every caller checks first) and writes two ints.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    format!("{major}.{minor}")
}

/// The real architectures NVRTC can emit machine code for, e.g. `[75, 80, 86, 89, 90, ...]`.
pub fn supported_archs() -> Result<Vec<u32>> {
    load_nvrtc()?;
    static ARCHS: OnceLock<std::result::Result<Vec<u32>, sys::nvrtcResult>> = OnceLock::new();
    ARCHS
        .get_or_init(|| {
            let mut count = 0;
            // SAFETY: NVRTC is loaded; the array has the count it reported.
            unsafe {
                sys::nvrtcGetNumSupportedArchs(&mut count)
                    .result()
                    .map_err(|e| e.0)?;
                let mut archs = vec![0; usize::try_from(count).unwrap_or(0)];
                sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
                    .result()
                    .map_err(|e| e.0)?;
                Ok(archs
                    .into_iter()
                    .filter_map(|a| u32::try_from(a).ok())
                    .collect())
            }
        })
        .clone()
        .map_err(nvrtc_error)
}

/// The options of every compile: the file's defines, the target, the CUDA headers.
fn options(spec: &KernelSpec, target: Target) -> Vec<String> {
    let mut options = vec![
        "-std=c++17".to_string(),
        "-lineinfo".to_string(),
        "-default-device".to_string(),
        format!("-arch={target}"),
    ];
    options.extend(include_dir().map(|d| format!("-I{}", d.display())));
    // Values past i32 get an unsigned literal, as `0xffffffffu` in C: a plain literal that
    // large is a `long`, which would widen every comparison with it to 64 bits.
    options.extend(spec.defines().iter().map(|(name, value)| {
        let suffix = if i32::try_from(*value).is_err() {
            "u"
        } else {
            ""
        };
        format!("-D{name}={value}{suffix}")
    }));
    options
}

/// The translation unit of `spec`: prelude, parameter structs, the file, the checks.
fn unit(spec: &KernelSpec) -> String {
    format!(
        "{PRELUDE}\n{}\n#line 1 \"{}.cu\"\n{}\n{}",
        spec.header(),
        spec.source,
        spec.code(),
        spec.checks()
    )
}

/// `spec` compiled for `target`, from the disk cache or NVRTC; a compile error carries NVRTC's
/// log.
pub fn compile(spec: &KernelSpec, target: Target) -> Result<Compiled> {
    load_nvrtc()?;
    let code = unit(spec);
    let options = options(spec, target);
    let key = fnv1a(&[
        code.as_bytes(),
        spec.expression.as_bytes(),
        options.join(" ").as_bytes(),
        nvrtc_version().as_bytes(),
    ]);
    let path = cache_dir().join(format!("{}-{target}-{key:016x}.bin", spec.source));
    if let Some(compiled) = read_cached(&path) {
        return Ok(compiled);
    }
    let compiled = nvrtc(spec, &code, &options, target)?;
    store(&path, &compiled);
    Ok(compiled)
}

/// Every spec compiled for `target`, on as many threads as the machine has (NVRTC compiles
/// separate programs concurrently); the first error wins.
pub fn compile_all(specs: &[&KernelSpec], target: Target) -> Result<Vec<Compiled>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(specs.len());
    if threads <= 1 {
        return specs.iter().map(|s| compile(s, target)).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Compiled>>>> =
        Mutex::new((0..specs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(spec) = specs.get(i) else { break };
                let compiled = compile(spec, target);
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(compiled);
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(Error::internal("a kernel compile did not run"))))
        .collect()
}

/// A program destroyed on every path out of [`nvrtc`].
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed only here.
        unsafe { sys::nvrtcDestroyProgram(&mut self.0) };
    }
}

fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::internal(format!("{what} holds a NUL byte")))
}

fn nvrtc(spec: &KernelSpec, code: &str, options: &[String], target: Target) -> Result<Compiled> {
    let source = c_string("a kernel source", code)?;
    let name = c_string("a kernel file name", &format!("{}.cu", spec.source))?;
    let expression = c_string("a kernel name", &spec.expression)?;
    let options: Vec<CString> = options
        .iter()
        .map(|o| c_string("an NVRTC option", o))
        .collect::<Result<_>>()?;
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let mut raw = std::ptr::null_mut();
    // SAFETY: every pointer is a NUL-terminated string that outlives the program (the CStrings
    // above live to the end of this function, after the program is dropped); output buffers
    // are sized by the matching size queries.
    unsafe {
        sys::nvrtcCreateProgram(
            &mut raw,
            source.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
        .result()
        .map_err(|e| nvrtc_error(e.0))?;
        let program = Program(raw);
        sys::nvrtcAddNameExpression(program.0, expression.as_ptr())
            .result()
            .map_err(|e| nvrtc_error(e.0))?;
        let status = sys::nvrtcCompileProgram(
            program.0,
            i32::try_from(option_ptrs.len()).unwrap_or(i32::MAX),
            option_ptrs.as_ptr(),
        );
        if let Err(e) = status.result() {
            return Err(Error::Compile {
                kernel: format!("{} in {}.cu for {target}", spec.expression, spec.source),
                log: log(program.0),
                source: Box::new(e),
            });
        }
        let mut symbol = std::ptr::null();
        sys::nvrtcGetLoweredName(program.0, expression.as_ptr(), &mut symbol)
            .result()
            .map_err(|e| nvrtc_error(e.0))?;
        let symbol = CStr::from_ptr(symbol).to_string_lossy().into_owned();
        let mut size = 0;
        let image = match target {
            Target::Cubin(_) => {
                sys::nvrtcGetCUBINSize(program.0, &mut size)
                    .result()
                    .map_err(|e| nvrtc_error(e.0))?;
                let mut image = vec![0u8; size];
                sys::nvrtcGetCUBIN(program.0, image.as_mut_ptr().cast())
                    .result()
                    .map_err(|e| nvrtc_error(e.0))?;
                image
            }
            Target::Ptx(_) => {
                sys::nvrtcGetPTXSize(program.0, &mut size)
                    .result()
                    .map_err(|e| nvrtc_error(e.0))?;
                let mut image = vec![0u8; size];
                sys::nvrtcGetPTX(program.0, image.as_mut_ptr().cast())
                    .result()
                    .map_err(|e| nvrtc_error(e.0))?;
                image
            }
        };
        Ok(Compiled { image, symbol })
    }
}

/// The program's log.
///
/// # Safety
/// `program` is a live NVRTC program.
unsafe fn log(program: sys::nvrtcProgram) -> String {
    let mut size = 0;
    if sys::nvrtcGetProgramLogSize(program, &mut size)
        .result()
        .is_err()
    {
        return String::new();
    }
    let mut log = vec![0u8; size];
    if sys::nvrtcGetProgramLog(program, log.as_mut_ptr().cast())
        .result()
        .is_err()
    {
        return String::new();
    }
    String::from_utf8_lossy(&log)
        .trim_end_matches('\0')
        .to_string()
}

/// A cache entry: the symbol, a newline, the image.
fn read_cached(path: &Path) -> Option<Compiled> {
    let bytes = std::fs::read(path).ok()?;
    let newline = bytes.iter().position(|&b| b == b'\n')?;
    let symbol = std::str::from_utf8(&bytes[..newline]).ok()?.to_string();
    Some(Compiled {
        image: bytes[newline + 1..].to_vec(),
        symbol,
    })
}

/// Writes the cache entry atomically (temp file + rename); a cache that cannot be written only
/// costs a recompilation next time.
fn store(path: &Path, compiled: &Compiled) {
    let Some(dir) = path.parent() else { return };
    let tmp = dir.join(format!(
        ".{}.{:?}.{}",
        std::process::id(),
        std::thread::current().id(),
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let mut bytes = Vec::with_capacity(compiled.symbol.len() + 1 + compiled.image.len());
    bytes.extend_from_slice(compiled.symbol.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(&compiled.image);
    let written = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&tmp, &bytes))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
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
    fn targets_name_the_architecture() {
        assert_eq!(Target::Cubin(90).to_string(), "sm_90");
        assert_eq!(Target::Ptx(80).to_string(), "compute_80");
    }

    #[test]
    fn cache_entries_round_trip() {
        let dir = std::env::temp_dir().join(format!("sparse-cache-test-{}", std::process::id()));
        let path = dir.join("k.bin");
        let compiled = Compiled {
            image: vec![0, 10, 255, b'\n'],
            symbol: "_Z1kI".into(),
        };
        store(&path, &compiled);
        let read = read_cached(&path).unwrap();
        assert_eq!((read.image, read.symbol), (compiled.image, compiled.symbol));
        let _ = std::fs::remove_dir_all(dir);
    }
}
