//! Fused elementwise: a small straight-line program over broadcast inputs, emitted by the
//! elementwise fusion pass so a chain of unary/binary/where ops runs as one kernel.
//!
//! Every instruction produces one f32 value per output element; the last one is the result,
//! rounded to `dtype`. Inputs of any dtype are read as f32 and broadcast to the output shape
//! (the broadcast of all input shapes). Comparisons give 1.0 or 0.0 (a condition for a later
//! `where`).

use super::binary::{broadcast_indices, gather_f32};
use super::cpu_kernels::par_chunks;
use super::{BinaryKind, CmpKind, EvalCtx, Memory, OpKind, UnaryKind};
use crate::error::{Error, Result};
use crate::ir::{DType, Shape, TensorType};
use crate::tensor::Tensor;
use std::borrow::Cow;

/// One step of a fused program. Operands name earlier instructions by index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instr {
    /// Load fused input `n` at the current element.
    Input(u32),
    /// A constant (a scalar constant of the graph, held in the program instead of read).
    Const(f32),
    Unary(UnaryKind, u32),
    Binary(BinaryKind, u32, u32),
    /// `a <kind> b` on the f32 values: 1.0 where it holds, else 0.0.
    Compare(CmpKind, u32, u32),
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
                Instr::Const(v) => v,
                Instr::Unary(k, a) => k.apply(regs[a as usize]),
                Instr::Binary(k, a, b) => k.apply(regs[a as usize], regs[b as usize]),
                Instr::Compare(k, a, b) => f32::from(u8::from(k.holds(regs[a as usize], regs[b as usize]))),
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
                Instr::Const(v) => format!("{v}"),
                Instr::Unary(k, a) => format!("{}(${a})", k.name()),
                Instr::Binary(k, a, b) => format!("{}(${a},${b})", k.name()),
                Instr::Compare(k, a, b) => format!("{}(${a},${b})", k.name()),
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
                Instr::Const(_) => true,
                Instr::Unary(_, a) => (a as usize) < i,
                Instr::Binary(_, a, b) | Instr::Compare(_, a, b) => (a as usize) < i && (b as usize) < i,
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
    fn comparisons_give_one_or_zero_for_a_later_where() {
        // where(x >= lo, where(x < hi, -1, x), x) with lo, hi broadcast scalars: ids 2 and 3
        // of 0..5 banned. NaN compares false (only `ne` holds).
        let x = Tensor::f32([6], vec![0.0, 1.0, 2.0, 3.0, 4.0, f32::NAN]).unwrap();
        let (lo, hi, ban) =
            (Tensor::u32([], vec![2]).unwrap(), Tensor::u32([], vec![4]).unwrap(), Tensor::scalar_f32(-1.0));
        let program = vec![
            Instr::Input(0),
            Instr::Input(1),
            Instr::Compare(CmpKind::Ge, 0, 1),
            Instr::Input(2),
            Instr::Compare(CmpKind::Lt, 0, 3),
            Instr::Input(3),
            Instr::Select(4, 5, 0),
            Instr::Select(2, 6, 0),
        ];
        let y = fused(program, DType::F32, &[&x, &lo, &hi, &ban]).unwrap().to_f32();
        assert_eq!(y[..5], [0.0, 1.0, -1.0, -1.0, 4.0]);
        assert!(y[5].is_nan());
        let ne = vec![Instr::Input(0), Instr::Input(0), Instr::Compare(CmpKind::Ne, 0, 1)];
        assert_eq!(fused(ne, DType::F32, &[&x]).unwrap().to_f32(), [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
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
}
