//! Run-time compilation of the kernel modules with NVRTC (loaded on first use, so machines
//! without CUDA build and run everything else).

use std::ffi::CString;

use cudarc::nvrtc::result::{self, NvrtcError};
use cudarc::nvrtc::sys;
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
    let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::Backend(format!("cuda: NVRTC could not report its version: {status:?}")));
    }
    Ok(format!("{major}.{minor}"))
}

/// Compiles `source` for `arch` (`sm_90`) into the GPU's own code (a CUBIN: the driver loads
/// it without compiling PTX again, which took ~11 s on an H100 whose driver cache was empty),
/// or an error with NVRTC's log.
pub fn compile(source: &str, arch: &str) -> Result<Vec<u8>> {
    if !available() {
        return Err(missing());
    }
    let text =
        CString::new(source).map_err(|_| Error::Backend("cuda: the kernel source contains a NUL byte".into()))?;
    let program = result::create_program(&text, None).map_err(|e| failed("creating the program", e))?;
    // SAFETY: `program` was just created and is destroyed once, below; `text` outlives it.
    let compiled = unsafe { compile_program(program, arch) };
    // SAFETY: as above.
    let destroyed = unsafe { result::destroy_program(program) };
    let cubin = compiled?;
    destroyed.map_err(|e| failed("releasing the program", e))?;
    Ok(cubin)
}

fn failed(what: &str, e: NvrtcError) -> Error {
    Error::Backend(format!("cuda: NVRTC failed {what}: {e:?}"))
}

/// Compiles `program` with [`options`] for `arch` and returns its CUBIN, or an error carrying
/// the compile log.
///
/// # Safety
/// `program` must be a live program from `create_program`.
unsafe fn compile_program(program: sys::nvrtcProgram, arch: &str) -> Result<Vec<u8>> {
    // SAFETY: the caller's contract.
    if unsafe { result::compile_program(program, &options(arch)) }.is_err() {
        // SAFETY: the caller's contract.
        let log = unsafe { result::get_program_log(program) }.map_err(|e| failed("reading the compile log", e))?;
        let log: Vec<u8> = log.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
        return Err(Error::Backend(format!(
            "cuda: NVRTC could not compile the kernels:\n{}",
            String::from_utf8_lossy(&log)
        )));
    }
    let mut size = 0usize;
    // SAFETY: the caller's contract; the call writes one size.
    let status = unsafe { sys::nvrtcGetCUBINSize(program, &mut size) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return Err(Error::Backend(format!("cuda: NVRTC made no CUBIN for the kernels ({status:?})")));
    }
    let mut cubin = vec![0u8; size];
    // SAFETY: the caller's contract; `cubin` holds the `size` bytes the call writes.
    let status = unsafe { sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast()) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(Error::Backend(format!("cuda: NVRTC could not hand over the CUBIN ({status:?})")));
    }
    Ok(cubin)
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
