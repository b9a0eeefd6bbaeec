//! Choosing and opening the backend a command runs on.

use susurrus_core::exec::Backend;
use susurrus_core::exec::wgpu::{WgpuBackend, WgpuOptions};

use crate::cuda::{CudaBackend, CudaOptions};
use crate::error::Result;

/// The `--backend` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// An NVIDIA GPU through CUDA when one opens, else a wgpu adapter when it is real
    /// hardware, else the fast CPU backend.
    Auto,
    /// The multi-threaded SIMD CPU backend.
    Cpu,
    /// wgpu (Vulkan, Metal, DX12) on the adapter wgpu prefers (or the first whose name
    /// contains `WGPU_ADAPTER_NAME`), software adapters included, with a warning.
    Wgpu,
    /// CUDA on the first NVIDIA GPU (kernels compiled with NVRTC, products on cuBLAS).
    Cuda,
}

/// Readies the process environment for the GPU drivers; call it first thing in `main`.
///
/// Mesa's Vulkan device-selection layer, loaded implicitly into every Vulkan process, asks
/// Wayland for the display's GPU, and libwayland prints `error: XDG_RUNTIME_DIR is invalid or
/// not set in the environment.` where that variable is unset (containers, cron jobs, ssh
/// sessions), once per Vulkan instance, on runs that succeed. Without a runtime folder there is
/// no Wayland session to ask, so the layer is switched off by its documented variable
/// `NODEVICE_SELECT`; wgpu still ranks the adapters itself (discrete GPUs first).
///
/// # Safety
///
/// Sets an environment variable: no other thread may exist yet (the start of `main`).
pub unsafe fn prepare_environment() {
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").map(std::path::PathBuf::from);
    if !runtime_dir.is_some_and(|dir| dir.is_absolute() && dir.is_dir())
        && std::env::var_os("NODEVICE_SELECT").is_none()
    {
        // SAFETY: the caller guarantees that no other thread runs.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

/// The CPU backend's threads for `--threads N`: more threads than cores only contend for
/// them (1000 on 2 cores made a 2.3 s transcription take over 90 s), so a larger count is
/// lowered to the core count, with a warning on stderr. `None`: one per core.
pub fn cpu_threads(requested: Option<u16>) -> Option<usize> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let requested = usize::from(requested?);
    if requested > cores {
        eprintln!("susurrus: warning: --threads {requested} is more than this machine's {cores} cores; using {cores}");
        return Some(cores);
    }
    Some(requested)
}

/// Opens the backend `choice` names. `threads` caps the CPU backend's threads (default: one
/// per core).
///
/// `Auto` first tries CUDA; then it opens the adapter the wgpu backend picks and keeps it when it is real hardware; a
/// software adapter (lavapipe, SwiftShader, WARP) runs the same work tens of times slower
/// than the CPU backend on the same cores, so then, or when no adapter opens, the CPU
/// backend runs.
pub fn open(choice: BackendChoice, threads: Option<usize>) -> Result<Box<dyn Backend>> {
    let cpu = || -> Result<Box<dyn Backend>> { Ok(Box::new(crate::cpu::FastCpuBackend::new(threads)?)) };
    match choice {
        BackendChoice::Cpu => cpu(),
        BackendChoice::Wgpu => {
            let gpu = pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default()))?;
            if gpu.is_software() {
                eprintln!(
                    "susurrus: warning: the wgpu adapter {} is software, on the CPU: it runs tens of times slower than \
                     --backend cpu (which --backend auto picks here)",
                    gpu.adapter()
                );
            }
            Ok(Box::new(gpu))
        }
        BackendChoice::Cuda => Ok(Box::new(CudaBackend::new(&CudaOptions::default())?)),
        BackendChoice::Auto => {
            if let Ok(cuda) = CudaBackend::new(&CudaOptions::default()) {
                return Ok(Box::new(cuda));
            }
            match pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())) {
                Ok(gpu) if !gpu.cpu_kernels() => Ok(Box::new(gpu)),
                _ => cpu(),
            }
        }
    }
}
