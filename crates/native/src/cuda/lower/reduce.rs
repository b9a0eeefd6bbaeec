//! (being written)

use susurrus_core::Result;
use susurrus_core::ops::*;

use super::{Launch, LowerCtx};
use crate::cuda::params::ParamsInfo;

pub(super) fn params() -> Vec<ParamsInfo> {
    Vec::new()
}
pub fn reduce(_op: &Reduce, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "reduce".into(), backend: "cuda".into() })
}
pub fn argmax(_op: &Argmax, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "argmax".into(), backend: "cuda".into() })
}
pub fn softmax(_op: &Softmax, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "softmax".into(), backend: "cuda".into() })
}
