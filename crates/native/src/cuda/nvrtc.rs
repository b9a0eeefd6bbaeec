//! Run-time compilation of the kernel module with NVRTC (loaded on first use, so machines
//! without CUDA build and run everything else).

use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx_with_opts};
use susurrus_core::{Error, Result};

/// True when the NVRTC library can be loaded.
pub fn available() -> bool {
    // SAFETY: only tries to open the library; no symbol is called.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles `source` to PTX for `arch` (`sm_90`), or an error with NVRTC's log.
pub fn compile(source: &str, arch: &str) -> Result<Ptx> {
    if !available() {
        return Err(Error::Backend(
            "cuda: the runtime compiler NVRTC (libnvrtc.so) was not found; install the CUDA toolkit or put the \
             folder holding libnvrtc.so.13 on LD_LIBRARY_PATH"
                .into(),
        ));
    }
    if source.contains('\0') {
        return Err(Error::Backend("cuda: the kernel source contains a NUL byte".into()));
    }
    let options = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}"), "--std=c++17".into()],
        ..Default::default()
    };
    compile_ptx_with_opts(source, options).map_err(|e| match e {
        CompileError::CompileError { log, .. } => {
            Error::Backend(format!("cuda: NVRTC could not compile the kernels:\n{}", log.to_string_lossy()))
        }
        other => Error::Backend(format!("cuda: NVRTC failed: {other:?}")),
    })
}
