//! The bridge from ops to kernels: each op's file chooses its kernel through
//! `OpKind::kernel`; this module holds what that choice sees and returns.

use super::kernel::KernelSpec;
use crate::error::Result;
use crate::ir::TensorType;
use crate::ops::Op;

/// What an op's kernel choice may depend on.
pub struct KernelCtx<'a> {
    /// Input types, in the op's input order.
    pub inputs: &'a [&'a TensorType],
    /// The output type.
    pub output: &'a TensorType,
    /// The device reads f16 natively (`shader-f16`).
    pub f16: bool,
    /// The adapter is a CPU (lavapipe, SwiftShader): ops with a `*_cpu` kernel variant use it
    /// (no workgroup memory or barriers, register tiles read straight from storage; see
    /// `kernels/README.md`). The variants have their own kernel names, hence pipeline keys.
    pub cpu: bool,
}

/// What running an op on the GPU takes.
#[derive(Clone, Debug)]
pub enum Lowering {
    /// Nothing: the value is already where it belongs (leaves, views).
    Nothing,
    /// One kernel dispatch.
    Kernel(KernelSpec),
}

/// The lowering of `op`.
pub(super) fn lower(op: &Op, ctx: &KernelCtx) -> Result<Lowering> {
    op.kernel(ctx)
}
