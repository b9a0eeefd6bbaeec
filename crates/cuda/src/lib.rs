//! The CUDA backend: the same plans as every backend (same IR, passes and arena plan), run
//! by kernels written in CUDA C (`kernels/`) and compiled at run time with NVRTC for the
//! device at hand, with products on cuBLAS.
//!
//! - `device.rs` opens the driver, a context and stream, compiles the module and starts
//!   cuBLAS (`blas.rs`); the libraries are loaded at run time, so this crate builds and its
//!   host-side tests run where there is no CUDA, and a missing driver or device is an error.
//! - `layout.rs` packs the blocks the link layer (`susurrus_core::exec::link`) placed every
//!   value in: one device allocation for the weights and constants of all linked plans
//!   (uploaded once), one for the persistent buffers, one per plan for its arena (followed by
//!   the run's runtime scalars); `compile.rs` adds a scratch block.
//! - `lower/` turns each op into kernel launches and cuBLAS products with every address
//!   resolved; `params.rs` derives each kernel's parameter struct for Rust and C alike;
//!   `source.rs` assembles the module.
//! - `compile.rs` allocates and uploads, `run.rs` runs: inputs and scalars up through pinned
//!   memory, the recorded work (replayed as a CUDA graph from the second run on), and only the
//!   requested outputs back.

mod blas;
mod compile;
mod device;
mod kernel_cache;
pub mod layout;
pub mod lower;
mod nvrtc;
pub mod params;
mod run;
pub mod source;

pub use compile::{lower_program, needs, plan_options};
pub use device::{CudaBackend, CudaOptions};
pub use kernel_cache::KernelCache;
pub use lower::Precision;

use susurrus_core::Result;
use susurrus_core::exec::{BlockingBackend, Executable, Weights};
use susurrus_core::plan::Plan;

impl BlockingBackend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn compile_linked_now(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>> {
        compile::compile_linked(self, plans, weights)
    }

    fn with_f32_products(&self) -> Option<Box<dyn susurrus_core::exec::Backend>> {
        (self.precision == Precision::F16).then(|| Box::new(self.with_precision(Precision::F32)) as _)
    }

    /// Never in this process: a context that met a sticky error poisons the process (a new
    /// context, or the primary one reset, fails with the same error), so the work goes on in a
    /// new one ([`susurrus_core::Error::DeviceLostToProcess`]; the command hands over to one).
    fn reopen_now(&self) -> Result<Box<dyn susurrus_core::exec::Backend>> {
        Err(susurrus_core::Error::DeviceLostToProcess(
            "a CUDA context that met a sticky error cannot be used again, nor another opened, in the same process"
                .into(),
        ))
    }

    fn lose_device(&self) -> Result<()> {
        self.trap()
    }
}
