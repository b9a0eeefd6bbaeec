//! Unary elementwise ops on floats. Computed in f32; f16 tensors round on output.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, TensorType};
use crate::tensor::Tensor;

/// Which function a [`Unary`] applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryKind {
    Neg,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Tanh,
    Erf,
    /// GELU in its exact erf form: `x/2 * (1 + erf(x/sqrt 2))`, as Whisper uses.
    Gelu,
    Relu,
    Sigmoid,
    Silu,
}

impl UnaryKind {
    pub const ALL: [UnaryKind; 11] = [
        UnaryKind::Neg,
        UnaryKind::Exp,
        UnaryKind::Log,
        UnaryKind::Sqrt,
        UnaryKind::Rsqrt,
        UnaryKind::Tanh,
        UnaryKind::Erf,
        UnaryKind::Gelu,
        UnaryKind::Relu,
        UnaryKind::Sigmoid,
        UnaryKind::Silu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            UnaryKind::Neg => "neg",
            UnaryKind::Exp => "exp",
            UnaryKind::Log => "log",
            UnaryKind::Sqrt => "sqrt",
            UnaryKind::Rsqrt => "rsqrt",
            UnaryKind::Tanh => "tanh",
            UnaryKind::Erf => "erf",
            UnaryKind::Gelu => "gelu",
            UnaryKind::Relu => "relu",
            UnaryKind::Sigmoid => "sigmoid",
            UnaryKind::Silu => "silu",
        }
    }

    /// The scalar function (also used by fused elementwise programs).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            UnaryKind::Neg => -x,
            UnaryKind::Exp => x.exp(),
            UnaryKind::Log => x.ln(),
            UnaryKind::Sqrt => x.sqrt(),
            UnaryKind::Rsqrt => 1.0 / x.sqrt(),
            UnaryKind::Tanh => x.tanh(),
            UnaryKind::Erf => libm::erff(x),
            UnaryKind::Gelu => 0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2)),
            UnaryKind::Relu => x.max(0.0),
            UnaryKind::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            UnaryKind::Silu => x / (1.0 + (-x).exp()),
        }
    }
}

/// Applies one [`UnaryKind`] to every element.
#[derive(Clone, Debug, PartialEq)]
pub struct Unary {
    pub kind: UnaryKind,
}

impl OpKind for Unary {
    fn name(&self) -> &'static str {
        self.kind.name()
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity(self.name(), inputs.len(), 1)?;
        if !inputs[0].dtype.is_float() {
            return Err(Error::shape(self.name(), format!("needs a float tensor, got {}", inputs[0])));
        }
        Ok(inputs[0].clone())
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let x = inputs[0];
        let values = x.to_f32().into_iter().map(|v| self.kind.apply(v)).collect();
        Tensor::from_f32(x.dtype(), x.shape().clone(), values)
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}

impl Graph {
    /// `kind(x)` elementwise.
    pub fn unary(&mut self, kind: UnaryKind, x: NodeId) -> Result<NodeId> {
        self.push(Unary { kind }, &[x])
    }
    pub fn neg(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Neg, x)
    }
    pub fn exp(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Exp, x)
    }
    pub fn log(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Log, x)
    }
    pub fn sqrt(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Sqrt, x)
    }
    pub fn rsqrt(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Rsqrt, x)
    }
    pub fn tanh(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Tanh, x)
    }
    pub fn erf(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Erf, x)
    }
    pub fn gelu(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Gelu, x)
    }
    pub fn relu(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Relu, x)
    }
    pub fn sigmoid(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Sigmoid, x)
    }
    pub fn silu(&mut self, x: NodeId) -> Result<NodeId> {
        self.unary(UnaryKind::Silu, x)
    }
}

#[cfg(test)]
mod tests {
    use std::f32::consts::{E, LN_2, SQRT_2};

    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn apply(kind: UnaryKind, xs: &[f32]) -> Vec<f32> {
        let x = Tensor::f32([xs.len()], xs.to_vec()).unwrap();
        eval_op(Unary { kind }, &[&x]).unwrap().to_f32()
    }

    fn close(a: &[f32], b: &[f32]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-6 * y.abs().max(1.0), "{a:?} != {b:?}");
        }
    }

    #[test]
    fn values_match_hand_computed() {
        close(&apply(UnaryKind::Neg, &[1.5, -2.0, 0.0]), &[-1.5, 2.0, 0.0]);
        close(&apply(UnaryKind::Exp, &[0.0, 1.0, -1.0]), &[1.0, E, 1.0 / E]);
        close(&apply(UnaryKind::Log, &[1.0, E, 0.5]), &[0.0, 1.0, -LN_2]);
        close(&apply(UnaryKind::Sqrt, &[4.0, 2.0]), &[2.0, SQRT_2]);
        close(&apply(UnaryKind::Rsqrt, &[4.0, 0.25]), &[0.5, 2.0]);
        close(&apply(UnaryKind::Tanh, &[0.0, 0.5, -2.0]), &[0.0, 0.462_117_16, -0.964_027_6]);
        // erf(0.5) = 0.5204998778, erf(-1) = -0.8427007929 (Abramowitz & Stegun tables).
        close(&apply(UnaryKind::Erf, &[0.0, 0.5, -1.0]), &[0.0, 0.520_499_9, -0.842_700_8]);
        // gelu(1) = 0.5 * (1 + erf(1/sqrt 2)) = 0.8413447461; gelu(-1) = -0.1586552539.
        close(&apply(UnaryKind::Gelu, &[1.0, -1.0, 0.0]), &[0.841_344_7, -0.158_655_26, 0.0]);
        close(&apply(UnaryKind::Relu, &[-3.0, 2.0]), &[0.0, 2.0]);
        close(&apply(UnaryKind::Sigmoid, &[0.0, 2.0]), &[0.5, 0.880_797_1]);
        close(&apply(UnaryKind::Silu, &[1.0, -1.0]), &[0.731_058_6, -0.268_941_4]);
    }

    #[test]
    fn f16_rounds_and_ints_are_rejected() {
        let x = Tensor::from_f32(DType::F16, [1], vec![1.0]).unwrap();
        let y = eval_op(Unary { kind: UnaryKind::Exp }, &[&x]).unwrap();
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.to_f32(), vec![half::f16::from_f32(std::f32::consts::E).to_f32()]);

        let mut g = Graph::new("t");
        let i = g.input("ids", TensorType::new(DType::I32, [3])).unwrap();
        let err = g.exp(i).unwrap_err();
        assert_eq!(err.to_string(), "exp: needs a float tensor, got i32[3]");
    }
}
