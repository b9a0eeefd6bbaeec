//! Elementwise ops: one thread per output element. Unary, binary, compare and where each have
//! a kernel whose expression is filled in from the tables here; fused programs are compiled
//! into straight-line WGSL from the same tables; cast and scalar reads copy one value each.

use std::fmt::Write;

use super::{KernelCtx, Lowering};
use crate::{KernelSpec, pack_dims};
use susurrus_core::error::{Error, Result};
use susurrus_core::exec::index::coalesce;
use susurrus_core::ir::DType;
use susurrus_core::ops::{
    Binary, BinaryKind, Cast, CmpKind, Compare, FusedElementwise, Instr, ScalarRead, Select, Unary, UnaryKind,
};

/// The WGSL expression of the function of `x` (kernels/common.wgsl has the helpers).
fn unary_wgsl(kind: UnaryKind, x: &str) -> String {
    match kind {
        UnaryKind::Neg => format!("(-{x})"),
        UnaryKind::Exp => format!("exp({x})"),
        UnaryKind::Log => format!("log({x})"),
        UnaryKind::Sqrt => format!("sqrt({x})"),
        UnaryKind::Rsqrt => format!("inverseSqrt({x})"),
        UnaryKind::Tanh => format!("tanh_f32({x})"),
        UnaryKind::Erf => format!("erf_f32({x})"),
        UnaryKind::Gelu => format!("gelu_f32({x})"),
        UnaryKind::Relu => format!("max({x}, 0.0)"),
        UnaryKind::Sigmoid => format!("sigmoid_f32({x})"),
        UnaryKind::Silu => format!("({x} * sigmoid_f32({x}))"),
    }
}

/// The WGSL expression of the function of `a` and `b` (any compute type).
fn binary_wgsl(kind: BinaryKind, a: &str, b: &str) -> String {
    match kind {
        BinaryKind::Add => format!("({a} + {b})"),
        BinaryKind::Sub => format!("({a} - {b})"),
        BinaryKind::Mul => format!("({a} * {b})"),
        BinaryKind::Div => format!("({a} / {b})"),
        BinaryKind::Max => format!("max({a}, {b})"),
        BinaryKind::Min => format!("min({a}, {b})"),
    }
}

/// The WGSL boolean expression of the comparison of `a` and `b` (any compute type). `ne`
/// is written as `!(a == b)` so a NaN operand makes it true, as IEEE (and [`CmpKind::holds`])
/// says, whichever ordered or unordered instruction a compiler picks for `!=`.
fn compare_wgsl(kind: CmpKind, a: &str, b: &str) -> String {
    match kind {
        CmpKind::Eq => format!("({a} == {b})"),
        CmpKind::Ne => format!("!({a} == {b})"),
        CmpKind::Lt => format!("({a} < {b})"),
        CmpKind::Le => format!("({a} <= {b})"),
        CmpKind::Gt => format!("({a} > {b})"),
        CmpKind::Ge => format!("({a} >= {b})"),
    }
}

crate::kernel_params! {
    /// Parameters of kernels that only need the element count.
    pub struct CountParams {
        pub n: u32,
    }
}

crate::kernel_params! {
    /// Output dimensions and the broadcast strides of up to three inputs (`a`, `b`, `c`),
    /// for kernels that read inputs of other shapes than their output.
    pub struct BroadcastParams {
        pub dims0: vec4u,
        pub dims1: vec4u,
        pub a0: vec4u,
        pub a1: vec4u,
        pub b0: vec4u,
        pub b1: vec4u,
        pub c0: vec4u,
        pub c1: vec4u,
        pub n: u32,
        pub rank: u32,
    }
}

impl BroadcastParams {
    /// The output's dimensions and each input's strides read as the output's shape.
    pub fn new(ctx: &KernelCtx) -> Self {
        let out = &ctx.output.shape;
        let strides =
            |k: usize| ctx.inputs.get(k).map(|t| pack_dims(&t.shape.broadcast_strides(out))).unwrap_or_default();
        let ([a0, a1], [b0, b1], [c0, c1]) = (strides(0), strides(1), strides(2));
        let [dims0, dims1] = pack_dims(out.dims());
        BroadcastParams { dims0, dims1, a0, a1, b0, b1, c0, c1, n: out.numel() as u32, rank: out.rank() as u32 }
    }
}

/// WGSL compute type, load prefix and store function for values of `dtype`.
fn compute_type(dtype: DType) -> (&'static str, &'static str, &'static str) {
    match dtype {
        DType::F32 | DType::F16 => ("f32", "ld", "st"),
        DType::I32 => ("i32", "ldi", "sti"),
        DType::U32 => ("u32", "ldu", "stu"),
        DType::Q8 => unreachable!("elementwise ops take no q8 operand (the graph refuses it)"),
    }
}

pub fn unary(op: &Unary, ctx: &KernelCtx) -> Result<Lowering> {
    let n = ctx.output.numel();
    let spec = KernelSpec::new("unary", include_str!("../../kernels/unary.wgsl"), &CountParams { n: n as u32 })
        .define("EXPR", unary_wgsl(op.kind, "x"))
        .threads(n);
    Ok(Lowering::Kernel(spec))
}

pub fn binary(op: &Binary, ctx: &KernelCtx) -> Result<Lowering> {
    let (t, load, store) = compute_type(ctx.output.dtype);
    let n = ctx.output.numel();
    let spec = KernelSpec::new("binary", include_str!("../../kernels/binary.wgsl"), &BroadcastParams::new(ctx))
        .define("T", t)
        .define("LOAD0", format!("{load}0"))
        .define("LOAD1", format!("{load}1"))
        .define("STORE", store)
        .define("EXPR", binary_wgsl(op.kind, "a", "b"))
        .threads(n);
    Ok(Lowering::Kernel(spec))
}

/// One thread per output element; the operands are loaded in their own dtype's compute
/// type (the output is always u32), so integers above 2^24 compare exactly.
pub fn compare(op: &Compare, ctx: &KernelCtx) -> Result<Lowering> {
    let (t, load, _) = compute_type(ctx.inputs[0].dtype);
    let n = ctx.output.numel();
    let spec = KernelSpec::new("compare", include_str!("../../kernels/compare.wgsl"), &BroadcastParams::new(ctx))
        .define("T", t)
        .define("LOAD0", format!("{load}0"))
        .define("LOAD1", format!("{load}1"))
        .define("EXPR", compare_wgsl(op.kind, "a", "b"))
        .threads(n);
    Ok(Lowering::Kernel(spec))
}

/// One thread per output element; `cond`, `a` and `b` are read through their broadcast
/// strides (`BroadcastParams`' a, b and c) and the chosen value is copied as its 32-bit word.
pub fn select(_op: &Select, ctx: &KernelCtx) -> Result<Lowering> {
    let n = ctx.output.numel();
    let spec =
        KernelSpec::new("select", include_str!("../../kernels/select.wgsl"), &BroadcastParams::new(ctx)).threads(n);
    Ok(Lowering::Kernel(spec))
}

/// Most inputs one dispatch can read: it binds at most eight storage buffers, one of them the
/// output.
const MAX_INPUTS: usize = 7;
/// Most output axes the kernel parameters hold (after coalescing).
const MAX_RANK: usize = 8;
/// Words of the stride table: `rank` strides per input, so 7 inputs up to rank 6 or 6 inputs
/// up to rank 8.
const STRIDE_WORDS: usize = 48;

crate::kernel_params! {
    /// Parameters of the fused kernel (see kernels/fused_elementwise.wgsl): the coalesced output
    /// dimensions, the stride table (input k's stride along axis d at word k * rank + d) and
    /// the element count. A flat table instead of a fixed number of strides per input lets up
    /// to seven inputs of rank up to six share the 256-byte parameter slot.
    pub struct FusedParams {
        pub dims0: vec4u,
        pub dims1: vec4u,
        pub t0: vec4u,
        pub t1: vec4u,
        pub t2: vec4u,
        pub t3: vec4u,
        pub t4: vec4u,
        pub t5: vec4u,
        pub t6: vec4u,
        pub t7: vec4u,
        pub t8: vec4u,
        pub t9: vec4u,
        pub t10: vec4u,
        pub t11: vec4u,
        pub n: u32,
    }
}

/// A `vec4u` component of the parameters in WGSL: word `w` of the fields `{field}0`, `{field}1`, ...
fn param_word(field: &str, w: usize) -> String {
    format!("p.{field}{}[{}]", w / 4, w % 4)
}

/// WGSL statements that split the element index `i` into coordinates `x0..x{rank-1}` of the
/// output (dimensions in `p.dims0`/`p.dims1`) and compute each input's offset `o{k}` from its
/// row `k` of the stride table.
fn offsets_wgsl(rank: usize, inputs: usize) -> String {
    let mut s = String::new();
    if rank > 0 {
        let _ = writeln!(s, "    let e{} = i;", rank - 1);
        for d in (1..rank).rev() {
            let dim = param_word("dims", d);
            let _ = writeln!(s, "    let x{d} = e{d} % {dim};\n    let e{} = e{d} / {dim};", d - 1);
        }
        s.push_str("    let x0 = e0;\n");
    }
    for k in 0..inputs {
        let terms: Vec<String> = (0..rank).map(|d| format!("x{d} * {}", param_word("t", k * rank + d))).collect();
        let offset = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
        let _ = writeln!(s, "    let o{k} = {offset};");
    }
    s
}

/// WGSL statements computing the program: instruction `j` defines the f32 value `v{j}`.
fn body_wgsl(program: &[Instr]) -> String {
    let v = |j: u32| format!("v{j}");
    let mut s = String::new();
    for (j, ins) in program.iter().enumerate() {
        let expr = match *ins {
            Instr::Input(n) => format!("ld{n}(o{n})"),
            // By its bits: exact for every value (WGSL has no literal for NaN or infinities).
            Instr::Const(v) => format!("bitcast<f32>({}u)", v.to_bits()),
            Instr::Unary(k, a) => unary_wgsl(k, &v(a)),
            Instr::Binary(k, a, b) => binary_wgsl(k, &v(a), &v(b)),
            Instr::Compare(k, a, b) => format!("select(0.0, 1.0, {})", compare_wgsl(k, &v(a), &v(b))),
            // Not `!= 0.0`: compilers may emit an ordered not-equal, false for a NaN condition,
            // where the reference (Rust's `!=`) picks `a`.
            Instr::Select(c, a, b) => format!("select({}, {}, !({} == 0.0))", v(b), v(a), v(c)),
        };
        let _ = writeln!(s, "    let v{j} = {expr};");
    }
    s
}

/// One thread per output element: the program compiled into straight-line WGSL, each
/// input read at its own broadcast offset (see [`FusedParams`]). More inputs than one
/// dispatch can bind, or more coalesced axes than the parameters hold, are unsupported.
pub fn fused(op: &FusedElementwise, ctx: &KernelCtx) -> Result<Lowering> {
    let unsupported = |what: String, limit: String| Error::Unsupported {
        op: format!("fused_elementwise with {what}"),
        backend: format!("wgpu ({limit})"),
    };
    let inputs = ctx.inputs.len();
    if inputs > MAX_INPUTS {
        return Err(unsupported(
            format!("{inputs} inputs"),
            format!("at most {MAX_INPUTS} inputs: a dispatch binds at most 8 storage buffers"),
        ));
    }
    let out = &ctx.output.shape;
    let strides: Vec<Vec<usize>> = ctx.inputs.iter().map(|t| t.shape.broadcast_strides(out)).collect();
    let (dims, strides) = coalesce(out.dims(), &strides);
    let rank = dims.len();
    if rank > MAX_RANK || rank * inputs > STRIDE_WORDS {
        return Err(unsupported(
            format!("{inputs} inputs of output shape {out}"),
            format!("at most {MAX_RANK} axes and {STRIDE_WORDS} strides after merging axes"),
        ));
    }
    let mut table = [0u32; STRIDE_WORDS];
    for (w, &stride) in strides.iter().flatten().enumerate() {
        table[w] = stride as u32;
    }
    let [dims0, dims1] = pack_dims(&dims);
    let [t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11]: [[u32; 4]; 12] = bytemuck::cast(table);
    let n = ctx.output.numel();
    let params = FusedParams { dims0, dims1, t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, n: n as u32 };
    let last = op.program.len().saturating_sub(1);
    let spec = KernelSpec::new("fused_elementwise", include_str!("../../kernels/fused_elementwise.wgsl"), &params)
        .define("OFFSETS", offsets_wgsl(rank, inputs))
        .define("BODY", body_wgsl(&op.program))
        .define("RESULT", format!("v{last}"))
        .threads(n);
    Ok(Lowering::Kernel(spec))
}

/// The WGSL statement storing element `i` of a `from` tensor converted to `to`.
fn cast_store(from: DType, to: DType) -> &'static str {
    match (from.is_weight_float(), to) {
        (_, DType::F32) => "st(i, ld0(i))",
        (_, DType::F16) => "st_f16(i, ld0(i))",
        (true, DType::I32) => "sti(i, f32_to_i32(ld0(i)))",
        (true, DType::U32) => "stu(i, f32_to_u32(ld0(i)))",
        (false, DType::I32 | DType::U32) => "stw(i, ldw0(i))",
        (_, DType::Q8) => unreachable!("no cast makes a q8 value (the graph refuses it)"),
    }
}

/// One thread per element; the conversion is one store statement chosen by the dtype pair
/// (kernels/cast.wgsl lists them).
pub fn cast(op: &Cast, ctx: &KernelCtx) -> Result<Lowering> {
    let n = ctx.output.numel();
    let spec = KernelSpec::new("cast", include_str!("../../kernels/cast.wgsl"), &CountParams { n: n as u32 })
        .define("STORE", cast_store(ctx.inputs[0].dtype, op.to))
        .threads(n);
    Ok(Lowering::Kernel(spec))
}

crate::kernel_params! {
    /// Which runtime scalar a `scalar` kernel reads.
    pub struct ScalarParams {
        pub index: u32,
    }
}

/// One thread copies the scalar from the run's uniform. The index is a parameter rather
/// than a `define`, so reads of different scalars share one pipeline.
pub fn scalar(op: &ScalarRead, _ctx: &KernelCtx) -> Result<Lowering> {
    let params = ScalarParams { index: op.scalar.0 };
    let spec = KernelSpec::new("scalar", include_str!("../../kernels/scalar.wgsl"), &params).groups(1, 1, 1);
    Ok(Lowering::Kernel(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::testing::{define, kernel, params, ty};
    use susurrus_core::ir::{ScalarId, TensorType};

    #[test]
    fn one_thread_per_element_with_the_expression_filled_in() {
        // 15 elements: one workgroup; 2^24 + 1 spill into a second grid row of workgroups.
        let spec = kernel(Unary { kind: UnaryKind::Gelu }, &[ty(DType::F32, &[3, 5])]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("unary", [1, 1, 1]));
        assert_eq!(params::<CountParams>(&spec), CountParams { n: 15 });
        assert_eq!(define(&spec, "EXPR"), "gelu_f32(x)");
        let spec = kernel(Unary { kind: UnaryKind::Silu }, &[ty(DType::F16, &[(1 << 24) + 1])]).unwrap();
        assert_eq!(spec.workgroups, [65535, 2, 1]);
        assert_eq!(define(&spec, "EXPR"), "(x * sigmoid_f32(x))");
    }

    #[test]
    fn binary_and_compare_compute_in_their_operands_type() {
        // i32 [4,3] / [3]: exact integer division, the row broadcast with stride 0.
        let spec = kernel(Binary { kind: BinaryKind::Div }, &[ty(DType::I32, &[4, 3]), ty(DType::I32, &[3])]).unwrap();
        assert_eq!(spec.name, "binary");
        let defines = ["T", "LOAD0", "LOAD1", "STORE", "EXPR"].map(|k| define(&spec, k));
        assert_eq!(defines, ["i32", "ldi0", "ldi1", "sti", "(a / b)"]);
        let p = params::<BroadcastParams>(&spec);
        assert_eq!((p.dims0, p.a0, p.b0, p.c0, p.n, p.rank), ([4, 3, 0, 0], [3, 1, 0, 0], [0, 1, 0, 0], [0; 4], 12, 2));
        // u32 comparisons load u32 and store a mask; `ne` holds for NaN.
        let spec = kernel(Compare { kind: CmpKind::Ne }, &[ty(DType::U32, &[5]), ty(DType::U32, &[])]).unwrap();
        assert_eq!(spec.name, "compare");
        assert_eq!(["T", "LOAD0", "EXPR"].map(|k| define(&spec, k)), ["u32", "ldu0", "!(a == b)"]);
        let spec = kernel(Compare { kind: CmpKind::Le }, &[ty(DType::F16, &[5]), ty(DType::F16, &[5])]).unwrap();
        assert_eq!(["T", "LOAD1", "EXPR"].map(|k| define(&spec, k)), ["f32", "ld1", "(a <= b)"]);
    }

    #[test]
    fn select_reads_all_three_operands_through_their_strides() {
        // cond [3,1], a [3,4], b [4] -> [3,4].
        let inputs = [ty(DType::U32, &[3, 1]), ty(DType::F32, &[3, 4]), ty(DType::F32, &[4])];
        let spec = kernel(Select, &inputs).unwrap();
        let p = params::<BroadcastParams>(&spec);
        assert_eq!((spec.name, p.a0, p.b0, p.c0, p.n), ("select", [1, 0, 0, 0], [4, 1, 0, 0], [0, 1, 0, 0], 12));
    }

    #[test]
    fn cast_stores_by_dtype_pair() {
        let store = |from, to| define(&kernel(Cast { to }, &[ty(from, &[4])]).unwrap(), "STORE").to_string();
        assert_eq!(store(DType::F16, DType::F32), "st(i, ld0(i))");
        assert_eq!(store(DType::I32, DType::F16), "st_f16(i, ld0(i))");
        assert_eq!(store(DType::F32, DType::I32), "sti(i, f32_to_i32(ld0(i)))");
        assert_eq!(store(DType::F16, DType::U32), "stu(i, f32_to_u32(ld0(i)))");
        assert_eq!(store(DType::I32, DType::U32), "stw(i, ldw0(i))");
    }

    #[test]
    fn scalar_reads_take_the_index_as_a_parameter() {
        let spec = kernel(ScalarRead { scalar: ScalarId(3) }, &[]).unwrap();
        assert_eq!((spec.name, spec.workgroups, spec.defines.len()), ("scalar", [1, 1, 1], 0));
        assert_eq!(params::<ScalarParams>(&spec), ScalarParams { index: 3 });
    }

    #[test]
    fn generated_wgsl_reads_each_input_at_its_own_offset() {
        // Rank 2, two inputs: x1 is the fast coordinate; input 1's strides are words 2 and 3.
        assert_eq!(
            offsets_wgsl(2, 2),
            "    let e1 = i;\n    let x1 = e1 % p.dims0[1];\n    let e0 = e1 / p.dims0[1];\n    let x0 = e0;\n\
             \x20   let o0 = x0 * p.t0[0] + x1 * p.t0[1];\n    let o1 = x0 * p.t0[2] + x1 * p.t0[3];\n"
        );
        assert_eq!(offsets_wgsl(0, 1), "    let o0 = 0u;\n");
        let program = [Instr::Input(1), Instr::Input(0), Instr::Unary(UnaryKind::Neg, 0), Instr::Select(1, 2, 0)];
        assert_eq!(
            body_wgsl(&program),
            "    let v0 = ld1(o1);\n    let v1 = ld0(o0);\n    let v2 = (-v0);\n    let v3 = select(v0, v2, !(v1 == 0.0));\n"
        );
    }

    #[test]
    fn fused_programs_get_coalesced_strides() {
        // x [2,3,4] and y [3,4] broadcast over the first axis: y's axes merge into one of 12,
        // x's too, but the first axis stays apart (y's stride there is 0).
        let program = vec![Instr::Input(0), Instr::Input(1), Instr::Binary(BinaryKind::Mul, 0, 1)];
        let op = FusedElementwise { program, dtype: DType::F16 };
        let spec = kernel(op, &[ty(DType::F32, &[2, 3, 4]), ty(DType::F32, &[3, 4])]).unwrap();
        let p = params::<FusedParams>(&spec);
        assert_eq!((spec.name, p.dims0, p.t0, p.n), ("fused_elementwise", [2, 12, 0, 0], [12, 1, 0, 1], 24));
        assert_eq!(define(&spec, "BODY"), "    let v0 = ld0(o0);\n    let v1 = ld1(o1);\n    let v2 = (v0 * v1);\n");
        assert_eq!(define(&spec, "RESULT"), "v2");
    }

    /// The kernel's error for a program loading inputs of these shapes, or `None` if it has one.
    fn kernel_error(shapes: &[Vec<usize>]) -> Option<String> {
        let tys: Vec<TensorType> = shapes.iter().map(|d| TensorType::new(DType::F32, d.clone())).collect();
        let op = FusedElementwise { program: (0..shapes.len() as u32).map(Instr::Input).collect(), dtype: DType::F32 };
        kernel(op, &tys).err().map(|e| e.to_string())
    }

    #[test]
    fn too_many_inputs_or_axes_are_unsupported() {
        // `[2,1,2,1,..]` against `[2,2,2,..]`: no two neighbouring axes merge.
        let alternating = |rank: usize| (0..rank).map(|d| if d % 2 == 0 { 2 } else { 1 }).collect::<Vec<_>>();
        assert_eq!(
            kernel_error(&vec![vec![4]; 8]).unwrap(),
            "fused_elementwise with 8 inputs is not supported by the wgpu (at most 7 inputs: a dispatch binds at \
             most 8 storage buffers) backend"
        );
        // Seven inputs of one shape coalesce to one axis, whatever their rank.
        assert_eq!(kernel_error(&vec![vec![2; 8]; 7]), None);
        // Six inputs of rank 8 fill the 48 strides; seven of rank 7 need 49.
        let mut six = vec![vec![2; 8]; 5];
        six.push(alternating(8));
        assert_eq!(kernel_error(&six), None);
        let mut seven = vec![vec![2; 7]; 6];
        seven.push(alternating(7));
        assert_eq!(
            kernel_error(&seven).unwrap(),
            "fused_elementwise with 7 inputs of output shape [2,2,2,2,2,2,2] is not supported by the wgpu (at most \
             8 axes and 48 strides after merging axes) backend"
        );
        assert_eq!(
            kernel_error(&[vec![2; 9], alternating(9)]).unwrap(),
            "fused_elementwise with 2 inputs of output shape [2,2,2,2,2,2,2,2,2] is not supported by the wgpu (at \
             most 8 axes and 48 strides after merging axes) backend"
        );
    }
}
