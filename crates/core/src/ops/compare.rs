//! Comparisons with broadcasting; the result is a u32 mask of 0 and 1.

use super::binary::broadcast_same_dtype;
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{DType, TensorType};
use crate::tensor::Tensor;

/// Which comparison a [`Compare`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpKind {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpKind {
    pub const ALL: [CmpKind; 6] = [CmpKind::Eq, CmpKind::Ne, CmpKind::Lt, CmpKind::Le, CmpKind::Gt, CmpKind::Ge];

    pub fn name(self) -> &'static str {
        match self {
            CmpKind::Eq => "eq",
            CmpKind::Ne => "ne",
            CmpKind::Lt => "lt",
            CmpKind::Le => "le",
            CmpKind::Gt => "gt",
            CmpKind::Ge => "ge",
        }
    }
}

/// `a <kind> b` elementwise, as u32 0/1.
#[derive(Clone, Debug, PartialEq)]
pub struct Compare {
    pub kind: CmpKind,
}

impl OpKind for Compare {
    fn name(&self) -> &'static str {
        self.kind.name()
    }
    fn attrs(&self) -> String {
        String::new()
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity(self.name(), inputs.len(), 2)?;
        let shape = broadcast_same_dtype(self.name(), inputs[0], inputs[1])?;
        Ok(TensorType::new(DType::U32, shape))
    }
    fn eval(&self, _inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        Err(Error::runtime(self.name(), "reference not written yet"))
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}
