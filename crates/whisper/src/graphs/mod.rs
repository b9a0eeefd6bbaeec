//! The model's graphs, built with the core's IR builder only (no backend named): the shared
//! layers, the encoder, the decoder step (greedy and beams) and its group form for batched
//! windows, the alignment graph for word timestamps, the on-device token selection, and the
//! one encoder layer `susurrus demo` plans.

pub mod align;
pub mod decoder;
pub mod demo;
pub mod encoder;
pub mod groups;
pub mod layers;
pub mod select;
