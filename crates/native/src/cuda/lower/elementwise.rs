//! (being written)

use susurrus_core::Result;
use susurrus_core::ops::*;

use super::{Launch, LowerCtx};
use crate::cuda::params::ParamsInfo;

pub(super) fn params() -> Vec<ParamsInfo> {
    Vec::new()
}
pub fn unary(_op: &Unary, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "unary".into(), backend: "cuda".into() })
}
pub fn binary(_op: &Binary, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "binary".into(), backend: "cuda".into() })
}
pub fn compare(_op: &Compare, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "compare".into(), backend: "cuda".into() })
}
pub fn select(_op: &Select, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "select".into(), backend: "cuda".into() })
}
pub fn fused(_op: &FusedElementwise, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "fused".into(), backend: "cuda".into() })
}
pub fn cast(_op: &Cast, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "cast".into(), backend: "cuda".into() })
}
pub fn scalar(_op: &ScalarRead, _ctx: &LowerCtx) -> Result<Vec<Launch>> {
    Err(susurrus_core::Error::Unsupported { op: "scalar".into(), backend: "cuda".into() })
}
