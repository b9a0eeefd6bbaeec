//! Layer norms: one kernel over the rows of the output, for the plain norm and for the fused
//! residual add + norm, which reads each row as the sum of two inputs.

use super::reduce::axis_layout;
use super::{KernelCtx, Lowering};
use crate::KernelSpec;
use susurrus_core::error::Result;
use susurrus_core::ops::{AddLayerNorm, LayerNorm};

crate::kernel_params! {
    /// Rows of `n` values to normalise, and the epsilon added to their variance.
    pub struct NormParams {
        pub n: u32,
        pub rows: u32,
        pub eps: f32,
    }
}

/// The layer norm kernel over the rows of the output, reading x at index `i` with the WGSL
/// expression `load_x` and gamma and beta from inputs `gamma` and `gamma + 1`.
fn norm_kernel(ctx: &KernelCtx, load_x: &str, gamma: usize, eps: f32) -> KernelSpec {
    let n = ctx.output.shape.last();
    let rows = ctx.output.numel() / n;
    let params = NormParams { n: n as u32, rows: rows as u32, eps };
    let spec = KernelSpec::new("layer_norm", include_str!("../../kernels/layer_norm.wgsl"), &params)
        .define("LOAD_X", load_x)
        .define("GAMMA", format!("ld{gamma}"))
        .define("BETA", format!("ld{}", gamma + 1));
    axis_layout(spec, ctx, (rows, n, 1))
}

pub fn layer_norm(op: &LayerNorm, ctx: &KernelCtx) -> Result<Lowering> {
    Ok(Lowering::Kernel(norm_kernel(ctx, "ld0(i)", 1, op.eps)))
}

pub fn add_layer_norm(op: &AddLayerNorm, ctx: &KernelCtx) -> Result<Lowering> {
    // The sum stays in f32 inside the kernel, as in the reference.
    Ok(Lowering::Kernel(norm_kernel(ctx, "(ld0(i) + ld1(i))", 2, op.eps)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::testing::{define, kernel, params, ty};
    use susurrus_core::ir::DType;

    #[test]
    fn one_kernel_normalises_rows_of_one_input_or_of_a_sum() {
        // Four rows of 384 (Whisper tiny's width): all 256 threads on a row.
        let (gamma, beta) = (ty(DType::F16, &[384]), ty(DType::F32, &[384]));
        let x = ty(DType::F32, &[2, 2, 384]);
        let spec = kernel(LayerNorm { eps: 1e-5 }, &[x.clone(), gamma.clone(), beta.clone()]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("layer_norm", [4, 1, 1]));
        assert_eq!(params::<NormParams>(&spec), NormParams { n: 384, rows: 4, eps: 1e-5 });
        assert_eq!(["LOAD_X", "GAMMA", "BETA", "LANES"].map(|k| define(&spec, k)), ["ld0(i)", "ld1", "ld2", "256u"]);
        // The fused add reads x as the sum of inputs 0 and 1; gamma and beta move up by one.
        let spec = kernel(AddLayerNorm { eps: 1e-6 }, &[x.clone(), x, gamma, beta]).unwrap();
        assert_eq!((spec.name, params::<NormParams>(&spec).eps), ("layer_norm", 1e-6));
        assert_eq!(["LOAD_X", "GAMMA", "BETA"].map(|k| define(&spec, k)), ["(ld0(i) + ld1(i))", "ld2", "ld3"]);
    }
}
