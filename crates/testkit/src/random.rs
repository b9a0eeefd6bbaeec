//! Seeded random tensors, inputs and weights.
//!
//! Every random value in the harness comes from a [`StdRng`] seeded with a `u64`, so a failing
//! case is reproduced by its seed alone, on any machine and any backend.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use susurrus_core::ir::{DType, Graph, TensorType};
use susurrus_core::ops::Op;
use susurrus_core::tensor::Tensor;

/// How the values of a random tensor are drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dist {
    /// Uniform in `lo..hi`; integer dtypes truncate toward zero.
    Uniform { lo: f32, hi: f32 },
    /// Uniform integers in `lo..hi`, stored exactly in any dtype (floats get whole numbers,
    /// which makes ties for comparisons and argmax likely).
    Ints { lo: i64, hi: i64 },
}

impl Dist {
    /// The default for a dtype: floats uniform in [-2, 2), integers in 0..8.
    pub fn default_for(dtype: DType) -> Dist {
        if dtype.is_float() { Dist::Uniform { lo: -2.0, hi: 2.0 } } else { Dist::Ints { lo: 0, hi: 8 } }
    }
}

/// A tensor of type `ty` with [`Dist::default_for`] its dtype.
pub fn random_tensor(ty: &TensorType, rng: &mut StdRng) -> Tensor {
    random_tensor_with(ty, Dist::default_for(ty.dtype), rng)
}

/// A tensor of type `ty` with values drawn from `dist`. An empty range yields its lower bound.
pub fn random_tensor_with(ty: &TensorType, dist: Dist, rng: &mut StdRng) -> Tensor {
    let n = ty.numel();
    let made = match dist {
        Dist::Uniform { lo, hi } => {
            let values = (0..n).map(|_| if lo < hi { rng.random_range(lo..hi) } else { lo }).collect();
            Tensor::from_f32(ty.dtype, ty.shape.clone(), values)
        }
        Dist::Ints { lo, hi } => {
            let values = (0..n).map(|_| if lo < hi { rng.random_range(lo..hi) } else { lo }).collect();
            Tensor::from_i64(ty.dtype, ty.shape.clone(), values)
        }
    };
    made.expect("a value was drawn for every element of the shape")
}

/// A random tensor for every `Input` node of `g`, by name, drawn in node order from `seed`.
pub fn random_inputs(g: &Graph, seed: u64) -> HashMap<String, Tensor> {
    random_leaves(g, seed, |op| matches!(op, Op::Input(_)))
}

/// A random tensor for every `Param` node of `g`, by name, drawn in node order from `seed`
/// (a different stream from [`random_inputs`] with the same seed).
pub fn random_weights(g: &Graph, seed: u64) -> HashMap<String, Tensor> {
    random_leaves(g, seed ^ 0x9e37_79b9_7f4a_7c15, |op| matches!(op, Op::Param(_)))
}

fn random_leaves(g: &Graph, seed: u64, wanted: impl Fn(&Op) -> bool) -> HashMap<String, Tensor> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = HashMap::new();
    for node in g.nodes() {
        if let Some(name) = node.op.leaf_name().filter(|_| wanted(&node.op)) {
            out.insert(name.to_string(), random_tensor(&node.ty, &mut rng));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ranges_and_dtypes() {
        let mut rng = StdRng::seed_from_u64(1);
        let f = random_tensor(&TensorType::new(DType::F32, [1000]), &mut rng);
        assert!(f.to_f32().iter().all(|v| (-2.0..2.0).contains(v)));
        // A thousand uniform draws cover both halves of the range.
        assert!(f.to_f32().iter().any(|&v| v < -1.0) && f.to_f32().iter().any(|&v| v > 1.0));
        let h = random_tensor(&TensorType::new(DType::F16, [3, 5]), &mut rng);
        assert_eq!(h.ty(), TensorType::new(DType::F16, [3, 5]));
        let i = random_tensor(&TensorType::new(DType::I32, [1000]), &mut rng);
        assert!(i.to_i64().iter().all(|v| (0..8).contains(v)));
        let u = random_tensor(&TensorType::new(DType::U32, [7]), &mut rng);
        assert_eq!(u.dtype(), DType::U32);
    }

    #[test]
    fn custom_distributions() {
        let mut rng = StdRng::seed_from_u64(2);
        let ty = TensorType::new(DType::F32, [500]);
        let pos = random_tensor_with(&ty, Dist::Uniform { lo: 0.1, hi: 2.1 }, &mut rng);
        assert!(pos.to_f32().iter().all(|&v| (0.1..2.1).contains(&v)));
        let whole = random_tensor_with(&ty, Dist::Ints { lo: -3, hi: 3 }, &mut rng);
        assert!(whole.to_f32().iter().all(|&v| v.fract() == 0.0 && (-3.0..3.0).contains(&v)));
        let fixed = random_tensor_with(&TensorType::new(DType::I32, [2]), Dist::Ints { lo: 5, hi: 5 }, &mut rng);
        assert_eq!(fixed.as_i32(), Some(&[5, 5][..]));
    }

    #[test]
    fn inputs_and_weights_are_seeded_and_complete() {
        let mut g = Graph::new("t");
        g.input("x", TensorType::new(DType::F32, [2, 3])).unwrap();
        g.input("ids", TensorType::new(DType::U32, [4])).unwrap();
        g.param("w", TensorType::new(DType::F16, [3])).unwrap();
        let inputs = random_inputs(&g, 7);
        let mut names: Vec<_> = inputs.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["ids", "x"]);
        assert_eq!(inputs["x"].ty(), TensorType::new(DType::F32, [2, 3]));
        assert_eq!(inputs, random_inputs(&g, 7));
        assert_ne!(inputs["x"], random_inputs(&g, 8)["x"]);
        let weights = random_weights(&g, 7);
        assert_eq!(weights.len(), 1);
        assert_eq!(weights["w"].ty(), TensorType::new(DType::F16, [3]));
    }
}
