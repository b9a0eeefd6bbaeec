//! Leaf ops: values that enter the computation from outside it.
//!
//! `Input`s are supplied with every run, `Param`s (weights) once at compile time, `Const`s are
//! embedded in the graph, and `State`s are persistent buffers (KV caches) that keep their
//! contents across runs.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::TensorType;
use crate::tensor::Tensor;
use std::sync::Arc;

/// A named run-time input.
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    pub name: String,
    pub ty: TensorType,
}

/// A named weight.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    pub name: String,
    pub ty: TensorType,
}

/// A named persistent buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub name: String,
    pub ty: TensorType,
}

/// A constant tensor. Shared so that cloning a graph does not copy the data.
#[derive(Clone, Debug, PartialEq)]
pub struct Const {
    pub value: Arc<Tensor>,
}

impl Const {
    pub fn new(value: Tensor) -> Self {
        Const { value: Arc::new(value) }
    }

    /// The single value of a one-element constant, widened to f32.
    pub fn scalar_value(&self) -> Option<f32> {
        (self.value.numel() == 1).then(|| self.value.to_f32()[0])
    }
}

/// Looks up a named value and checks its type.
fn lookup(map: &std::collections::HashMap<String, Tensor>, kind: &str, name: &str, ty: &TensorType) -> Result<Tensor> {
    let t = map.get(name).ok_or_else(|| Error::BadArgument(format!("{kind} '{name}' was not supplied")))?;
    t.expect_type(ty, &format!("{kind} '{name}'"))?;
    Ok(t.clone())
}

impl OpKind for Input {
    fn name(&self) -> &'static str {
        "input"
    }
    fn attrs(&self) -> String {
        format!("\"{}\"", self.name)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("input", inputs.len(), 0)?;
        Ok(self.ty.clone())
    }
    fn eval(&self, _: &[&Tensor], ctx: &EvalCtx) -> Result<Tensor> {
        lookup(ctx.inputs, "input", &self.name, &self.ty)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl OpKind for Param {
    fn name(&self) -> &'static str {
        "param"
    }
    fn attrs(&self) -> String {
        format!("\"{}\"", self.name)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("param", inputs.len(), 0)?;
        Ok(self.ty.clone())
    }
    fn eval(&self, _: &[&Tensor], ctx: &EvalCtx) -> Result<Tensor> {
        lookup(ctx.weights, "weight", &self.name, &self.ty)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl OpKind for State {
    fn name(&self) -> &'static str {
        "state"
    }
    fn attrs(&self) -> String {
        format!("\"{}\"", self.name)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("state", inputs.len(), 0)?;
        Ok(self.ty.clone())
    }
    fn eval(&self, _: &[&Tensor], ctx: &EvalCtx) -> Result<Tensor> {
        match ctx.states.get(&self.name) {
            Some(t) => {
                t.expect_type(&self.ty, &format!("state '{}'", self.name))?;
                Ok(t.clone())
            }
            // A persistent buffer starts zeroed.
            None => Ok(Tensor::zeros(&self.ty)),
        }
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl OpKind for Const {
    fn name(&self) -> &'static str {
        "const"
    }
    fn attrs(&self) -> String {
        const SHOWN: usize = 8;
        let values = self.value.to_f32();
        let mut s: Vec<String> = values.iter().take(SHOWN).map(|v| format!("{v}")).collect();
        if values.len() > SHOWN {
            s.push(format!("... ({} values)", values.len()));
        }
        format!("[{}]", s.join(", "))
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("const", inputs.len(), 0)?;
        Ok(self.value.ty())
    }
    fn eval(&self, _: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Ok((*self.value).clone())
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
