//! Binary elementwise ops with numpy-style broadcasting.
//!
//! Floats compute in f32 (f16 rounds on output); integers compute exactly (division
//! truncates toward zero; division by zero is a run-time error).

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Shape, TensorType};
use crate::tensor::Tensor;

/// Which function a [`Binary`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryKind {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

impl BinaryKind {
    pub const ALL: [BinaryKind; 6] =
        [BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Div, BinaryKind::Max, BinaryKind::Min];

    pub fn name(self) -> &'static str {
        match self {
            BinaryKind::Add => "add",
            BinaryKind::Sub => "sub",
            BinaryKind::Mul => "mul",
            BinaryKind::Div => "div",
            BinaryKind::Max => "max",
            BinaryKind::Min => "min",
        }
    }

    /// The scalar function on floats (also used by fused elementwise programs).
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryKind::Add => a + b,
            BinaryKind::Sub => a - b,
            BinaryKind::Mul => a * b,
            BinaryKind::Div => a / b,
            BinaryKind::Max => a.max(b),
            BinaryKind::Min => a.min(b),
        }
    }
}

/// Applies one [`BinaryKind`] to two broadcast-compatible tensors of the same dtype.
#[derive(Clone, Debug, PartialEq)]
pub struct Binary {
    pub kind: BinaryKind,
}

/// The broadcast shape of two inputs that must share a dtype; shared by compare and select.
pub(crate) fn broadcast_same_dtype(op: &str, a: &TensorType, b: &TensorType) -> Result<Shape> {
    if a.dtype != b.dtype {
        return Err(Error::shape(op, format!("operands have different dtypes: {a} and {b}")));
    }
    Shape::broadcast(&a.shape, &b.shape)
        .ok_or_else(|| Error::shape(op, format!("shapes {} and {} do not broadcast", a.shape, b.shape)))
}

impl OpKind for Binary {
    fn name(&self) -> &'static str {
        self.kind.name()
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity(self.name(), inputs.len(), 2)?;
        let shape = broadcast_same_dtype(self.name(), inputs[0], inputs[1])?;
        Ok(TensorType::new(inputs[0].dtype, shape))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime(self.name(), "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}
