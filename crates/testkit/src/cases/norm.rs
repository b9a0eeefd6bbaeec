//! Harness cases of the norm family: layer norm, residual add + layer norm.

use rand::Rng;
use susurrus_core::error::Result;
use susurrus_core::ir::{DType, Graph};
use susurrus_core::ops::*;

use super::*;

/// Harness cases: f32, f16, and f32 activations with f16 parameters.
pub(crate) fn layer_norm(cases: &mut CaseGen) -> Result<()> {
    for (dtype, param_dtype) in [(DType::F32, DType::F32), (DType::F16, DType::F16), (DType::F32, DType::F16)] {
        let d = cases.pick(&NORM_SIZES);
        let rank = cases.rng.random_range(0..=2);
        let mut dims = cases.shape(rank, BUDGET / d);
        dims.push(d);
        let mut g = Graph::new("layer_norm");
        let x = g.input("x", ty(dtype, &dims))?;
        let gamma = g.param("gamma", ty(param_dtype, &[d]))?;
        let beta = g.param("beta", ty(param_dtype, &[d]))?;
        let y = g.layer_norm(x, gamma, beta, 1e-5)?;
        g.output("y", y)?;
        cases.push("layer_norm", &format!("layer_norm {dtype}"), g, NORM, &[])?;
    }
    Ok(())
}

/// Harness cases: f32 and f16 on rows of the normalised sizes.
pub(crate) fn add_layer_norm(cases: &mut CaseGen) -> Result<()> {
    for dtype in [DType::F32, DType::F16] {
        let d = cases.pick(&NORM_SIZES);
        let rank = cases.rng.random_range(0..=2);
        let mut dims = cases.shape(rank, BUDGET / d);
        dims.push(d);
        let mut g = Graph::new("add_layer_norm");
        let a = g.input("a", ty(dtype, &dims))?;
        let b = g.input("b", ty(dtype, &dims))?;
        let gamma = g.param("gamma", ty(DType::F32, &[d]))?;
        let beta = g.param("beta", ty(DType::F32, &[d]))?;
        let y = g.push(AddLayerNorm { eps: 1e-5 }, &[a, b, gamma, beta])?;
        g.output("y", y)?;
        cases.push("add_layer_norm", &format!("add_layer_norm {dtype}"), g, NORM, &[])?;
    }
    Ok(())
}
