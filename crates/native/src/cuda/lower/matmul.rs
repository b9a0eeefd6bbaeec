//! (being written)

use susurrus_core::Result;
use susurrus_core::ops::*;

use super::{Launch, LowerCtx};
use crate::cuda::params::ParamsInfo;

pub(super) fn params() -> Vec<ParamsInfo> {
    Vec::new()
}
pub fn matmul(_op: &MatMul, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "matmul".into(), backend: "cuda".into() })
}
pub fn matmul_bias(_op: &MatMulBias, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "matmul_bias".into(), backend: "cuda".into() })
}
