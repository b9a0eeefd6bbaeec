//! (being written)

use susurrus_core::Result;
use susurrus_core::ops::*;

use super::{Launch, LowerCtx};
use crate::cuda::params::ParamsInfo;

pub(super) fn params() -> Vec<ParamsInfo> {
    Vec::new()
}
pub fn conv1d(_op: &Conv1d, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "conv1d".into(), backend: "cuda".into() })
}
