//! Choosing and opening the backend a command runs on.

use susurrus_core::exec::Backend;
use susurrus_core::exec::wgpu::{WgpuBackend, WgpuOptions};

use crate::error::Result;

/// The `--backend` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// A GPU adapter when one is real hardware, else the fast CPU backend.
    Auto,
    /// The multi-threaded SIMD CPU backend.
    Cpu,
    /// wgpu (Vulkan, Metal, DX12) on the first adapter found, software adapters included.
    Wgpu,
}

/// Opens the backend `choice` names. `threads` caps the CPU backend's threads (default: one
/// per core).
pub fn open(choice: BackendChoice, threads: Option<usize>) -> Result<Box<dyn Backend>> {
    match choice {
        BackendChoice::Cpu | BackendChoice::Auto => Ok(Box::new(crate::cpu::FastCpuBackend::new(threads)?)),
        BackendChoice::Wgpu => Ok(Box::new(pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default()))?)),
    }
}
