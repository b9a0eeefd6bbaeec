//! Permute axes: output axis `i` is input axis `perm[i]` (a copy into the new layout).

use super::gather::{infer_values, take};
use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::ir::{Graph, NodeId, Shape, TensorType, broadcast_offset};
use crate::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct Permute {
    pub perm: Vec<usize>,
}

impl OpKind for Permute {
    fn name(&self) -> &'static str {
        "permute"
    }
    fn attrs(&self) -> String {
        format!("perm={:?}", self.perm)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity("permute", inputs.len(), 1)?;
        let x = inputs[0];
        let mut seen = vec![false; x.shape.rank()];
        let valid = self.perm.len() == x.shape.rank()
            && self.perm.iter().all(|&p| p < seen.len() && !std::mem::replace(&mut seen[p], true));
        if !valid {
            return Err(Error::shape("permute", format!("{:?} is not a permutation of the axes of {x}", self.perm)));
        }
        let dims = self.perm.iter().map(|&p| x.shape.dims()[p]).collect();
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let out = infer_values(self, inputs)?;
        // Output axis i walks input axis perm[i], so it steps by that axis's input stride.
        let in_strides = inputs[0].shape().strides();
        let strides: Vec<usize> = self.perm.iter().map(|&p| in_strides[p]).collect();
        let index: Vec<usize> = (0..out.numel()).map(|i| broadcast_offset(i, out.shape.dims(), &strides)).collect();
        Tensor::new(out.shape, take("permute", inputs, &index)?)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
}

impl Graph {
    /// `x` with its axes reordered: output axis `i` is input axis `perm[i]` (numpy's
    /// `transpose(x, perm)`), e.g. `[B, S, H, D] -> [B, H, S, D]` to split attention heads.
    pub fn permute(&mut self, x: NodeId, perm: &[usize]) -> Result<NodeId> {
        self.push(Permute { perm: perm.to_vec() }, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn permute(x: &Tensor, perm: &[usize]) -> Tensor {
        eval_op(Permute { perm: perm.to_vec() }, &[x]).unwrap()
    }

    #[test]
    fn transposes_a_matrix() {
        // [[0,1,2],[3,4,5]] transposed is [[0,3],[1,4],[2,5]].
        let x = Tensor::i32([2, 3], vec![0, 1, 2, 3, 4, 5]).unwrap();
        let y = permute(&x, &[1, 0]);
        assert_eq!(y.shape().dims(), [3, 2]);
        assert_eq!(y.as_i32().unwrap(), [0, 3, 1, 4, 2, 5]);
        assert_eq!(permute(&x, &[0, 1]), x);
    }

    #[test]
    fn moves_axes_of_a_3d_tensor() {
        // Values are distinct u32s above 2^24, so any rounding through f32 would show.
        let base = (1u32 << 24) + 1;
        let x = Tensor::u32([2, 3, 4], (0..24).map(|v| base + 2 * v).collect()).unwrap();
        let y = permute(&x, &[2, 0, 1]);
        assert_eq!(y.shape().dims(), [4, 2, 3]);
        let (xv, yv) = (x.as_u32().unwrap(), y.as_u32().unwrap());
        for a in 0..2 {
            for b in 0..3 {
                for c in 0..4 {
                    assert_eq!(yv[(c * 2 + a) * 3 + b], xv[(a * 3 + b) * 4 + c], "y[{c},{a},{b}]");
                }
            }
        }
        // The inverse permutation restores x.
        assert_eq!(permute(&y, &[1, 2, 0]), x);
    }

    #[test]
    fn f16_values_are_copied_exactly() {
        let x = Tensor::from_f32(DType::F16, [2, 1, 2], vec![0.1, 0.2, 0.3, 0.4]).unwrap();
        let y = permute(&x, &[2, 1, 0]);
        assert_eq!(y.dtype(), DType::F16);
        let v = x.to_f32();
        assert_eq!(y.to_f32(), vec![v[0], v[2], v[1], v[3]]);
    }

    #[test]
    fn rejects_non_permutations() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [2, 3])).unwrap();
        let err = |r: Result<NodeId>| r.unwrap_err().to_string();
        assert_eq!(err(g.permute(x, &[0, 0])), "permute: [0, 0] is not a permutation of the axes of f32[2,3]");
        assert_eq!(err(g.permute(x, &[1, 2])), "permute: [1, 2] is not a permutation of the axes of f32[2,3]");
        assert_eq!(err(g.permute(x, &[0])), "permute: [0] is not a permutation of the axes of f32[2,3]");
    }
}
