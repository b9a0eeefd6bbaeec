//! Fused elementwise: a small straight-line program over broadcast inputs, emitted by the
//! elementwise fusion pass so a chain of unary/binary/where ops runs as one kernel.
//!
//! Every instruction produces one f32 value per output element; the last one is the result,
//! rounded to `dtype`. Inputs of any dtype are read as f32 and broadcast to the output shape
//! (the broadcast of all input shapes).

use std::borrow::Cow;
use std::fmt::Write;

use super::binary::{broadcast_indices, gather_f32};
use super::cpu_kernels::par_chunks;
use super::{BinaryKind, EvalCtx, Memory, OpKind, UnaryKind};
use crate::error::{Error, Result};
use crate::exec::index::coalesce;
use crate::exec::wgpu::{KernelCtx, KernelSpec, Lowering, pack_dims};
use crate::harness::Dist;
use crate::harness::cases::{BUDGET, CHAIN, CaseGen, ODD, SIZES, ty};
use crate::ir::{DType, Graph, Shape, TensorType};
use crate::tensor::Tensor;

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
            Instr::Unary(k, a) => k.wgsl(&v(a)),
            Instr::Binary(k, a, b) => k.wgsl(&v(a), &v(b)),
            // Not `!= 0.0`: compilers may emit an ordered not-equal, false for a NaN condition,
            // where the reference (Rust's `!=`) picks `a`.
            Instr::Select(c, a, b) => format!("select({}, {}, !({} == 0.0))", v(b), v(a), v(c)),
        };
        let _ = writeln!(s, "    let v{j} = {expr};");
    }
    s
}

/// One step of a fused program. Operands name earlier instructions by index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instr {
    /// Load fused input `n` at the current element.
    Input(u32),
    Unary(UnaryKind, u32),
    Binary(BinaryKind, u32, u32),
    /// `where(cond != 0, a, b)`.
    Select(u32, u32, u32),
}

#[derive(Clone, Debug, PartialEq)]
pub struct FusedElementwise {
    pub program: Vec<Instr>,
    /// The output dtype (a float).
    pub dtype: DType,
}

impl FusedElementwise {
    /// Runs the program for one element; `load(n)` is input `n` there. Returns the last value.
    fn run(&self, regs: &mut [f32], load: impl Fn(usize) -> f32) -> f32 {
        for (i, ins) in self.program.iter().enumerate() {
            regs[i] = match *ins {
                Instr::Input(n) => load(n as usize),
                Instr::Unary(k, a) => k.apply(regs[a as usize]),
                Instr::Binary(k, a, b) => k.apply(regs[a as usize], regs[b as usize]),
                Instr::Select(c, a, b) => regs[if regs[c as usize] != 0.0 { a } else { b } as usize],
            };
        }
        regs[self.program.len() - 1]
    }
}

impl OpKind for FusedElementwise {
    fn name(&self) -> &'static str {
        "fused_elementwise"
    }
    fn attrs(&self) -> String {
        let steps: Vec<String> = self
            .program
            .iter()
            .map(|i| match *i {
                Instr::Input(n) => format!("in{n}"),
                Instr::Unary(k, a) => format!("{}(${a})", k.name()),
                Instr::Binary(k, a, b) => format!("{}(${a},${b})", k.name()),
                Instr::Select(c, a, b) => format!("where(${c},${a},${b})"),
            })
            .collect();
        format!("{{{}}}", steps.join("; "))
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        let op = "fused_elementwise";
        if self.program.is_empty() || !self.dtype.is_float() {
            return Err(Error::shape(op, "needs a non-empty program with a float output"));
        }
        for (i, ins) in self.program.iter().enumerate() {
            let ok = match *ins {
                Instr::Input(n) => (n as usize) < inputs.len(),
                Instr::Unary(_, a) => (a as usize) < i,
                Instr::Binary(_, a, b) => (a as usize) < i && (b as usize) < i,
                Instr::Select(c, a, b) => (c as usize) < i && (a as usize) < i && (b as usize) < i,
            };
            if !ok {
                return Err(Error::shape(
                    op,
                    format!("instruction {i} ({ins:?}) refers to a value not defined before it"),
                ));
            }
        }
        let mut shape = Shape::scalar();
        for t in inputs {
            shape = Shape::broadcast(&shape, &t.shape)
                .ok_or_else(|| Error::shape(op, format!("input {t} does not broadcast with {shape}")))?;
        }
        Ok(TensorType::new(self.dtype, shape))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let tys: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
        let ty = self.infer(&tys.iter().collect::<Vec<_>>())?;
        // Inputs of the output's shape are read in place; only broadcast ones are expanded.
        let loaded: Vec<Cow<[f32]>> = inputs
            .iter()
            .map(|t| {
                if t.shape() == &ty.shape {
                    t.to_f32_cow()
                } else {
                    Cow::Owned(gather_f32(t, &broadcast_indices(t.shape(), &ty.shape)))
                }
            })
            .collect();
        let mut out = vec![0.0f32; ty.numel()];
        par_chunks(&mut out, 1, ty.numel() * self.program.len() * 4, |first, chunk| {
            let mut regs = vec![0.0f32; self.program.len()];
            for (i, v) in chunk.iter_mut().enumerate() {
                *v = self.run(&mut regs, |n| loaded[n][first + i]);
            }
        });
        Tensor::from_f32(ty.dtype, ty.shape, out)
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
    /// One thread per output element: the program compiled into straight-line WGSL, each
    /// input read at its own broadcast offset (see [`FusedParams`]). More inputs than one
    /// dispatch can bind, or more coalesced axes than the parameters hold, are unsupported.
    fn kernel(&self, ctx: &KernelCtx) -> Result<Lowering> {
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
        let last = self.program.len().saturating_sub(1);
        let spec =
            KernelSpec::new("fused_elementwise", include_str!("../../../../kernels/fused_elementwise.wgsl"), &params)
                .define("OFFSETS", offsets_wgsl(rank, inputs))
                .define("BODY", body_wgsl(&self.program))
                .define("RESULT", format!("v{last}"))
                .threads(n);
        Ok(Lowering::Kernel(spec))
    }
}

/// Harness cases: a program over broadcast inputs of several dtypes and a constant, and one that
/// uses every unary and binary kind.
pub(crate) fn harness_cases(cases: &mut CaseGen) -> Result<()> {
    use Instr::{Binary as B, Input as In, Select as Sel, Unary as U};
    // Broadcast inputs of several dtypes and a constant: x [R,C] f32, y [C] f16, z [R,1]
    // f32, cond [R,C] u32, k [] constant. tanh(x*y + z) where cond, else x; then gelu, * k.
    let (r, c) = (cases.pick(&SIZES), cases.pick(&ODD));
    let program = vec![
        In(0),
        In(1),
        In(2),
        In(3),
        In(4),
        B(BinaryKind::Mul, 0, 1),
        B(BinaryKind::Add, 5, 2),
        U(UnaryKind::Tanh, 6),
        Sel(3, 7, 0),
        U(UnaryKind::Gelu, 8),
        B(BinaryKind::Mul, 9, 4),
    ];
    for dtype in [DType::F32, DType::F16] {
        let mut g = Graph::new("fused_elementwise");
        let x = g.input("x", ty(DType::F32, &[r, c]))?;
        let y = g.input("y", ty(DType::F16, &[c]))?;
        let z = g.input("z", ty(DType::F32, &[r, 1]))?;
        let cond = g.input("cond", ty(DType::U32, &[r, c]))?;
        let k = cases.constant(&mut g, ty(DType::F32, &[]), Dist::default_for(DType::F32));
        let out = g.push(FusedElementwise { program: program.clone(), dtype }, &[x, y, z, cond, k])?;
        g.output("out", out)?;
        let label = format!("fused_elementwise {dtype} {} instrs", program.len());
        cases.push("fused_elementwise", &label, g, CHAIN, &[("cond", Dist::Ints { lo: 0, hi: 2 })])?;
    }

    // Every unary and binary kind in one program over x [R,C] and y [C]; log, sqrt and
    // rsqrt read exp(x), which is positive, and div divides by it.
    let mut program = vec![In(0), In(1), U(UnaryKind::Exp, 0)];
    let positive_arg = |k: UnaryKind| matches!(k, UnaryKind::Log | UnaryKind::Sqrt | UnaryKind::Rsqrt);
    let mut results = Vec::new();
    for kind in UnaryKind::ALL.into_iter().filter(|&k| k != UnaryKind::Exp) {
        program.push(U(kind, if positive_arg(kind) { 2 } else { 1 }));
        results.push(program.len() as u32 - 1);
    }
    let mut acc = 2;
    for (i, kind) in BinaryKind::ALL.into_iter().enumerate() {
        let operand = if kind == BinaryKind::Div { 2 } else { results[i % results.len()] };
        program.push(B(kind, acc, operand));
        acc = program.len() as u32 - 1;
    }
    for &res in &results {
        program.push(B(BinaryKind::Add, acc, res));
        acc = program.len() as u32 - 1;
    }
    let dims = cases.shape(2, BUDGET);
    let row = [dims[1]];
    let dtype = if cases.coin() { DType::F32 } else { DType::F16 };
    let mut g = Graph::new("fused_elementwise");
    let x = g.input("x", ty(DType::F32, &dims))?;
    let y = g.input("y", ty(DType::F32, &row))?;
    let out = g.push(FusedElementwise { program: program.clone(), dtype }, &[x, y])?;
    g.output("out", out)?;
    let label = format!("fused_elementwise {dtype} every kind {} instrs", program.len());
    cases.push("fused_elementwise", &label, g, CHAIN, &[])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::eval_op;
    use crate::ops::{Binary, Cast, Select, Unary};

    fn fused(program: Vec<Instr>, dtype: DType, inputs: &[&Tensor]) -> Result<Tensor> {
        eval_op(FusedElementwise { program, dtype }, inputs)
    }

    #[test]
    fn hand_computed_program() {
        // relu(x * w - 1), w [2] broadcast over the rows of x [2,2], 1 a scalar:
        // x * w = [[2, -6], [0.5, 3]]; - 1 = [[1, -7], [-0.5, 2]]; relu = [[1, 0], [0, 2]].
        let x = Tensor::f32([2, 2], vec![1.0, -2.0, 0.25, 1.0]).unwrap();
        let w = Tensor::f32([2], vec![2.0, 3.0]).unwrap();
        let one = Tensor::scalar_f32(1.0);
        let program = vec![
            Instr::Input(0),
            Instr::Input(1),
            Instr::Binary(BinaryKind::Mul, 0, 1),
            Instr::Input(2),
            Instr::Binary(BinaryKind::Sub, 2, 3),
            Instr::Unary(UnaryKind::Relu, 4),
        ];
        let y = fused(program, DType::F32, &[&x, &w, &one]).unwrap();
        assert_eq!(y.shape(), &Shape::from([2, 2]));
        assert_eq!(y.to_f32(), vec![1.0, 0.0, 0.0, 2.0]);
    }

    #[test]
    fn equals_the_composition_of_primitive_ops() {
        // where(m, gelu(x + b), exp(x)) / b, rounded to f16 once at the end. The primitives
        // compute the same f32 operations in the same order, so the results agree bit for bit.
        let x = Tensor::f32([2, 3], (0..6).map(|i| (i as f32 * 0.37).sin() * 3.0).collect()).unwrap();
        let b = Tensor::f32([3], vec![0.5, -1.25, 2.0]).unwrap();
        let m = Tensor::u32([2, 1], vec![0, 5]).unwrap();
        let program = vec![
            Instr::Input(0),
            Instr::Input(1),
            Instr::Binary(BinaryKind::Add, 0, 1),
            Instr::Unary(UnaryKind::Gelu, 2),
            Instr::Input(2),
            Instr::Unary(UnaryKind::Exp, 0),
            Instr::Select(4, 3, 5),
            Instr::Binary(BinaryKind::Div, 6, 1),
        ];
        let got = fused(program, DType::F16, &[&x, &b, &m]).unwrap();

        let bin = |kind, a: &Tensor, b: &Tensor| eval_op(Binary { kind }, &[a, b]).unwrap();
        let un = |kind, a: &Tensor| eval_op(Unary { kind }, &[a]).unwrap();
        let t = un(UnaryKind::Gelu, &bin(BinaryKind::Add, &x, &b));
        let s = eval_op(Select, &[&m, &t, &un(UnaryKind::Exp, &x)]).unwrap();
        let want = eval_op(Cast { to: DType::F16 }, &[&bin(BinaryKind::Div, &s, &b)]).unwrap();
        assert_eq!(got, want);
        // Row 0 took exp(x) / b, row 1 gelu(x + b) / b: spot-check one of each by hand.
        // x[0,0] = 0: exp(0) / 0.5 = 2. x[1,2] = 3 sin(1.85) = 2.8838; + 2 = 4.8838;
        // gelu is ~identity there (erf(3.45) = 1 - 6e-7): 4.8838 / 2 = 2.4419 -> f16 2.441.
        assert_eq!(got.to_f32()[0], 2.0);
        assert!((got.to_f32()[5] - 2.4419).abs() < 2e-3, "{:?}", got.to_f32());
    }

    #[test]
    fn infer_rejects_bad_programs() {
        let f = TensorType::new(DType::F32, [2]);
        let g = TensorType::new(DType::F32, [3]);
        let err = |program: Vec<Instr>, dtype, inputs: &[&TensorType]| {
            FusedElementwise { program, dtype }.infer(inputs).unwrap_err().to_string()
        };
        assert_eq!(
            err(vec![Instr::Input(0), Instr::Unary(UnaryKind::Exp, 1)], DType::F32, &[&f]),
            "fused_elementwise: instruction 1 (Unary(Exp, 1)) refers to a value not defined before it"
        );
        assert_eq!(
            err(vec![Instr::Input(1)], DType::F32, &[&f]),
            "fused_elementwise: instruction 0 (Input(1)) refers to a value not defined before it"
        );
        assert_eq!(
            err(vec![Instr::Input(0), Instr::Select(0, 0, 2)], DType::F32, &[&f]),
            "fused_elementwise: instruction 1 (Select(0, 0, 2)) refers to a value not defined before it"
        );
        assert_eq!(
            err(vec![Instr::Input(0)], DType::I32, &[&f]),
            "fused_elementwise: needs a non-empty program with a float output"
        );
        assert_eq!(
            err(vec![Instr::Input(0)], DType::F32, &[&f, &g]),
            "fused_elementwise: input f32[3] does not broadcast with [2]"
        );
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

    /// The kernel's error for a program loading inputs of these shapes, or `None` if it has one.
    fn kernel_error(shapes: &[Vec<usize>]) -> Option<String> {
        let tys: Vec<TensorType> = shapes.iter().map(|d| TensorType::new(DType::F32, d.clone())).collect();
        let refs: Vec<&TensorType> = tys.iter().collect();
        let op = FusedElementwise { program: (0..shapes.len() as u32).map(Instr::Input).collect(), dtype: DType::F32 };
        let out = op.infer(&refs).unwrap();
        op.kernel(&KernelCtx { inputs: &refs, output: &out, f16: false, cpu: false }).err().map(|e| e.to_string())
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
