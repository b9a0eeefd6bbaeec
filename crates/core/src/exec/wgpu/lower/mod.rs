//! Op lowering for wgpu: each scheduled op becomes the kernel it runs as — a kernel file from
//! `kernels/`, its `$KEY` placeholders, its parameter block and its workgroup counts — or
//! nothing, for values already where they belong. Lowering looks only at types, so it runs
//! (and is tested, down to naga validating the generated module) without a device.
//!
//! One file per op family, as the CUDA lowering has them: `elementwise` (unary, binary,
//! compare, where, fused programs, cast, scalar reads, and the WGSL expression of every
//! function), `layout` (leaves, reshape, permute, slice, concat, gather, KV writes), `reduce`
//! (reductions, argmax, softmax), `norm` (layer norms), `conv` (conv1d), `matmul` (matmul,
//! matmul + bias), `attention`.

pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod layout;
pub mod matmul;
pub mod norm;
pub mod reduce;

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

/// The lowering of `op`. The match names every op, so an op without a wgpu lowering does not
/// compile; limits (such as bindings per dispatch) are errors naming the op.
pub fn lower(op: &Op, ctx: &KernelCtx) -> Result<Lowering> {
    match op {
        Op::Input(_) | Op::Param(_) | Op::Const(_) | Op::State(_) | Op::Reshape(_) => Ok(Lowering::Nothing),
        Op::Unary(o) => elementwise::unary(o, ctx),
        Op::Binary(o) => elementwise::binary(o, ctx),
        Op::Compare(o) => elementwise::compare(o, ctx),
        Op::Select(o) => elementwise::select(o, ctx),
        Op::FusedElementwise(o) => elementwise::fused(o, ctx),
        Op::Cast(o) => elementwise::cast(o, ctx),
        Op::ScalarRead(o) => elementwise::scalar(o, ctx),
        Op::Permute(o) => layout::permute(o, ctx),
        Op::Slice(o) => layout::slice(o, ctx),
        Op::Concat(o) => layout::concat(o, ctx),
        Op::Gather(o) => layout::gather(o, ctx),
        Op::KvWrite(o) => layout::kv_write(o, ctx),
        Op::Reduce(o) => reduce::reduce(o, ctx),
        Op::Argmax(o) => reduce::argmax(o, ctx),
        Op::Softmax(o) => reduce::softmax(o, ctx),
        Op::LayerNorm(o) => norm::layer_norm(o, ctx),
        Op::AddLayerNorm(o) => norm::add_layer_norm(o, ctx),
        Op::Conv1d(o) => conv::conv1d(o, ctx),
        Op::MatMul(o) => matmul::matmul(o, ctx),
        Op::MatMulBias(o) => matmul::matmul_bias(o, ctx),
        Op::Attention(o) => attention::attention(o, ctx),
    }
}

/// What the lowering tests share: types and lowering an op on given input types.
#[cfg(test)]
pub(crate) mod testing {
    use super::{KernelCtx, Lowering, lower};
    use crate::error::Result;
    use crate::exec::wgpu::kernel::KernelSpec;
    use crate::ir::{DType, TensorType};
    use crate::ops::Op;

    pub fn ty(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType::new(dtype, dims.to_vec())
    }

    /// The lowering of `op` on inputs of types `inputs` (the output's type inferred) for a
    /// device without `shader-f16`: a GPU adapter, or a CPU adapter when `cpu`.
    pub fn lower_on(op: &Op, inputs: &[TensorType], cpu: bool) -> Result<Lowering> {
        let refs: Vec<&TensorType> = inputs.iter().collect();
        let output = op.infer(&refs)?;
        lower(op, &KernelCtx { inputs: &refs, output: &output, f16: false, cpu })
    }

    /// The kernel `op` lowers to (see [`lower_on`]).
    pub fn kernel_on(op: impl Into<Op>, inputs: &[TensorType], cpu: bool) -> Result<KernelSpec> {
        let op = op.into();
        match lower_on(&op, inputs, cpu)? {
            Lowering::Kernel(spec) => Ok(spec),
            Lowering::Nothing => panic!("{} lowered to nothing", op.name()),
        }
    }

    /// [`kernel_on`] for a GPU adapter.
    pub fn kernel(op: impl Into<Op>, inputs: &[TensorType]) -> Result<KernelSpec> {
        kernel_on(op, inputs, false)
    }

    /// The value of the placeholder `key` of `spec`.
    pub fn define<'a>(spec: &'a KernelSpec, key: &str) -> &'a str {
        spec.defines.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str()).unwrap_or_else(|| {
            panic!("{} has no placeholder {key}: {:?}", spec.name, spec.defines);
        })
    }

    /// The parameter block of `spec`.
    pub fn params<P: bytemuck::Pod>(spec: &KernelSpec) -> P {
        bytemuck::pod_read_unaligned(&spec.params)
    }
}
