//! Op lowering for wgpu: each scheduled op becomes the kernel it runs as — a kernel file from
//! `kernels/`, its `$KEY` placeholders, its parameter block and its workgroup counts — or
//! nothing, for values already where they belong. Lowering looks only at types, so it runs
//! (and is tested, down to naga validating the generated module) without a device.
//!
//! One file per op family, as the CUDA lowering has them: `elementwise` (unary, binary,
//! compare, where, fused programs, cast, scalar reads, and the WGSL expression of every
//! function), `layout` (leaves, reshape, permute, slice, concat, gather, KV writes), `reduce`
//! (reductions, argmax, top_k, softmax), `norm` (layer norms), `conv` (conv1d), `matmul`
//! (matmul, matmul + bias), `attention`.

pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod layout;
pub mod matmul;
pub mod norm;
pub mod reduce;

use super::kernel::KernelSpec;
use susurrus_core::error::Result;
use susurrus_core::ir::TensorType;
use susurrus_core::ops::Op;

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
    /// The device has matrix units the kernels can use (`susurrus_wgpu::matrix_units`: 16 x 16
    /// cooperative matrices of f16 with f32 accumulators, on 32-lane subgroups, and
    /// `shader-f16`): matrix products take their `*_coop` kernels, which round their inputs
    /// to f16.
    pub matrix: bool,
    /// The device runs subgroup operations (`Features::SUBGROUP`) on subgroups of at least
    /// this many lanes: the axis kernels (reduce, argmax, softmax, layer norm, GEMV) fold the
    /// lanes of a result with subgroup shuffles where those lanes are neighbours
    /// (`kernels/lanes_subgroup.wgsl`, [`reduce::lane_folds`]).
    pub subgroups: Option<u32>,
}

/// What running an op on the GPU takes.
#[derive(Clone, Debug)]
pub enum Lowering {
    /// Nothing: the value is already where it belongs (leaves, views).
    Nothing,
    /// One kernel dispatch.
    Kernel(KernelSpec),
    /// Dispatches run in order, passing partial results through `scratch_bytes` of the
    /// executable's scratch buffer (each kernel says how it uses it: `KernelSpec::scratch`).
    Passes { scratch_bytes: usize, kernels: Vec<KernelSpec> },
}

impl Lowering {
    /// The dispatches, in order (none for [`Lowering::Nothing`]).
    pub fn kernels(&self) -> &[KernelSpec] {
        match self {
            Lowering::Nothing => &[],
            Lowering::Kernel(spec) => std::slice::from_ref(spec),
            Lowering::Passes { kernels, .. } => kernels,
        }
    }
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
        Op::TopK(o) => reduce::top_k(o, ctx),
        Op::Softmax(o) => reduce::softmax(o, ctx),
        Op::LayerNorm(o) => norm::layer_norm(o, ctx),
        Op::AddLayerNorm(o) => norm::add_layer_norm(o, ctx),
        Op::Conv1d(o) => conv::conv1d(o, ctx),
        Op::MatMul(o) => matmul::matmul(o, ctx),
        Op::MatMulBias(o) => matmul::matmul_bias(o, ctx),
        Op::Attention(o) => attention::attention(o, ctx),
    }
}

/// What the lowering tests share: types, lowering an op on given input types, and the check
/// that the module the executor would build from a kernel is valid WGSL.
#[cfg(test)]
pub(crate) mod testing {
    use wgpu::naga;

    use super::{KernelCtx, Lowering, lower};
    use crate::kernel::{BindingKind, Elem, InputAt, KernelSpec, PipelineKey, ScratchUse, module_source};
    use susurrus_core::error::Result;
    use susurrus_core::ir::{DType, TensorType};
    use susurrus_core::ops::Op;

    pub fn ty(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType::new(dtype, dims.to_vec())
    }

    /// The lowering of `op` on inputs of types `inputs` (the output's type inferred) for a
    /// device without `shader-f16`: a GPU adapter, or a CPU adapter when `cpu`.
    pub fn lower_on(op: &Op, inputs: &[TensorType], cpu: bool) -> Result<Lowering> {
        let refs: Vec<&TensorType> = inputs.iter().collect();
        let output = op.infer(&refs)?;
        lower(op, &KernelCtx { inputs: &refs, output: &output, f16: false, cpu, matrix: false, subgroups: None })
    }

    /// The kernels `op` lowers to (see [`lower_on`]), after checking that the modules built
    /// from them with every input in the arena are valid.
    pub fn kernels_on(op: impl Into<Op>, inputs: &[TensorType], cpu: bool) -> Result<Vec<KernelSpec>> {
        let op = op.into();
        let lowering = lower_on(&op, inputs, cpu)?;
        assert!(!lowering.kernels().is_empty(), "{} lowered to nothing", op.name());
        let elems: Vec<Elem> = inputs.iter().map(|t| Elem::Word(t.dtype)).collect();
        let refs: Vec<&TensorType> = inputs.iter().collect();
        validate_all(&lowering, &elems, op.infer(&refs)?.dtype);
        Ok(lowering.kernels().to_vec())
    }

    /// The one kernel `op` lowers to (see [`kernels_on`]).
    pub fn kernel_on(op: impl Into<Op>, inputs: &[TensorType], cpu: bool) -> Result<KernelSpec> {
        let op = op.into();
        let name = op.name();
        let mut kernels = kernels_on(op, inputs, cpu)?;
        assert_eq!(kernels.len(), 1, "{name} lowered to several kernels");
        Ok(kernels.remove(0))
    }

    /// [`validate`] for every kernel of `lowering`: a pass that writes the scratch has an f32
    /// output, one that reads it one more f32 input.
    pub fn validate_all(lowering: &Lowering, inputs: &[Elem], output: DType) {
        for spec in lowering.kernels() {
            let mut elems = inputs.to_vec();
            if spec.scratch == ScratchUse::Reads {
                elems.push(Elem::Word(DType::F32));
            }
            let out = if spec.scratch == ScratchUse::Writes { DType::F32 } else { output };
            validate(spec, &elems, out);
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

    /// Checks with naga the whole module the executor builds for `spec` (the preamble with
    /// bindings and accessors, the parameter struct, `kernels/common.wgsl`, the kernel with
    /// its placeholders filled): input `k` stored as `inputs[k]` (f16 weights read-only), the
    /// output as 32-bit words of `output`. Validated as a WebGPU device that has `shader-f16`
    /// only where native f16 weights need it, so a kernel using a feature it cannot count on
    /// fails here.
    pub fn validate(spec: &KernelSpec, inputs: &[Elem], output: DType) {
        let binding = |elem: Elem| BindingKind { elem, writable: matches!(elem, Elem::Word(_)) };
        let mut bindings: Vec<BindingKind> = inputs.iter().map(|&e| binding(e)).collect();
        bindings.push(BindingKind { elem: Elem::Word(output), writable: true });
        let key = PipelineKey {
            kernel: spec.name,
            prelude: spec.prelude,
            defines: spec.defines.clone(),
            bindings,
            inputs: (0..inputs.len()).map(InputAt::Binding).collect(),
            output_dtype: output,
            params_wgsl: spec.params_wgsl,
        };
        let source = module_source(&key, spec.source);
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{}: {}\n{source}", spec.name, e.emit_to_string(&source)));
        // `pack2x16float` and `unpack2x16float` are core WGSL, on every WebGPU device (naga
        // counts them as a capability because some native drivers lack them); f16 arithmetic
        // is the optional `shader-f16`.
        let mut capabilities = naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        if inputs.contains(&Elem::F16Native) || source.starts_with("enable f16;") {
            capabilities |= naga::valid::Capabilities::SHADER_FLOAT16;
        }
        // The matrix kernels: cooperative matrices on subgroups (the device was checked for
        // both, `susurrus_wgpu::matrix_units`).
        if source.contains("enable wgpu_cooperative_matrix;") {
            capabilities |= naga::valid::Capabilities::COOPERATIVE_MATRIX | naga::valid::Capabilities::SUBGROUP;
        }
        // The lane folds on subgroups (the device was checked for them).
        if source.contains("@builtin(subgroup_id)") {
            capabilities |= naga::valid::Capabilities::SUBGROUP;
        }
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities)
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {}\n{source}", spec.name, e.emit_to_string(&source)));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::testing::{lower_on, ty, validate_all};
    use super::{KernelCtx, Lowering, lower};
    use crate::kernel::Elem;
    use susurrus_core::ir::{DType, ScalarId, Shape, TensorType};
    use susurrus_core::ops::*;
    use susurrus_core::tensor::Tensor;

    /// An input of an example: its type, and whether it is a weight (f16 weights are stored
    /// packed, or natively with `shader-f16`; everything else is 32-bit words in the arena).
    type Operand = (TensorType, bool);

    fn arena(dtype: DType, dims: &[usize]) -> Operand {
        (ty(dtype, dims), false)
    }

    fn weight(dtype: DType, dims: &[usize]) -> Operand {
        (ty(dtype, dims), true)
    }

    /// Every op, each kind of it, on operands that take its kernels' different paths: every
    /// dtype they accept, f16 weights, broadcasts, decoder-step shapes.
    fn examples() -> Vec<(Op, Vec<Operand>)> {
        use DType::{F16, F32, I32, U32};
        let mut all: Vec<(Op, Vec<Operand>)> = vec![
            (Input { name: "x".into(), ty: ty(F32, &[2]) }.into(), vec![]),
            (Param { name: "w".into(), ty: ty(F16, &[2]) }.into(), vec![]),
            (Const::new(Tensor::f32([2], vec![1.0, 2.0]).unwrap()).into(), vec![]),
            (State { name: "s".into(), ty: ty(F32, &[2]) }.into(), vec![]),
            (Reshape { shape: Shape::from([6]) }.into(), vec![arena(F32, &[2, 3])]),
        ];
        for kind in UnaryKind::ALL {
            all.push((Unary { kind }.into(), vec![arena(F32, &[3, 5])]));
            all.push((Unary { kind }.into(), vec![weight(F16, &[7])]));
        }
        for kind in BinaryKind::ALL {
            all.push((Binary { kind }.into(), vec![arena(F16, &[2, 1, 3]), weight(F16, &[4, 3])]));
            all.push((Binary { kind }.into(), vec![arena(I32, &[2, 3]), arena(I32, &[3])]));
            all.push((Binary { kind }.into(), vec![arena(U32, &[3]), arena(U32, &[2, 3])]));
        }
        for kind in CmpKind::ALL {
            all.push((Compare { kind }.into(), vec![arena(F32, &[2, 3]), weight(F32, &[3])]));
            all.push((Compare { kind }.into(), vec![arena(F16, &[3]), weight(F16, &[3])]));
            all.push((Compare { kind }.into(), vec![arena(I32, &[4]), arena(I32, &[])]));
            all.push((Compare { kind }.into(), vec![arena(U32, &[4]), arena(U32, &[4])]));
        }
        all.push((Select.into(), vec![arena(U32, &[3, 1]), arena(F16, &[3, 4]), weight(F16, &[4])]));
        all.push((Select.into(), vec![arena(I32, &[4]), arena(I32, &[4]), arena(I32, &[])]));
        let mut program = vec![Instr::Input(0), Instr::Input(1), Instr::Input(2)];
        for kind in UnaryKind::ALL {
            program.push(Instr::Unary(kind, program.len() as u32 - 1));
        }
        for kind in BinaryKind::ALL {
            program.push(Instr::Binary(kind, program.len() as u32 - 1, 1));
        }
        program.push(Instr::Select(2, program.len() as u32 - 1, 0));
        for dtype in [F32, F16] {
            let fused = FusedElementwise { program: program.clone(), dtype };
            all.push((fused.into(), vec![arena(F32, &[3, 4]), weight(F16, &[4]), arena(U32, &[3, 1])]));
        }
        for from in [F32, F16, I32, U32] {
            for to in [F32, F16, I32, U32] {
                all.push((Cast { to }.into(), vec![(ty(from, &[5]), from == F16)]));
            }
        }
        all.push((ScalarRead { scalar: ScalarId(2) }.into(), vec![]));
        all.push((Permute { perm: vec![2, 0, 1] }.into(), vec![arena(F32, &[2, 3, 4])]));
        all.push((Permute { perm: vec![1, 0] }.into(), vec![weight(F16, &[3, 5])]));
        all.push((Slice { axis: 1, start: 1, end: 3 }.into(), vec![weight(F16, &[2, 4, 3])]));
        all.push((Slice { axis: 0, start: 0, end: 1 }.into(), vec![arena(U32, &[2, 4])]));
        let parts = vec![arena(F16, &[2, 1]), weight(F16, &[2, 3]), arena(F16, &[2, 2])];
        all.push((Concat { axis: 1 }.into(), parts));
        all.push((Concat { axis: 0 }.into(), vec![arena(I32, &[2])]));
        all.push((Gather.into(), vec![weight(F16, &[10, 4]), arena(I32, &[3])]));
        all.push((Gather.into(), vec![weight(F32, &[10, 4, 2]), arena(U32, &[2, 3])]));
        for offset in [Some(ScalarId(0)), None] {
            let write = KvWrite { axis: 1, offset };
            all.push((write.into(), vec![arena(F32, &[2, 8, 4]), arena(F32, &[2, 1, 4])]));
        }
        for kind in ReduceKind::ALL {
            all.push((Reduce { kind, axis: 1, keep_dim: false }.into(), vec![arena(F32, &[3, 5])]));
            all.push((Reduce { kind, axis: 0, keep_dim: true }.into(), vec![weight(F16, &[3, 5])]));
        }
        for dtype in [F32, F16, I32, U32] {
            all.push((Argmax { axis: 1 }.into(), vec![(ty(dtype, &[2, 7, 3]), dtype == F16)]));
            // A decoder step's vocabulary: two passes.
            all.push((Argmax { axis: 1 }.into(), vec![arena(dtype, &[1, 51864])]));
            all.push((TopK { k: 3 }.into(), vec![(ty(dtype, &[2, 7]), dtype == F16)]));
            // Beam search over a decoder step's scores: splits, then one merge per row.
            all.push((TopK { k: 10 }.into(), vec![arena(dtype, &[2, 51864])]));
        }
        for kind in ReduceKind::ALL {
            all.push((Reduce { kind, axis: 1, keep_dim: true }.into(), vec![arena(F32, &[1, 51864])]));
        }
        all.push((Softmax.into(), vec![arena(F32, &[4, 9])]));
        all.push((Softmax.into(), vec![weight(F16, &[9])]));
        let norm = |x: Operand| vec![x, weight(F16, &[6]), weight(F32, &[6])];
        all.push((LayerNorm { eps: 1e-5 }.into(), norm(arena(F32, &[3, 6]))));
        let mut add = norm(arena(F16, &[3, 6]));
        add.insert(1, arena(F16, &[3, 6]));
        all.push((AddLayerNorm { eps: 1e-5 }.into(), add));
        let conv = Conv1d { stride: 2, padding: 1, dilation: 1 };
        all.push((conv.clone().into(), vec![arena(F32, &[8, 30]), weight(F16, &[6, 8, 3]), weight(F16, &[6])]));
        all.push((conv.into(), vec![arena(F32, &[2, 8, 30]), weight(F32, &[6, 8, 3])]));
        for transpose_b in [false, true] {
            for m in [1, 5] {
                let b = if transpose_b { [7, 16] } else { [16, 7] };
                all.push((MatMul { transpose_b }.into(), vec![arena(F32, &[2, m, 16]), weight(F16, &b)]));
                for (gelu, residual) in [(false, false), (true, false), (true, true)] {
                    let op = MatMulBias { transpose_b, gelu, residual };
                    let mut inputs = vec![arena(F32, &[m, 16]), weight(F16, &b), weight(F16, &[7])];
                    if residual {
                        inputs.push(arena(F32, &[m, 7]));
                    }
                    all.push((op.into(), inputs));
                }
            }
        }
        all.push((MatMul { transpose_b: false }.into(), vec![arena(F16, &[2, 1, 3, 8]), arena(F16, &[4, 8, 5])]));
        for mask in [MaskKind::None, MaskKind::Additive, MaskKind::Causal] {
            // Many queries, one query (a decoder step), and more keys than the CPU-adapter
            // kernel's loops and the one-query kernel's workgroup memory allow.
            // Heads of 64 take the matrix units' kernel where the device has them.
            for (sq, sk, d, dv) in [(5, 9, 8, 4), (1, 9, 8, 4), (1, 20_000, 8, 4), (70, 90, 64, 64)] {
                let mut inputs = vec![arena(F32, &[2, sq, d]), arena(F32, &[2, sk, d]), arena(F32, &[2, sk, dv])];
                if mask == MaskKind::Additive {
                    inputs.push(weight(F16, &[sq, sk]));
                }
                all.push((Attention { scale: 0.5, mask }.into(), inputs));
            }
        }
        all
    }

    #[test]
    fn every_op_lowers_to_a_module_naga_accepts_on_every_adapter() {
        // GPU adapters without and with `shader-f16`, CPU adapters, GPUs with subgroups and
        // with matrix units.
        let leaves_and_views = ["Input", "Param", "Const", "State", "Reshape"];
        let mut covered = BTreeSet::new();
        for (op, operands) in examples() {
            covered.insert(op.tag().name());
            let inputs: Vec<&TensorType> = operands.iter().map(|(t, _)| t).collect();
            let output = op.infer(&inputs).unwrap();
            // GPUs without and with subgroups (of 4 lanes, lavapipe's narrowest, and 32).
            let adapters = [
                (false, false, false, None),
                (false, true, false, None),
                (true, false, false, None),
                (true, true, false, None),
                (false, false, false, Some(4)),
                (false, true, false, Some(32)),
                (false, true, true, Some(32)),
            ];
            for (cpu, f16, matrix, subgroups) in adapters {
                let ctx = KernelCtx { inputs: &inputs, output: &output, f16, cpu, matrix, subgroups };
                let lowering = lower(&op, &ctx).unwrap();
                if lowering.kernels().is_empty() {
                    assert!(leaves_and_views.contains(&op.tag().name()), "{}", op.name());
                }
                let elems: Vec<Elem> = operands
                    .iter()
                    .map(|(t, weight)| match (t.dtype, weight, f16) {
                        (DType::F16, true, true) => Elem::F16Native,
                        (DType::F16, true, false) => Elem::F16Packed,
                        (dtype, _, _) => Elem::Word(dtype),
                    })
                    .collect();
                validate_all(&lowering, &elems, output.dtype);
            }
        }
        let every: BTreeSet<&str> = OpTag::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(covered, every, "ops without an example");
    }

    #[test]
    fn leaves_and_views_run_nothing() {
        let x = ty(DType::F32, &[2, 3]);
        let lowered = lower_on(&Reshape { shape: Shape::from([3, 2]) }.into(), &[x], false).unwrap();
        assert!(matches!(lowered, Lowering::Nothing));
        let state: Op = State { name: "cache".into(), ty: ty(DType::F16, &[4, 2]) }.into();
        assert!(matches!(lower_on(&state, &[], true).unwrap(), Lowering::Nothing));
    }
}
