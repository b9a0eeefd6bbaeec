//! Fused elementwise: a small straight-line program over broadcast inputs, emitted by the
//! elementwise fusion pass so a chain of unary/binary/where ops runs as one kernel.
//!
//! Every instruction produces one f32 value per output element; the last one is the result,
//! rounded to `dtype`. Inputs of any dtype are read as f32 and broadcast to the output shape
//! (the broadcast of all input shapes).

use super::{BinaryKind, EvalCtx, Memory, OpKind, UnaryKind};
use crate::error::{Error, Result};
use crate::ir::{DType, Shape, TensorType};
use crate::tensor::Tensor;

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
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime("fused_elementwise", "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}
