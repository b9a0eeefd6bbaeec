//! Elementwise ops (kernels/elementwise.cu): unary, binary and compare with broadcasting,
//! where, fused programs, casts and runtime scalar reads. One thread per output element; the
//! operation is a code in the parameters rather than a separate kernel, so one kernel serves
//! every kind (the branch is uniform across a launch).
//!
//! Broadcast operands are read through strides over the output's axes after merging the axes
//! every operand walks alike (as the wgpu fused kernel does): same-shape operands become one
//! axis of stride 1, and only shapes that keep more than 8 axes after merging are unsupported.

use susurrus_core::exec::index::coalesce;
use susurrus_core::ir::{DType, Shape, TensorType};
use susurrus_core::ops::*;
use susurrus_core::{Error, Result};

use super::{KernelLaunch, Launch, LowerCtx, Operand};
use crate::Precision;
use crate::params::{In, Out, ParamsInfo, dims8, kind};

/// Most axes a broadcast kernel walks (after merging).
const MAX_RANK: usize = 8;
/// Most inputs of a fused program (`EW_MAX_INPUTS`); the fusion pass makes at most 7.
const MAX_FUSED_INPUTS: usize = 8;
/// Most instructions of a fused program (`EW_MAX_INSTRS`): the kernel keeps one f32 per
/// instruction. A decoder step's ban kernels recompute the timestamp rules (one-element
/// values joined into them) and take up to about 40.
const MAX_FUSED_INSTRS: usize = 64;
// Every program the fusion pass makes fits.
const _: () = assert!(MAX_FUSED_INSTRS >= susurrus_core::passes::MAX_FUSED_WORDS);

/// The op codes the kernels switch on (the `EW_*` defines of kernels/elementwise.cu).
mod code {
    use susurrus_core::ir::DType;
    use susurrus_core::ops::{BinaryKind, CmpKind, UnaryKind};

    pub fn unary(kind: UnaryKind) -> u32 {
        match kind {
            UnaryKind::Neg => 0,
            UnaryKind::Exp => 1,
            UnaryKind::Log => 2,
            UnaryKind::Sqrt => 3,
            UnaryKind::Rsqrt => 4,
            UnaryKind::Tanh => 5,
            UnaryKind::Erf => 6,
            UnaryKind::Gelu => 7,
            UnaryKind::Relu => 8,
            UnaryKind::Sigmoid => 9,
            UnaryKind::Silu => 10,
        }
    }

    pub fn binary(kind: BinaryKind) -> u32 {
        match kind {
            BinaryKind::Add => 0,
            BinaryKind::Sub => 1,
            BinaryKind::Mul => 2,
            BinaryKind::Div => 3,
            BinaryKind::Max => 4,
            BinaryKind::Min => 5,
        }
    }

    pub fn cmp(kind: CmpKind) -> u32 {
        match kind {
            CmpKind::Eq => 0,
            CmpKind::Ne => 1,
            CmpKind::Lt => 2,
            CmpKind::Le => 3,
            CmpKind::Gt => 4,
            CmpKind::Ge => 5,
        }
    }

    /// How operands of `dtype` are computed with: `EW_FLOAT` (f32), `EW_INT`, `EW_UINT`.
    pub fn compute(dtype: DType) -> u32 {
        match dtype {
            DType::F32 | DType::F16 => 0,
            DType::I32 => 1,
            DType::U32 => 2,
            DType::Q8 => unreachable!("elementwise ops take no q8 operand (the graph refuses it)"),
        }
    }

    /// Fused instruction classes (`EW_INSTR_*`).
    pub const INPUT: u32 = 0;
    pub const UNARY: u32 = 1;
    pub const BINARY: u32 = 2;
    pub const SELECT: u32 = 3;
    pub const COMPARE: u32 = 4;
    pub const CONST: u32 = 5;
}

crate::cuda_params! {
    /// `unary_map`: `out[i] = f(x[i])`, f given by `op` (a unary code).
    pub struct UnaryParams { pub x: In, pub out: Out, pub n: u32, pub op: u32 }
}

crate::cuda_params! {
    /// `binary_broadcast` and `compare_broadcast`: `a` and `b` read through their strides
    /// `sa`/`sb` over the `rank` output axes `dims`; `op` a binary or comparison code, `ty`
    /// the operands' compute type.
    pub struct BinaryParams {
        pub a: In,
        pub b: In,
        pub out: Out,
        pub n: u32,
        pub rank: u32,
        pub op: u32,
        pub ty: u32,
        pub dims: [u32; 8],
        pub sa: [u32; 8],
        pub sb: [u32; 8],
    }
}

crate::cuda_params! {
    /// `select_broadcast`: `cond`, `a` and `b` through their strides `sc`, `sa`, `sb`.
    pub struct SelectParams {
        pub cond: In,
        pub a: In,
        pub b: In,
        pub out: Out,
        pub n: u32,
        pub rank: u32,
        pub dims: [u32; 8],
        pub sc: [u32; 8],
        pub sa: [u32; 8],
        pub sb: [u32; 8],
    }
}

crate::cuda_params! {
    /// `fused_elementwise`: `inputs` operands, input k read with strides `8k..8k+rank` of
    /// `strides_lo` (inputs 0 to 3) and `strides_hi` (4 to 7, at `8(k-4)`); `len`
    /// instructions encoded by `encode`, words 0 to 31 in `program_lo`, 32 to 63 in
    /// `program_hi`. (Two tables each: Rust derives `Default` only for arrays of up to 32
    /// entries.)
    pub struct FusedElementwiseParams {
        pub ins: [In; 8],
        pub out: Out,
        pub n: u32,
        pub rank: u32,
        pub inputs: u32,
        pub len: u32,
        pub dims: [u32; 8],
        pub strides_lo: [u32; 32],
        pub strides_hi: [u32; 32],
        pub program_lo: [u32; 32],
        pub program_hi: [u32; 32],
    }
}

crate::cuda_params! {
    /// `dequantize_q8`: the `n` values of a q8 weight at `x` (int8, then from word
    /// `scales_at` one f32 scale per row of `row_len`) as f16 (`half` 1) or f32.
    pub struct DequantizeQ8Params { pub x: u64, pub out: u64, pub n: u32, pub row_len: u32, pub scales_at: u32, pub half: u32 }
}

crate::cuda_params! {
    /// `cast_convert`: `x` converted to the output's dtype.
    pub struct CastParams { pub x: In, pub out: Out, pub n: u32 }
}

crate::cuda_params! {
    /// `scalar_read`: runtime scalar `index` of the u32 array at device address `scalars`.
    pub struct ScalarReadParams { pub out: Out, pub scalars: u64, pub index: u32 }
}

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![
        ParamsInfo::of::<UnaryParams>(),
        ParamsInfo::of::<BinaryParams>(),
        ParamsInfo::of::<SelectParams>(),
        ParamsInfo::of::<FusedElementwiseParams>(),
        ParamsInfo::of::<CastParams>(),
        ParamsInfo::of::<DequantizeQ8Params>(),
        ParamsInfo::of::<ScalarReadParams>(),
    ]
}

/// The element count as the kernels' `n`, or unsupported past u32 (they index in 32 bits).
fn count(op: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Unsupported {
        op: format!("{op} of {n} elements"),
        backend: "cuda (at most 2^32 - 1 elements)".into(),
    })
}

/// The merged output axes and each input's strides over them for `ctx`'s inputs broadcast
/// to its output, or unsupported beyond [`MAX_RANK`] axes.
fn broadcast(op: &str, ctx: &LowerCtx) -> Result<(Vec<usize>, Vec<Vec<usize>>)> {
    let out: &Shape = &ctx.output.ty.shape;
    let strides: Vec<Vec<usize>> = ctx.inputs.iter().map(|t| t.ty.shape.broadcast_strides(out)).collect();
    let (dims, strides) = coalesce(out.dims(), &strides);
    if dims.len() > MAX_RANK {
        return Err(Error::Unsupported {
            op: format!("{op} of output shape {out}"),
            backend: format!("cuda (at most {MAX_RANK} axes after merging)"),
        });
    }
    Ok((dims, strides))
}

pub fn unary(op: &Unary, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let params =
        UnaryParams { x: ctx.input(0), out: ctx.out(), n: count(op.kind.name(), n)?, op: code::unary(op.kind) };
    Ok(vec![Launch::Kernel(KernelLaunch::new("unary_map", &params).threads(n))])
}

/// The launch of `kernel` (binary or compare) computing `op_code` on two broadcast inputs.
fn binary_like(kernel: &'static str, name: &str, op_code: u32, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let (dims, strides) = broadcast(name, ctx)?;
    let params = BinaryParams {
        a: ctx.input(0),
        b: ctx.input(1),
        out: ctx.out(),
        n: count(name, n)?,
        rank: dims.len() as u32,
        op: op_code,
        ty: code::compute(ctx.inputs[0].ty.dtype),
        dims: dims8(&dims, 1),
        sa: dims8(&strides[0], 0),
        sb: dims8(&strides[1], 0),
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new(kernel, &params).threads(n))])
}

pub fn binary(op: &Binary, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    binary_like("binary_broadcast", op.kind.name(), code::binary(op.kind), ctx)
}

pub fn compare(op: &Compare, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    binary_like("compare_broadcast", op.kind.name(), code::cmp(op.kind), ctx)
}

pub fn select(_op: &Select, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let (dims, strides) = broadcast("where", ctx)?;
    let params = SelectParams {
        cond: ctx.input(0),
        a: ctx.input(1),
        b: ctx.input(2),
        out: ctx.out(),
        n: count("where", n)?,
        rank: dims.len() as u32,
        dims: dims8(&dims, 1),
        sc: dims8(&strides[0], 0),
        sa: dims8(&strides[1], 0),
        sb: dims8(&strides[2], 0),
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new("select_broadcast", &params).threads(n))])
}

/// One instruction as the kernel reads it: class << 4 | kind in the low byte, then the
/// operand bytes a, b, c (an input's index, or earlier instructions' indices).
fn encode(instr: Instr) -> u32 {
    let word = |class: u32, kind: u32, a: u32, b: u32, c: u32| class << 4 | kind | a << 8 | b << 16 | c << 24;
    match instr {
        Instr::Input(k) => word(code::INPUT, 0, k, 0, 0),
        Instr::Unary(kind, a) => word(code::UNARY, code::unary(kind), a, 0, 0),
        Instr::Binary(kind, a, b) => word(code::BINARY, code::binary(kind), a, b, 0),
        Instr::Select(c, a, b) => word(code::SELECT, 0, c, a, b),
        Instr::Compare(kind, a, b) => word(code::COMPARE, code::cmp(kind), a, b, 0),
        // Its bits follow it in the program.
        Instr::Const(_) => word(code::CONST, 0, 0, 0, 0),
    }
}

/// The program interpreted by one kernel, its inputs and instructions in the parameters.
/// Programs beyond [`MAX_FUSED_INPUTS`] inputs or [`MAX_FUSED_INSTRS`] instructions, or shapes
/// beyond [`MAX_RANK`] merged axes, are unsupported.
pub fn fused(op: &FusedElementwise, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let unsupported = |what: String, limit: String| Error::Unsupported {
        op: format!("fused_elementwise with {what}"),
        backend: format!("cuda ({limit})"),
    };
    let inputs = ctx.inputs.len();
    if inputs > MAX_FUSED_INPUTS {
        return Err(unsupported(format!("{inputs} inputs"), format!("at most {MAX_FUSED_INPUTS} inputs")));
    }
    let len = op.program.len();
    if len == 0 || len > MAX_FUSED_INSTRS {
        return Err(unsupported(format!("{len} instructions"), format!("1 to {MAX_FUSED_INSTRS} instructions")));
    }
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let (dims, strides) = broadcast("fused_elementwise", ctx)?;
    let mut params = FusedElementwiseParams {
        out: ctx.out(),
        n: count("fused_elementwise", n)?,
        rank: dims.len() as u32,
        inputs: inputs as u32,
        len: len as u32,
        dims: dims8(&dims, 1),
        ..Default::default()
    };
    for (k, s) in strides.iter().enumerate() {
        params.ins[k] = ctx.input(k);
        let table = if k < 4 { &mut params.strides_lo } else { &mut params.strides_hi };
        let at = (k % 4) * MAX_RANK;
        table[at..at + MAX_RANK].copy_from_slice(&dims8(s, 0));
    }
    let mut words = Vec::with_capacity(op.program.len());
    for &instr in &op.program {
        words.push(encode(instr));
        if let Instr::Const(v) = instr {
            words.push(v.to_bits());
        }
    }
    if words.len() > MAX_FUSED_INSTRS {
        let what = format!("{} instruction words (constants take two)", words.len());
        return Err(unsupported(what, format!("at most {MAX_FUSED_INSTRS} words")));
    }
    let (lo, hi) = words.split_at(words.len().min(32));
    params.program_lo[..lo.len()].copy_from_slice(lo);
    params.program_hi[..hi.len()].copy_from_slice(hi);
    Ok(vec![Launch::Kernel(KernelLaunch::new("fused_elementwise", &params).threads(n))])
}

pub fn cast(_op: &Cast, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let params = CastParams { x: ctx.input(0), out: ctx.out(), n: count("cast", n)? };
    Ok(vec![Launch::Kernel(KernelLaunch::new("cast_convert", &params).threads(n))])
}

/// A q8 weight read by `op`, dequantized into scratch (f16 for the tensor-core products of
/// products and convolutions with `Precision::F16`, else f32): the operand the op then reads
/// instead. The weight stays int8 in device memory; only the op running holds its widened copy.
pub fn dequantize_q8(operand: &Operand, ctx: &LowerCtx, op: &str) -> Result<(Operand, Launch)> {
    let ty = &operand.ty;
    let n = ty.numel();
    let product = matches!(op, "matmul" | "matmul_bias" | "conv1d");
    let half = product && ctx.precision == Precision::F16;
    let ptr = ctx.scratch.take(n * if half { 2 } else { 4 });
    let params = DequantizeQ8Params {
        x: operand.ptr,
        out: ptr,
        n: count(op, n)?,
        row_len: (n.checked_div(ty.q8_rows()).unwrap_or(0)) as u32,
        scales_at: n.div_ceil(4) as u32,
        half: u32::from(half),
    };
    let widened = Operand {
        ptr,
        kind: if half { kind::F16 } else { kind::F32 },
        ty: TensorType::new(if half { DType::F16 } else { DType::F32 }, ty.shape.clone()),
    };
    Ok((widened, Launch::Kernel(KernelLaunch::new("dequantize_q8", &params).threads(n))))
}

/// One thread copies the scalar; the value is read from `ctx.scalars` when the launch runs.
pub fn scalar(op: &ScalarRead, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let params = ScalarReadParams { out: ctx.out(), scalars: ctx.scalars, index: op.scalar.0 };
    Ok(vec![Launch::Kernel(KernelLaunch::new("scalar_read", &params).grid(1, 1, 1).block(32, 1, 1))])
}

#[cfg(test)]
mod tests {
    use susurrus_core::ScalarId;
    use susurrus_core::ir::{DType, TensorType};

    use super::super::Operand;
    use super::*;
    use crate::params::{KernelParams, dtype_code, kind};

    use crate::lower::testing::ty;

    /// Lowers with inputs at 0x1000, 0x2000, ... and the output at 0x9000_0000.
    fn lower_with(
        inputs: &[Operand],
        output: TensorType,
        f: impl Fn(&LowerCtx) -> Result<Vec<Launch>>,
    ) -> Result<Vec<Launch>> {
        crate::lower::testing::lower_at(inputs, 0x9000_0000, output, 0, f)
    }

    fn arena(k: u64, t: TensorType) -> Operand {
        Operand::arena(0x1000 * (k + 1), t)
    }

    fn the_launch(launches: Vec<Launch>) -> KernelLaunch {
        match launches.as_slice() {
            [Launch::Kernel(k)] => k.clone(),
            other => panic!("expected one kernel launch, got {other:?}"),
        }
    }

    fn out(dtype: DType) -> Out {
        Out { ptr: 0x9000_0000, dtype: dtype_code(dtype), pad: 0 }
    }

    fn input(k: u64, kind: u32) -> In {
        In { ptr: 0x1000 * (k + 1), kind, pad: 0 }
    }

    #[test]
    fn kernel_codes_match_the_kernel_defines() {
        let src = super::super::SOURCES[0].1;
        let define = |name: &str| -> u32 {
            let head = format!("#define {name} ");
            let line = src.lines().find(|l| l.starts_with(&head)).unwrap_or_else(|| panic!("no {name}"));
            line[head.len()..].trim().trim_end_matches('u').parse().unwrap()
        };
        for kind in UnaryKind::ALL {
            assert_eq!(code::unary(kind), define(&format!("EW_{}", kind.name().to_uppercase())), "{kind:?}");
        }
        for kind in BinaryKind::ALL {
            assert_eq!(code::binary(kind), define(&format!("EW_{}", kind.name().to_uppercase())), "{kind:?}");
        }
        for kind in CmpKind::ALL {
            assert_eq!(code::cmp(kind), define(&format!("EW_{}", kind.name().to_uppercase())), "{kind:?}");
        }
        assert_eq!(code::compute(DType::F16), define("EW_FLOAT"));
        assert_eq!(code::compute(DType::I32), define("EW_INT"));
        assert_eq!(code::compute(DType::U32), define("EW_UINT"));
        assert_eq!(code::INPUT, define("EW_INSTR_INPUT"));
        assert_eq!(code::UNARY, define("EW_INSTR_UNARY"));
        assert_eq!(code::BINARY, define("EW_INSTR_BINARY"));
        assert_eq!(code::SELECT, define("EW_INSTR_SELECT"));
        assert_eq!(code::COMPARE, define("EW_INSTR_COMPARE"));
        assert_eq!(MAX_RANK as u32, define("EW_MAX_RANK"));
        assert_eq!(MAX_FUSED_INPUTS as u32, define("EW_MAX_INPUTS"));
        assert_eq!(MAX_FUSED_INSTRS as u32, define("EW_MAX_INSTRS"));
    }

    #[test]
    fn every_kernel_takes_the_params_its_lowering_passes() {
        let src = crate::source::module_source();
        let kernels = [
            ("unary_map", UnaryParams::NAME),
            ("binary_broadcast", BinaryParams::NAME),
            ("compare_broadcast", BinaryParams::NAME),
            ("select_broadcast", SelectParams::NAME),
            ("fused_elementwise", FusedElementwiseParams::NAME),
            ("cast_convert", CastParams::NAME),
            ("scalar_read", ScalarReadParams::NAME),
        ];
        for (kernel, params) in kernels {
            assert_eq!(crate::source::kernel_params_type(&src, kernel).as_deref(), Some(params), "{kernel}");
        }
    }

    #[test]
    fn unary_is_one_thread_per_element() {
        // An f16 weight (native halves) through gelu into an f16 result: 3 * 100 = 300 elements, 2 blocks.
        let x = Operand { ptr: 0x1000, kind: kind::F16, ty: ty(DType::F16, &[3, 100]) };
        let launch = the_launch(
            lower_with(&[x], ty(DType::F16, &[3, 100]), |c| unary(&Unary { kind: UnaryKind::Gelu }, c)).unwrap(),
        );
        assert_eq!(launch.name, "unary_map");
        assert_eq!((launch.grid, launch.block), ([2, 1, 1], [256, 1, 1]));
        let want = UnaryParams { x: input(0, kind::F16), out: out(DType::F16), n: 300, op: 7 };
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn empty_outputs_launch_nothing() {
        let x = arena(0, ty(DType::F32, &[0, 4]));
        assert_eq!(
            lower_with(std::slice::from_ref(&x), ty(DType::F32, &[0, 4]), |c| unary(
                &Unary { kind: UnaryKind::Exp },
                c
            )),
            Ok(vec![])
        );
        let b = arena(1, ty(DType::F32, &[4]));
        let add = Binary { kind: BinaryKind::Add };
        assert_eq!(lower_with(&[x.clone(), b], ty(DType::F32, &[0, 4]), |c| binary(&add, c)), Ok(vec![]));
        assert_eq!(lower_with(&[x], ty(DType::I32, &[0, 4]), |c| cast(&Cast { to: DType::I32 }, c)), Ok(vec![]));
    }

    #[test]
    fn binary_merges_axes_and_broadcasts() {
        // a [2,1,3,4] and b [3,4] broadcast to [2,1,3,4]: the size-1 axis goes, axes 2 and 3
        // merge (a: 4 = 1 * 4, b: 4 = 1 * 4), axis 0 stays (b is broadcast there): dims [2,12],
        // a strides [12,1], b strides [0,1].
        let a = arena(0, ty(DType::I32, &[2, 1, 3, 4]));
        let b = arena(1, ty(DType::I32, &[3, 4]));
        let op = Binary { kind: BinaryKind::Div };
        let launch = the_launch(lower_with(&[a, b], ty(DType::I32, &[2, 1, 3, 4]), |c| binary(&op, c)).unwrap());
        assert_eq!(launch.name, "binary_broadcast");
        assert_eq!(launch.grid, [1, 1, 1]);
        let want = BinaryParams {
            a: input(0, kind::I32),
            b: input(1, kind::I32),
            out: out(DType::I32),
            n: 24,
            rank: 2,
            op: 3,
            ty: 1,
            dims: [2, 12, 1, 1, 1, 1, 1, 1],
            sa: [12, 1, 0, 0, 0, 0, 0, 0],
            sb: [0, 1, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn binary_broadcasts_both_ways_and_same_shapes_are_one_axis() {
        // [5,1,7] f16 against [3,7]: output [5,3,7]; nothing merges (a: 7 != 0 * 3; b: 0 != 7 * 3).
        let a = arena(0, ty(DType::F16, &[5, 1, 7]));
        let b = Operand { ptr: 0x2000, kind: kind::F16, ty: ty(DType::F16, &[3, 7]) };
        let op = Binary { kind: BinaryKind::Max };
        let launch = the_launch(lower_with(&[a, b], ty(DType::F16, &[5, 3, 7]), |c| binary(&op, c)).unwrap());
        let want = BinaryParams {
            a: input(0, kind::F32),
            b: input(1, kind::F16),
            out: out(DType::F16),
            n: 105,
            rank: 3,
            op: 4,
            ty: 0,
            dims: [5, 3, 7, 1, 1, 1, 1, 1],
            sa: [7, 0, 1, 0, 0, 0, 0, 0],
            sb: [0, 7, 1, 0, 0, 0, 0, 0],
        };
        assert_eq!(launch.params, want.to_bytes());

        // Same shapes of rank 3, and a scalar operand: one axis.
        let s = arena(0, ty(DType::U32, &[]));
        let a = arena(1, ty(DType::U32, &[2, 3, 4]));
        let launch = the_launch(
            lower_with(&[s, a], ty(DType::U32, &[2, 3, 4]), |c| binary(&Binary { kind: BinaryKind::Sub }, c)).unwrap(),
        );
        let want = BinaryParams {
            a: input(0, kind::U32),
            b: input(1, kind::U32),
            out: out(DType::U32),
            n: 24,
            rank: 1,
            op: 1,
            ty: 2,
            dims: [24, 1, 1, 1, 1, 1, 1, 1],
            sa: [0; 8],
            sb: [1, 0, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn scalar_outputs_have_no_axes() {
        let a = arena(0, ty(DType::F32, &[1, 1]));
        let b = arena(1, ty(DType::F32, &[]));
        let op = Compare { kind: CmpKind::Ne };
        let launch = the_launch(lower_with(&[a, b], ty(DType::U32, &[1, 1]), |c| compare(&op, c)).unwrap());
        assert_eq!(launch.name, "compare_broadcast");
        let want = BinaryParams {
            a: input(0, kind::F32),
            b: input(1, kind::F32),
            out: out(DType::U32),
            n: 1,
            rank: 0,
            op: 1,
            ty: 0,
            dims: [1; 8],
            sa: [0; 8],
            sb: [0; 8],
        };
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn compare_computes_in_the_inputs_dtype() {
        let a = arena(0, ty(DType::U32, &[4, 3]));
        let b = arena(1, ty(DType::U32, &[3]));
        let op = Compare { kind: CmpKind::Ge };
        let launch = the_launch(lower_with(&[a, b], ty(DType::U32, &[4, 3]), |c| compare(&op, c)).unwrap());
        let want = BinaryParams {
            a: input(0, kind::U32),
            b: input(1, kind::U32),
            out: out(DType::U32),
            n: 12,
            rank: 2,
            op: 5,
            ty: 2,
            dims: [4, 3, 1, 1, 1, 1, 1, 1],
            sa: [3, 1, 0, 0, 0, 0, 0, 0],
            sb: [0, 1, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn select_reads_three_operands() {
        // cond [3,1] u32, a [3,5] f32, b [5] f32 -> [3,5].
        let cond = arena(0, ty(DType::U32, &[3, 1]));
        let a = arena(1, ty(DType::F32, &[3, 5]));
        let b = arena(2, ty(DType::F32, &[5]));
        let launch = the_launch(lower_with(&[cond, a, b], ty(DType::F32, &[3, 5]), |c| select(&Select, c)).unwrap());
        assert_eq!(launch.name, "select_broadcast");
        let want = SelectParams {
            cond: input(0, kind::U32),
            a: input(1, kind::F32),
            b: input(2, kind::F32),
            out: out(DType::F32),
            n: 15,
            rank: 2,
            dims: [3, 5, 1, 1, 1, 1, 1, 1],
            sc: [1, 0, 0, 0, 0, 0, 0, 0],
            sa: [5, 1, 0, 0, 0, 0, 0, 0],
            sb: [0, 1, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn more_than_eight_unmergeable_axes_are_unsupported() {
        // [2,1,2,1,...] against [2,2,2,...] of rank 9: no two neighbouring axes merge.
        let full = arena(0, ty(DType::F32, &[2; 9]));
        let alternating: Vec<usize> = (0..9).map(|d| if d % 2 == 0 { 2 } else { 1 }).collect();
        let alt = arena(1, ty(DType::F32, &alternating));
        let err = lower_with(&[full.clone(), alt.clone()], ty(DType::F32, &[2; 9]), |c| {
            binary(&Binary { kind: BinaryKind::Add }, c)
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "add of output shape [2,2,2,2,2,2,2,2,2] is not supported by the cuda (at most 8 axes after merging) backend"
        );
        // Same shapes of rank 9 merge into one axis.
        assert!(
            lower_with(&[full.clone(), full], ty(DType::F32, &[2; 9]), |c| binary(
                &Binary { kind: BinaryKind::Add },
                c
            ))
            .is_ok()
        );
    }

    #[test]
    fn fused_programs_are_encoded_with_their_inputs_strides() {
        use Instr::{Binary as B, Input as I, Select as S, Unary as U};
        // x [4,6] f32, y [6] f16 weight, z [4,1] f32, cond [4,6] u32, k [] f32:
        // tanh(x*y + z) where cond else x, times k. Output [4,6]: nothing merges (y and z
        // broadcast on different axes), dims [4,6].
        let program = vec![
            I(0),
            I(1),
            I(2),
            I(3),
            I(4),
            B(BinaryKind::Mul, 0, 1),
            B(BinaryKind::Add, 5, 2),
            U(UnaryKind::Tanh, 6),
            S(3, 7, 0),
            B(BinaryKind::Mul, 8, 4),
        ];
        let inputs = [
            arena(0, ty(DType::F32, &[4, 6])),
            Operand { ptr: 0x2000, kind: kind::F16, ty: ty(DType::F16, &[6]) },
            arena(2, ty(DType::F32, &[4, 1])),
            arena(3, ty(DType::U32, &[4, 6])),
            arena(4, ty(DType::F32, &[])),
        ];
        let op = FusedElementwise { program, dtype: DType::F16 };
        let launch = the_launch(lower_with(&inputs, ty(DType::F16, &[4, 6]), |c| fused(&op, c)).unwrap());
        assert_eq!(launch.name, "fused_elementwise");
        assert_eq!(launch.grid, [1, 1, 1]);
        let mut want = FusedElementwiseParams {
            out: out(DType::F16),
            n: 24,
            rank: 2,
            inputs: 5,
            len: 10,
            dims: [4, 6, 1, 1, 1, 1, 1, 1],
            ..Default::default()
        };
        want.ins[..5].copy_from_slice(&[
            input(0, kind::F32),
            input(1, kind::F16),
            input(2, kind::F32),
            input(3, kind::U32),
            input(4, kind::F32),
        ]);
        // Input k's strides at 8k: x [6,1], y [0,1], z [1,0], cond [6,1]; then k [0,0] at 0 of the high table.
        for (k, s) in [[6, 1], [0, 1], [1, 0], [6, 1]].iter().enumerate() {
            want.strides_lo[8 * k..8 * k + 2].copy_from_slice(s);
        }
        // Low byte class << 4 | kind, then operands a, b, c.
        want.program_lo[..10].copy_from_slice(&[
            0x0000_0000,
            0x0000_0100,
            0x0000_0200,
            0x0000_0300,
            0x0000_0400,
            0x0001_0022,
            0x0002_0520,
            0x0000_0615,
            0x0007_0330,
            0x0004_0822,
        ]);
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn fused_select_operands_fill_three_bytes() {
        assert_eq!(encode(Instr::Select(3, 7, 0)), 0x0007_0330);
        assert_eq!(encode(Instr::Select(1, 2, 31)), 0x1f02_0130);
        assert_eq!(encode(Instr::Unary(UnaryKind::Silu, 30)), 0x0000_1e1a);
        assert_eq!(encode(Instr::Binary(BinaryKind::Min, 1, 2)), 0x0002_0125);
        // Compare class 4, kind ge = 5.
        assert_eq!(encode(Instr::Compare(CmpKind::Ge, 4, 9)), 0x0009_0445);
    }

    #[test]
    fn fused_inputs_past_four_use_the_high_stride_table() {
        let shapes: [&[usize]; 6] = [&[2, 3], &[3], &[2, 1], &[], &[1, 3], &[2, 3]];
        let inputs: Vec<Operand> = shapes.iter().enumerate().map(|(k, d)| arena(k as u64, ty(DType::F32, d))).collect();
        let program: Vec<Instr> = (0..6).map(Instr::Input).chain([Instr::Binary(BinaryKind::Add, 4, 5)]).collect();
        let op = FusedElementwise { program, dtype: DType::F32 };
        let launch = the_launch(lower_with(&inputs, ty(DType::F32, &[2, 3]), |c| fused(&op, c)).unwrap());
        let bytes = launch.params;
        let at = std::mem::offset_of!(FusedElementwiseParams, strides_hi);
        let word = |w: usize| u32::from_le_bytes(bytes[at + 4 * w..at + 4 * w + 4].try_into().unwrap());
        // Input 4 ([1,3]): strides [0,1] at 0; input 5 ([2,3]): [3,1] at 8.
        assert_eq!([word(0), word(1), word(8), word(9)], [0, 1, 3, 1]);
    }

    #[test]
    fn fused_limits_are_unsupported() {
        let x = arena(0, ty(DType::F32, &[4]));
        let nine = vec![x.clone(); 9];
        let op = FusedElementwise { program: (0..9).map(Instr::Input).collect(), dtype: DType::F32 };
        let err = lower_with(&nine, ty(DType::F32, &[4]), |c| fused(&op, c)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "fused_elementwise with 9 inputs is not supported by the cuda (at most 8 inputs) backend"
        );
        let mut program = vec![Instr::Input(0)];
        program.extend((0..64).map(|j| Instr::Unary(UnaryKind::Neg, j)));
        let op = FusedElementwise { program, dtype: DType::F32 };
        let err = lower_with(std::slice::from_ref(&x), ty(DType::F32, &[4]), |c| fused(&op, c)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "fused_elementwise with 65 instructions is not supported by the cuda (1 to 64 instructions) backend"
        );
        // Exactly 64 instructions and 8 inputs fit.
        let mut program: Vec<Instr> = (0..8).map(Instr::Input).collect();
        program.extend((7..63).map(|j| Instr::Unary(UnaryKind::Neg, j)));
        assert_eq!(program.len(), 64);
        let op = FusedElementwise { program, dtype: DType::F32 };
        assert!(lower_with(&vec![x; 8], ty(DType::F32, &[4]), |c| fused(&op, c)).is_ok());
    }

    #[test]
    fn cast_passes_the_source_kind_and_target_dtype() {
        let x = Operand { ptr: 0x1000, kind: kind::F16, ty: ty(DType::F16, &[10]) };
        let launch =
            the_launch(lower_with(&[x], ty(DType::U32, &[10]), |c| cast(&Cast { to: DType::U32 }, c)).unwrap());
        assert_eq!(launch.name, "cast_convert");
        let want = CastParams { x: input(0, kind::F16), out: out(DType::U32), n: 10 };
        assert_eq!(launch.params, want.to_bytes());
    }

    #[test]
    fn scalar_reads_the_runs_scalars_on_the_device() {
        let launch = the_launch(
            lower_with(&[], ty(DType::U32, &[]), |c| scalar(&ScalarRead { scalar: ScalarId(3) }, c)).unwrap(),
        );
        assert_eq!(launch.name, "scalar_read");
        assert_eq!((launch.grid, launch.block), ([1, 1, 1], [32, 1, 1]));
        let want = ScalarReadParams { out: out(DType::U32), scalars: 0x9000, index: 3 };
        assert_eq!(launch.params, want.to_bytes());
    }
}
