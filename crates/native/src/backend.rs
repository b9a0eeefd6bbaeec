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
    /// wgpu (Vulkan, Metal, DX12) on the first adapter found, software adapters included.
    Wgpu,
    /// CUDA on the first NVIDIA GPU (kernels compiled with NVRTC, products on cuBLAS).
    Cuda,
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
        BackendChoice::Wgpu => Ok(Box::new(pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default()))?)),
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
