//! Comparisons with broadcasting; the result is a u32 mask of 0 and 1.

use super::binary::{broadcast_indices, broadcast_same_dtype, gather_f32, gather_i64};
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::Result;
use crate::ir::{DType, Graph, NodeId, TensorType};
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

    /// The comparison on any ordered values (f32 follows IEEE: NaN is unequal to everything).
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpKind::Eq => a == b,
            CmpKind::Ne => a != b,
            CmpKind::Lt => a < b,
            CmpKind::Le => a <= b,
            CmpKind::Gt => a > b,
            CmpKind::Ge => a >= b,
        }
    }

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
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let (a, b) = (inputs[0], inputs[1]);
        let shape = broadcast_same_dtype(self.name(), &a.ty(), &b.ty())?;
        let ia = broadcast_indices(a.shape(), &shape);
        let ib = broadcast_indices(b.shape(), &shape);
        // Integers compare exactly in i64 (u32 above 2^24 would collide in f32).
        let mask: Vec<u32> = if a.dtype().is_float() {
            let (va, vb) = (gather_f32(a, &ia), gather_f32(b, &ib));
            va.iter().zip(&vb).map(|(&x, &y)| self.kind.holds(x, y) as u32).collect()
        } else {
            let (va, vb) = (gather_i64(a, &ia), gather_i64(b, &ib));
            va.iter().zip(&vb).map(|(&x, &y)| self.kind.holds(x, y) as u32).collect()
        };
        Tensor::u32(shape, mask)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// `a <kind> b` elementwise with broadcasting, as a u32 mask of 0 and 1. Operands share a
    /// dtype, which may be any.
    pub fn compare(&mut self, kind: CmpKind, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Compare { kind }, &[a, b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::eval_op;

    fn mask(kind: CmpKind, a: &Tensor, b: &Tensor) -> Vec<u32> {
        eval_op(Compare { kind }, &[a, b]).unwrap().as_u32().unwrap().to_vec()
    }

    #[test]
    fn every_kind_on_floats_with_nan() {
        let a = Tensor::f32([4], vec![1.0, 2.0, 3.0, f32::NAN]).unwrap();
        let b = Tensor::f32([4], vec![2.0, 2.0, 2.0, f32::NAN]).unwrap();
        assert_eq!(mask(CmpKind::Eq, &a, &b), [0, 1, 0, 0]);
        assert_eq!(mask(CmpKind::Ne, &a, &b), [1, 0, 1, 1]);
        assert_eq!(mask(CmpKind::Lt, &a, &b), [1, 0, 0, 0]);
        assert_eq!(mask(CmpKind::Le, &a, &b), [1, 1, 0, 0]);
        assert_eq!(mask(CmpKind::Gt, &a, &b), [0, 0, 1, 0]);
        assert_eq!(mask(CmpKind::Ge, &a, &b), [0, 1, 1, 0]);
    }

    #[test]
    fn integers_compare_exactly_and_broadcast() {
        // 2^24 + 1 and 2^24 are equal once converted to f32; as integers they are not.
        let a = Tensor::u32([2, 1], vec![(1 << 24) + 1, 5]).unwrap();
        let b = Tensor::u32([2], vec![1 << 24, 5]).unwrap();
        let y = eval_op(Compare { kind: CmpKind::Gt }, &[&a, &b]).unwrap();
        assert_eq!(y.ty(), TensorType::new(DType::U32, [2, 2]));
        // Rows: a = 2^24+1 against [2^24, 5], then a = 5 against [2^24, 5].
        assert_eq!(y.as_u32(), Some(&[1, 1, 0, 0][..]));
        let i = Tensor::i32([3], vec![-1, 0, 1]).unwrap();
        let zero = Tensor::i32([], vec![0]).unwrap();
        assert_eq!(mask(CmpKind::Lt, &i, &zero), [1, 0, 0]);
    }

    #[test]
    fn builder_rejects_mixed_dtypes_and_shapes() {
        let mut g = Graph::new("t");
        let a = g.input("a", TensorType::new(DType::F32, [4])).unwrap();
        let b = g.input("b", TensorType::new(DType::I32, [4])).unwrap();
        let c = g.input("c", TensorType::new(DType::F32, [3])).unwrap();
        assert_eq!(
            g.compare(CmpKind::Eq, a, b).unwrap_err().to_string(),
            "eq: operands have different dtypes: f32[4] and i32[4]"
        );
        assert_eq!(g.compare(CmpKind::Lt, a, c).unwrap_err().to_string(), "lt: shapes [4] and [3] do not broadcast");
    }
}
