//! (being written)

use susurrus_core::Result;
use susurrus_core::ops::*;

use super::{Launch, LowerCtx};
use crate::cuda::params::ParamsInfo;

pub(super) fn params() -> Vec<ParamsInfo> {
    Vec::new()
}
pub fn permute(_op: &Permute, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "permute".into(), backend: "cuda".into() })
}
pub fn slice(_op: &Slice, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "slice".into(), backend: "cuda".into() })
}
pub fn concat(_op: &Concat, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "concat".into(), backend: "cuda".into() })
}
pub fn gather(_op: &Gather, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "gather".into(), backend: "cuda".into() })
}
pub fn kv_write(_op: &KvWrite, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "kv_write".into(), backend: "cuda".into() })
}
