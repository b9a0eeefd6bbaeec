//! The wgpu arena executor: runs plans on any GPU through wgpu, natively (Vulkan, Metal,
//! DX12) and in the browser (WebGPU).
//!
//! `compile` does all the allocation: a buffer per block the link layer placed values in
//! (the arena's blocks, no larger than one binding may be; each weight and constant; each
//! persistent buffer), one uniform buffer holding every dispatch's parameters (addressed by
//! dynamic offsets), staging buffers for readback, pipelines (cached by [`PipelineKey`]) and
//! bind groups. `run` only writes the inputs and the
//! runtime scalars, records the dispatches in one command encoder and reads back the outputs
//! asked for.

mod compile;
mod device;
mod kernel;
mod lower;
mod params;
mod run;
mod timing;

pub use device::{
    DEFAULT_MAX_BUFFER, DEFAULT_MAX_STORAGE_BINDING, MATRIX_SUBGROUP, WgpuBackend, WgpuOptions, buffer_limit,
    choose_adapter, instance, matrix_units,
};
pub use kernel::{BindingKind, Elem, InputAt, KernelSpec, PipelineKey, ScratchUse, WORKGROUP, grid};
pub use lower::{KernelCtx, Lowering, lower};
pub use params::{KernelParams, pack_dims};
/// The wgpu release this backend is built on, for callers that list adapters (`susurrus info`)
/// without naming a second copy of it.
pub use wgpu;
