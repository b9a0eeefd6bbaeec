//! The op registry.
//!
//! Each op lives in its own file holding its semantics only: attribute struct, shape
//! inference, CPU reference implementation, builder method (`impl Graph { fn <op>(..) }`) and
//! unit tests against hand-computed values. The `registry!` list below is the one place that
//! names them all: it generates the [`Op`] enum, its dispatch and [`OpTag`], the registry
//! entries without attributes. Each backend's lowering (`susurrus_wgpu::lower`, the CUDA
//! lowering in `susurrus_cuda`) matches on [`Op`] exhaustively, and the test kit's cases on
//! [`OpTag`], so an op without them does not compile; an op file names no backend.

use crate::error::Result;
use crate::ir::TensorType;
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::fmt;

pub mod add_layer_norm;
pub mod argmax;
pub mod attention;
pub mod binary;
pub mod cast;
pub mod compare;
pub mod concat;
pub mod conv1d;
pub(crate) mod cpu_kernels;
pub mod fused_elementwise;
pub mod gather;
pub mod kv_write;
pub mod layer_norm;
pub mod leaf;
pub mod matmul;
pub mod matmul_bias;
pub mod permute;
pub mod reduce;
pub mod reshape;
pub mod scalar;
pub mod select;
pub mod slice;
pub mod softmax;
pub mod top_k;
pub mod unary;

pub use add_layer_norm::AddLayerNorm;
pub use argmax::Argmax;
pub use attention::{Attention, MaskKind};
pub use binary::{Binary, BinaryKind};
pub use cast::Cast;
pub use compare::{CmpKind, Compare};
pub use concat::Concat;
pub use conv1d::Conv1d;
pub use fused_elementwise::{FusedElementwise, Instr};
pub use gather::Gather;
pub use kv_write::KvWrite;
pub use layer_norm::LayerNorm;
pub use leaf::{Const, Input, Param, State};
pub use matmul::MatMul;
pub use matmul_bias::MatMulBias;
pub use permute::Permute;
pub use reduce::{Reduce, ReduceKind};
pub use reshape::Reshape;
pub use scalar::ScalarRead;
pub use select::Select;
pub use slice::Slice;
pub use softmax::Softmax;
pub use top_k::TopK;
pub use unary::{Unary, UnaryKind};

/// What a run supplies to the reference evaluation of an op.
pub struct EvalCtx<'a> {
    /// Run inputs by name.
    pub inputs: &'a HashMap<String, Tensor>,
    /// Weights by name.
    pub weights: &'a HashMap<String, Tensor>,
    /// Current contents of persistent buffers by name.
    pub states: &'a HashMap<String, Tensor>,
    /// Runtime scalar values, indexed by `ScalarId`.
    pub scalars: &'a [u32],
}

/// How an op's output may share storage with its inputs; the planner reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// The output needs its own buffer.
    Fresh,
    /// The output is input 0 itself: a reinterpretation (reshape) or an update of a
    /// persistent buffer (KV-cache write). No new storage.
    Alias,
    /// Elementwise: output element `i` depends only on element `i` of same-shaped inputs, so
    /// the output may take over the buffer of such an input that dies at this node.
    InPlace,
}

/// The behaviour every op provides. No method has a default: each op states all of it.
pub trait OpKind: Clone + fmt::Debug + PartialEq {
    /// Name used by the printer, errors and kernel lookup.
    fn name(&self) -> &'static str;
    /// Attributes as printed after the operands (`axis=1`), empty when there are none.
    fn attrs(&self) -> String;
    /// The output type for these input types, or an error that names the mismatch.
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType>;
    /// The CPU reference: plain, obviously right, the oracle for every backend.
    fn eval(&self, inputs: &[&Tensor], ctx: &EvalCtx) -> Result<Tensor>;
    /// Storage sharing the planner may use.
    fn memory(&self) -> Memory;
}

/// Generates [`Op`], its dispatch, and [`OpTag`] from the registry.
///
/// `leaves` are the ops whose values come from outside the computation; the op harness feeds
/// them rather than tests them. `ops` are the ops that compute.
macro_rules! registry {
    (
        leaves { $($(#[$leaf_doc:meta])* $leaf:ident($leaf_ty:ty),)* }
        ops { $($(#[$op_doc:meta])* $op:ident($module:ident::$op_ty:ident),)* }
    ) => {
        registry!(@enum $($(#[$leaf_doc])* $leaf($leaf_ty),)* $($(#[$op_doc])* $op($module::$op_ty),)*);

        impl OpTag {
            /// The registry entries the op harness tests, in registry order: every op but the
            /// leaves.
            pub const TESTED: &'static [OpTag] = &[$(OpTag::$op),*];
        }
    };
    (@enum $($(#[$doc:meta])* $variant:ident($ty:ty),)*) => {
        /// Every op the IR knows: primitives, leaves and the fused ops that passes emit.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Op {
            $($(#[$doc])* $variant($ty),)*
        }

        /// A registry entry without its attributes (`Unary`, `MatMul`), where [`Op::name`]
        /// tells kinds apart: what code that must handle every op matches on exhaustively.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum OpTag {
            $($variant,)*
        }

        impl OpTag {
            /// Every registry entry, in registry order.
            pub const ALL: &'static [OpTag] = &[$(OpTag::$variant),*];

            /// The entry's name as written in the registry.
            pub fn name(self) -> &'static str {
                match self { $(OpTag::$variant => stringify!($variant),)* }
            }
        }

        impl Op {
            pub fn name(&self) -> &'static str {
                match self { $(Op::$variant(o) => o.name(),)* }
            }
            pub fn attrs(&self) -> String {
                match self { $(Op::$variant(o) => o.attrs(),)* }
            }
            pub fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
                match self { $(Op::$variant(o) => o.infer(inputs),)* }
            }
            pub fn eval(&self, inputs: &[&Tensor], ctx: &EvalCtx) -> Result<Tensor> {
                match self { $(Op::$variant(o) => o.eval(inputs, ctx),)* }
            }
            pub fn memory(&self) -> Memory {
                match self { $(Op::$variant(o) => o.memory(),)* }
            }
            /// The registry entry this op is.
            pub fn tag(&self) -> OpTag {
                match self { $(Op::$variant(_) => OpTag::$variant,)* }
            }
        }

        $(impl From<$ty> for Op {
            fn from(o: $ty) -> Op { Op::$variant(o) }
        })*
    };
}

registry! {
    leaves {
        /// A named run-time input.
        Input(leaf::Input),
        /// A named weight.
        Param(leaf::Param),
        /// A constant tensor.
        Const(leaf::Const),
        /// A named persistent buffer.
        State(leaf::State),
    }
    ops {
        Unary(unary::Unary),
        Binary(binary::Binary),
        Compare(compare::Compare),
        Select(select::Select),
        Reduce(reduce::Reduce),
        Softmax(softmax::Softmax),
        LayerNorm(layer_norm::LayerNorm),
        MatMul(matmul::MatMul),
        Conv1d(conv1d::Conv1d),
        Reshape(reshape::Reshape),
        Permute(permute::Permute),
        Slice(slice::Slice),
        Concat(concat::Concat),
        Gather(gather::Gather),
        Cast(cast::Cast),
        Argmax(argmax::Argmax),
        /// The k largest values' indices along the last axis.
        TopK(top_k::TopK),
        KvWrite(kv_write::KvWrite),
        /// The value of a runtime scalar as a u32 tensor: a leaf, but one the harness tests.
        ScalarRead(scalar::ScalarRead),
        /// Fused: a chain of elementwise ops (emitted by the fusion pass).
        FusedElementwise(fused_elementwise::FusedElementwise),
        /// Fused: matmul + bias (+ GELU).
        MatMulBias(matmul_bias::MatMulBias),
        /// Fused: residual add + layer norm.
        AddLayerNorm(add_layer_norm::AddLayerNorm),
        /// Fused: scaled dot-product attention with optional mask.
        Attention(attention::Attention),
    }
}

impl Op {
    /// The name of an input, param or state leaf.
    pub fn leaf_name(&self) -> Option<&str> {
        match self {
            Op::Input(o) => Some(&o.name),
            Op::Param(o) => Some(&o.name),
            Op::State(o) => Some(&o.name),
            _ => None,
        }
    }

    /// True for nodes with no inputs whose value comes from outside the computation.
    pub fn is_leaf(&self) -> bool {
        matches!(self, Op::Input(_) | Op::Param(_) | Op::Const(_) | Op::State(_) | Op::ScalarRead(_))
    }

    /// True for ops that change persistent state and must run even when no output uses them.
    pub fn has_side_effects(&self) -> bool {
        matches!(self, Op::KvWrite(_))
    }
}

/// Checks the number of inputs of `op`.
pub(crate) fn expect_arity(op: &str, inputs: usize, want: usize) -> Result<()> {
    if inputs != want {
        return Err(crate::Error::shape(op, format!("takes {want} inputs, got {inputs}")));
    }
    Ok(())
}

/// Helpers for the per-op unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::HashMap;

    use super::{EvalCtx, Op};
    use crate::error::Result;
    use crate::tensor::Tensor;

    /// Infers `op`'s type from the inputs, evaluates it with no run context and checks that
    /// the result has the inferred type.
    pub fn eval_op(op: impl Into<Op>, inputs: &[&Tensor]) -> Result<Tensor> {
        eval_op_with_scalars(op, inputs, &[])
    }

    /// [`eval_op`] with runtime scalar values.
    pub fn eval_op_with_scalars(op: impl Into<Op>, inputs: &[&Tensor], scalars: &[u32]) -> Result<Tensor> {
        let op = op.into();
        let tys: Vec<_> = inputs.iter().map(|t| t.ty()).collect();
        let refs: Vec<_> = tys.iter().collect();
        let ty = op.infer(&refs)?;
        let empty = HashMap::new();
        let ctx = EvalCtx { inputs: &empty, weights: &empty, states: &empty, scalars };
        let out = op.eval(inputs, &ctx)?;
        assert_eq!(out.ty(), ty, "{} produced a value of another type than it inferred", op.name());
        Ok(out)
    }
}
