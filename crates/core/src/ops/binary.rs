//! Binary elementwise ops with numpy-style broadcasting.
//!
//! Floats compute in f32 (f16 rounds on output); integers compute exactly (division
//! truncates toward zero; division by zero is a run-time error).

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType};
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

/// For every element of a tensor of shape `to`, the flat index of the element of a tensor of
/// shape `from` that numpy broadcasting reads there. The caller guarantees
/// `from.broadcasts_to(to)` (shape inference checked it).
pub(crate) fn broadcast_indices(from: &Shape, to: &Shape) -> Vec<usize> {
    let src = from.broadcast_strides(to);
    let dst = to.strides();
    (0..to.numel()).map(|i| (0..to.rank()).map(|k| (i / dst[k]) % to.dims()[k] * src[k]).sum()).collect()
}

/// The values of `t` read at the given flat indices.
pub(crate) fn gather_f32(t: &Tensor, idx: &[usize]) -> Vec<f32> {
    let v = t.to_f32();
    idx.iter().map(|&i| v[i]).collect()
}

/// Integer values of `t` read at the given flat indices.
pub(crate) fn gather_i64(t: &Tensor, idx: &[usize]) -> Vec<i64> {
    let v = t.to_i64();
    idx.iter().map(|&i| v[i]).collect()
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

impl Binary {
    /// The function on i32/u32 values held in i64. Products of two u32 exceed i64, so the
    /// arithmetic wraps modulo 2^64; converting back to the 32-bit dtype keeps the low bits,
    /// which is exactly the wrapping 32-bit result. Division truncates toward zero.
    fn apply_int(&self, a: i64, b: i64, element: usize) -> Result<i64> {
        Ok(match self.kind {
            BinaryKind::Add => a.wrapping_add(b),
            BinaryKind::Sub => a.wrapping_sub(b),
            BinaryKind::Mul => a.wrapping_mul(b),
            BinaryKind::Div if b == 0 => {
                return Err(Error::runtime("div", format!("integer division by zero at output element {element}")));
            }
            BinaryKind::Div => a / b,
            BinaryKind::Max => a.max(b),
            BinaryKind::Min => a.min(b),
        })
    }
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
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let (a, b) = (inputs[0], inputs[1]);
        let shape = broadcast_same_dtype(self.name(), &a.ty(), &b.ty())?;
        let ia = broadcast_indices(a.shape(), &shape);
        let ib = broadcast_indices(b.shape(), &shape);
        if a.dtype().is_float() {
            let (va, vb) = (gather_f32(a, &ia), gather_f32(b, &ib));
            let out = va.iter().zip(&vb).map(|(&x, &y)| self.kind.apply(x, y)).collect();
            return Tensor::from_f32(a.dtype(), shape, out);
        }
        let (va, vb) = (gather_i64(a, &ia), gather_i64(b, &ib));
        let out =
            va.iter().zip(&vb).enumerate().map(|(i, (&x, &y))| self.apply_int(x, y, i)).collect::<Result<Vec<_>>>()?;
        Tensor::from_i64(a.dtype(), shape, out)
    }
    fn memory(&self) -> Memory {
        Memory::InPlace
    }
}

impl Graph {
    /// `kind(a, b)` elementwise, broadcasting `a` and `b` numpy-style; they share a dtype.
    pub fn binary(&mut self, kind: BinaryKind, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.push(Binary { kind }, &[a, b])
    }
    /// `a + b` elementwise with broadcasting.
    pub fn add(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(BinaryKind::Add, a, b)
    }
    /// `a - b`.
    pub fn sub(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(BinaryKind::Sub, a, b)
    }
    /// `a * b`.
    pub fn mul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(BinaryKind::Mul, a, b)
    }
    /// `a / b`; integer division truncates toward zero and fails at run time on a zero divisor.
    pub fn div(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(BinaryKind::Div, a, b)
    }
    /// The larger of `a` and `b` (for floats, a NaN operand yields the other one).
    pub fn maximum(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(BinaryKind::Max, a, b)
    }
    /// The smaller of `a` and `b` (for floats, a NaN operand yields the other one).
    pub fn minimum(&mut self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.binary(BinaryKind::Min, a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn run(kind: BinaryKind, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        eval_op(Binary { kind }, &[a, b])
    }

    #[test]
    fn every_kind_on_floats() {
        let a = Tensor::f32([4], vec![1.5, -2.0, 6.0, 0.5]).unwrap();
        let b = Tensor::f32([4], vec![0.5, 4.0, -3.0, 0.5]).unwrap();
        let cases: [(BinaryKind, [f32; 4]); 6] = [
            (BinaryKind::Add, [2.0, 2.0, 3.0, 1.0]),
            (BinaryKind::Sub, [1.0, -6.0, 9.0, 0.0]),
            (BinaryKind::Mul, [0.75, -8.0, -18.0, 0.25]),
            (BinaryKind::Div, [3.0, -0.5, -2.0, 1.0]),
            (BinaryKind::Max, [1.5, 4.0, 6.0, 0.5]),
            (BinaryKind::Min, [0.5, -2.0, -3.0, 0.5]),
        ];
        for (kind, want) in cases {
            assert_eq!(run(kind, &a, &b).unwrap().to_f32(), want, "{}", kind.name());
        }
    }

    #[test]
    fn broadcasts_numpy_style() {
        // a [2,1,3] + b [2,1] -> [2,2,3]: out[i,j,k] = a[i,0,k] + b[j,0].
        let a = Tensor::f32([2, 1, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = Tensor::f32([2, 1], vec![10.0, 20.0]).unwrap();
        let y = run(BinaryKind::Add, &a, &b).unwrap();
        assert_eq!(y.shape(), &Shape::from([2, 2, 3]));
        assert_eq!(y.to_f32(), vec![11.0, 12.0, 13.0, 21.0, 22.0, 23.0, 14.0, 15.0, 16.0, 24.0, 25.0, 26.0]);
        // A scalar on the left: 1 - [2,3].
        let one = Tensor::scalar_f32(1.0);
        let x = Tensor::f32([2], vec![2.0, 3.0]).unwrap();
        assert_eq!(run(BinaryKind::Sub, &one, &x).unwrap().to_f32(), vec![-1.0, -2.0]);
    }

    #[test]
    fn f16_rounds_the_f32_result() {
        // 1 + 2^-11 is exact in f32 but halfway between two f16 values (spacing 2^-10 at 1);
        // round-to-nearest-even gives 1.0. 1 + 3 * 2^-11 rounds up to 1 + 2^-9.
        let a = Tensor::from_f32(DType::F16, [2], vec![1.0, 1.0]).unwrap();
        let b = Tensor::from_f32(DType::F16, [2], vec![2f32.powi(-11), 3.0 * 2f32.powi(-11)]).unwrap();
        let y = run(BinaryKind::Add, &a, &b).unwrap();
        assert_eq!(y.dtype(), DType::F16);
        assert_eq!(y.to_f32(), vec![1.0, 1.0 + 2f32.powi(-9)]);
    }

    #[test]
    fn integers_are_exact_and_wrap() {
        let a = Tensor::i32([5], vec![7, -7, i32::MAX, 3, i32::MIN]).unwrap();
        let b = Tensor::i32([5], vec![2, 2, 1, -4, -1]).unwrap();
        // Truncating division: 7/2 = 3, -7/2 = -3; i32::MIN / -1 wraps to i32::MIN.
        assert_eq!(run(BinaryKind::Div, &a, &b).unwrap().as_i32(), Some(&[3, -3, i32::MAX, 0, i32::MIN][..]));
        // i32::MAX + 1 wraps to i32::MIN; i32::MIN + -1 wraps to i32::MAX.
        assert_eq!(run(BinaryKind::Add, &a, &b).unwrap().as_i32(), Some(&[9, -5, i32::MIN, -1, i32::MAX][..]));
        // u32: 0 - 1 and 65536 - 65537 wrap to u32::MAX; 65536 * 65537 = 2^32 + 65536 wraps to 65536; 2^31 * 4 wraps to 0.
        let a = Tensor::u32([3], vec![0, 65536, 1 << 31]).unwrap();
        let b = Tensor::u32([3], vec![1, 65537, 4]).unwrap();
        assert_eq!(run(BinaryKind::Sub, &a, &b).unwrap().as_u32(), Some(&[u32::MAX, u32::MAX, (1 << 31) - 4][..]));
        assert_eq!(run(BinaryKind::Mul, &a, &b).unwrap().as_u32(), Some(&[0, 65536, 0][..]));
        // u32::MAX * u32::MAX = 2^64 - 2^33 + 1, which is 1 modulo 2^32.
        let m = Tensor::u32([1], vec![u32::MAX]).unwrap();
        assert_eq!(run(BinaryKind::Mul, &m, &m).unwrap().as_u32(), Some(&[1][..]));
        assert_eq!(run(BinaryKind::Max, &a, &b).unwrap().as_u32(), Some(&[1, 65537, 1 << 31][..]));
    }

    #[test]
    fn integer_division_by_zero_is_a_runtime_error() {
        let a = Tensor::i32([3], vec![1, 2, 3]).unwrap();
        let b = Tensor::i32([3], vec![1, 0, 1]).unwrap();
        let err = run(BinaryKind::Div, &a, &b).unwrap_err();
        assert_eq!(err.to_string(), "div failed at run time: integer division by zero at output element 1");
        // Float division by zero is IEEE: inf.
        let x = Tensor::f32([1], vec![1.0]).unwrap();
        let z = Tensor::f32([1], vec![0.0]).unwrap();
        assert_eq!(run(BinaryKind::Div, &x, &z).unwrap().to_f32(), vec![f32::INFINITY]);
    }

    #[test]
    fn builder_rejects_bad_shapes_and_dtypes() {
        let mut g = Graph::new("t");
        let a = g.input("a", TensorType::new(DType::F32, [2, 3])).unwrap();
        let b = g.input("b", TensorType::new(DType::F32, [3, 2])).unwrap();
        let h = g.input("h", TensorType::new(DType::F16, [2, 3])).unwrap();
        let row = g.input("row", TensorType::new(DType::F32, [3])).unwrap();
        assert_eq!(g.add(a, b).unwrap_err().to_string(), "add: shapes [2,3] and [3,2] do not broadcast");
        assert_eq!(g.mul(a, h).unwrap_err().to_string(), "mul: operands have different dtypes: f32[2,3] and f16[2,3]");
        let y = g.maximum(a, row).unwrap();
        assert_eq!(g.ty(y), &TensorType::new(DType::F32, [2, 3]));
        assert_eq!(g.node(y).op.name(), "max");
    }
}
