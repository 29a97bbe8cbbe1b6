//! Finding the CUDA libraries and headers without help from the user.
//!
//! cudarc opens libraries by their sonames (`libnvrtc.so.13`, ...), which the dynamic loader
//! finds only on the library path. When that fails we open the same file by its absolute path
//! from the usual install locations and keep it loaded: a later open by soname then finds the
//! loaded copy, so cudarc's own loading succeeds with no environment variables set.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Install roots to search, most explicit first: `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda`,
/// versioned `/usr/local/cuda-*`, and pip's `nvidia/cu13` layout in the usual site directories.
pub fn install_roots() -> &'static [PathBuf] {
    static ROOTS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
            .iter()
            .filter_map(std::env::var_os)
            .map(PathBuf::from)
            .collect();
        roots.push(PathBuf::from("/usr/local/cuda"));
        roots.extend(matching_dirs(Path::new("/usr/local"), "cuda-"));
        for site in site_dirs() {
            roots.push(site.join("nvidia").join("cu13"));
        }
        roots.retain(|r| r.is_dir());
        roots.dedup();
        roots
    })
}

/// Python site directories where pip puts the `nvidia` wheels.
fn site_dirs() -> Vec<PathBuf> {
    let mut lib_dirs: Vec<PathBuf> =
        vec![PathBuf::from("/usr/local/lib"), PathBuf::from("/usr/lib")];
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV") {
        lib_dirs.push(PathBuf::from(venv).join("lib"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        let home = PathBuf::from(home);
        lib_dirs.push(home.join(".local/lib"));
        for version in matching_dirs(&home.join(".pyenv/versions"), "") {
            lib_dirs.push(version.join("lib"));
        }
    }
    let mut sites = Vec::new();
    for lib in lib_dirs {
        for python in matching_dirs(&lib, "python3") {
            sites.push(python.join("site-packages"));
            sites.push(python.join("dist-packages"));
        }
    }
    sites.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    sites
}

/// Subdirectories of `dir` whose names start with `prefix`, sorted newest-looking last.
fn matching_dirs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found
}

/// Directories that may hold the CUDA shared libraries (and the driver's, in containers).
fn library_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for root in install_roots() {
        for sub in [
            "lib64",
            "lib",
            "targets/x86_64-linux/lib",
            "targets/sbsa-linux/lib",
        ] {
            dirs.push(root.join(sub));
        }
    }
    for system in [
        "/usr/local/nvidia/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib/wsl/lib",
    ] {
        dirs.push(PathBuf::from(system));
    }
    dirs.retain(|d| d.is_dir());
    dirs
}

/// The first install root whose `include` holds the CUDA headers.
pub fn include_dir() -> Option<PathBuf> {
    install_roots()
        .iter()
        .flat_map(|r| [r.join("include"), r.join("targets/x86_64-linux/include")])
        .find(|d| d.join("cuda.h").is_file() || d.join("cuda_runtime.h").is_file())
}

/// Makes `lib{stem}` loadable by soname, opening it by path from the install locations if the
/// loader cannot find it. Returns the path opened, or `None` when no candidate opened.
pub fn ensure_loaded(stem: &str) -> Option<String> {
    for name in cudarc::get_lib_name_candidates(stem) {
        // SAFETY: loading a CUDA library runs its initialisers, which have no preconditions.
        if unsafe { libloading::Library::new(&name) }.is_ok() {
            return Some(name);
        }
    }
    let prefix = format!("lib{stem}.so");
    for dir in library_dirs() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            })
            .collect();
        files.sort();
        for file in files.iter().rev() {
            // SAFETY: as above.
            if let Ok(lib) = unsafe { libloading::Library::new(file) } {
                // Kept loaded for the life of the process so later opens by soname find it.
                std::mem::forget(lib);
                return Some(file.display().to_string());
            }
        }
    }
    None
}
