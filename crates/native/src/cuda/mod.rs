//! The CUDA backend (being written).

pub mod lower;
mod nvrtc;
pub mod params;
pub mod source;
