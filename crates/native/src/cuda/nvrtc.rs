//! Run-time compilation of the kernel module with NVRTC (loaded on first use, so machines
//! without CUDA build and run everything else).

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts};
use susurrus_core::{Error, Result};

/// True when the NVRTC library can be loaded.
pub fn available() -> bool {
    // SAFETY: only tries to open the library; no symbol is called.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// The error for a machine without NVRTC.
fn missing() -> Error {
    Error::Backend(
        "cuda: the runtime compiler NVRTC (libnvrtc.so) was not found; install the CUDA toolkit or put the \
         folder holding libnvrtc.so.13 on LD_LIBRARY_PATH"
            .into(),
    )
}

/// The options every compile passes, for `arch` (`sm_90`).
pub fn options(arch: &str) -> Vec<String> {
    vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()]
}

/// NVRTC's version, `major.minor` (part of a cached module's key: another compiler may emit
/// other PTX).
pub fn version() -> Result<String> {
    if !available() {
        return Err(missing());
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; the call writes two ints.
    let status = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status != cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::Backend(format!("cuda: NVRTC could not report its version: {status:?}")));
    }
    Ok(format!("{major}.{minor}"))
}

/// Compiles `source` to PTX for `arch` (`sm_90`), or an error with NVRTC's log.
pub fn compile(source: &str, arch: &str) -> Result<Ptx> {
    if !available() {
        return Err(missing());
    }
    if source.contains('\0') {
        return Err(Error::Backend("cuda: the kernel source contains a NUL byte".into()));
    }
    let options = CompileOptions { options: options(arch), ..Default::default() };
    compile_ptx_with_opts(source, options).map_err(|e| match e {
        CompileError::CompileError { log, .. } => {
            Error::Backend(format!("cuda: NVRTC could not compile the kernels:\n{}", log.to_string_lossy()))
        }
        other => Error::Backend(format!("cuda: NVRTC failed: {other:?}")),
    })
}

#[cfg(test)]
mod tests {
    /// NVRTC reports `major.minor` (CUDA 13's here: `scripts/setup.sh` installs it).
    #[test]
    fn version_is_major_dot_minor() {
        let version = super::version().unwrap_or_else(|e| panic!("{e}"));
        let parts: Vec<u32> = version.split('.').map(|p| p.parse().unwrap()).collect();
        assert_eq!(parts.len(), 2, "{version}");
        assert!(parts[0] >= 12, "{version}");
    }
}
