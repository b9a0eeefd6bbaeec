//! Layer norms (`kernels/cuda/norm.cu`): plain and fused with the residual add, one block per
//! row of the last axis, mean and variance accumulated in f64 as the reference does.

use susurrus_core::ops::{AddLayerNorm, LayerNorm};
use susurrus_core::{Error, Result};

use super::{KernelLaunch, Launch, LowerCtx};
use crate::cuda::params::{In, Out, ParamsInfo};

crate::cuda_params! {
    /// One layer norm over rows of `n` values (one block each). `residual` is added to `x`
    /// (in f32) by the fused kernel and unused by the plain one; `staged` is 1 when the row,
    /// gamma and beta are kept in the block's dynamic shared memory (`3 n` floats).
    pub struct LayerNormParams {
        pub x: In,
        pub residual: In,
        pub gamma: In,
        pub beta: In,
        pub out: Out,
        pub n: u32,
        pub staged: u32,
        pub eps: f32,
    }
}

/// Longest row kept in shared memory with its weights (24 KiB, under the 48 KiB a launch gets
/// without opting in; Whisper's widest rows are 1280); longer rows are reread from global
/// memory in each pass.
const STAGE_MAX: usize = 2048;

/// Most blocks along a grid's x dimension: one row each.
const MAX_ROWS: usize = i32::MAX as usize;

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![ParamsInfo::of::<LayerNormParams>()]
}

pub fn layer_norm(op: &LayerNorm, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    norm(ctx, "layer_norm", In::default(), 1, op.eps)
}

pub fn add_layer_norm(op: &AddLayerNorm, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    norm(ctx, "add_layer_norm", ctx.input(1), 2, op.eps)
}

/// Threads for a row of `n` values: about four values each, a power of two from one warp to
/// 1024 (Whisper's rows of 384 get 128).
fn threads_for(n: usize) -> u32 {
    n.div_ceil(4).next_power_of_two().clamp(32, 1024) as u32
}

/// The launch of `kernel` over the output's rows; gamma and beta are inputs `gamma` and
/// `gamma + 1`.
fn norm(ctx: &LowerCtx, kernel: &'static str, residual: In, gamma: usize, eps: f32) -> Result<Vec<Launch>> {
    let ty = &ctx.output.ty;
    let n = ty.shape.last();
    if ty.numel() == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let rows = ty.numel() / n;
    if rows > MAX_ROWS || n > u32::MAX as usize {
        return Err(Error::Unsupported {
            op: format!("{kernel} into {ty}"),
            backend: format!("cuda (at most {MAX_ROWS} rows of at most {} values)", u32::MAX),
        });
    }
    let staged = n <= STAGE_MAX;
    let params = LayerNormParams {
        x: ctx.input(0),
        residual,
        gamma: ctx.input(gamma),
        beta: ctx.input(gamma + 1),
        out: ctx.out(),
        n: n as u32,
        staged: staged.into(),
        eps,
    };
    let shared = if staged { (3 * n * size_of::<f32>()) as u32 } else { 0 };
    let launch = KernelLaunch::new(kernel, &params).grid(rows as u32, 1, 1).block(threads_for(n), 1, 1).shared(shared);
    Ok(vec![Launch::Kernel(launch)])
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::TensorType;

    use super::*;
    use crate::cuda::lower::{Operand, Precision, Scratch};
    use crate::cuda::params::{KernelParams, kind};

    fn lower(inputs: &[Operand], output: &Operand, fused: bool) -> Result<Vec<Launch>> {
        let scratch = Scratch::new(0);
        let ctx = LowerCtx { inputs, output, scalars: 0x9000, precision: Precision::F32, scratch: &scratch };
        if fused {
            add_layer_norm(&AddLayerNorm { eps: 1e-5 }, &ctx)
        } else {
            layer_norm(&LayerNorm { eps: 1e-5 }, &ctx)
        }
    }

    fn kernel(launches: Vec<Launch>) -> KernelLaunch {
        match launches.as_slice() {
            [Launch::Kernel(k)] => k.clone(),
            other => panic!("expected one kernel launch, got {other:?}"),
        }
    }

    fn f32s(ptr: u64, dims: &[usize]) -> Operand {
        Operand::arena(ptr, TensorType::new(DType::F32, dims))
    }

    /// f16 weights as uploaded: native halves.
    fn f16_weight(ptr: u64, d: usize) -> Operand {
        Operand { ptr, kind: kind::F16, ty: TensorType::new(DType::F16, [d]) }
    }

    #[test]
    fn whisper_encoder_rows_one_block_each() {
        // [1, 1500, 384]: 1500 rows of 384 -> 1500 blocks of 128 threads, the row, gamma and
        // beta staged in 3 * 384 * 4 = 4608 bytes.
        let inputs = [f32s(0x1000, &[1, 1500, 384]), f16_weight(0x2000, 384), f16_weight(0x3000, 384)];
        let output = f32s(0x4000, &[1, 1500, 384]);
        let k = kernel(lower(&inputs, &output, false).unwrap());
        assert_eq!((k.name, k.params_name), ("layer_norm", "LayerNormParams"));
        assert_eq!((k.grid, k.block, k.shared_bytes), ([1500, 1, 1], [128, 1, 1], 4608));
        let want = LayerNormParams {
            x: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            residual: In::default(),
            gamma: In { ptr: 0x2000, kind: kind::F16, pad: 0 },
            beta: In { ptr: 0x3000, kind: kind::F16, pad: 0 },
            out: Out { ptr: 0x4000, dtype: 0, pad: 0 },
            n: 384,
            staged: 1,
            eps: 1e-5,
        };
        assert_eq!(k.params, want.to_bytes());
    }

    #[test]
    fn fused_add_reads_both_operands_and_weights_after_them() {
        // A decoder step's single row of f16 activations: one block.
        let h = |ptr| Operand::arena(ptr, TensorType::new(DType::F16, [1, 384]));
        let inputs = [h(0x1000), h(0x2000), f32s(0x3000, &[384]), f32s(0x4000, &[384])];
        let k = kernel(lower(&inputs, &h(0x5000), true).unwrap());
        assert_eq!((k.name, k.grid, k.block), ("add_layer_norm", [1, 1, 1], [128, 1, 1]));
        let want = LayerNormParams {
            x: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            residual: In { ptr: 0x2000, kind: kind::F32, pad: 0 },
            gamma: In { ptr: 0x3000, kind: kind::F32, pad: 0 },
            beta: In { ptr: 0x4000, kind: kind::F32, pad: 0 },
            out: Out { ptr: 0x5000, dtype: 1, pad: 0 },
            n: 384,
            staged: 1,
            eps: 1e-5,
        };
        assert_eq!(k.params, want.to_bytes());
    }

    #[test]
    fn block_sizes_and_staging_follow_the_row_length() {
        assert_eq!([1, 7, 128, 129, 384, 1500, 4096, 100_000].map(threads_for), [32, 32, 32, 64, 128, 512, 1024, 1024]);
        // Rows past STAGE_MAX are reread rather than staged.
        let inputs = [f32s(0x1000, &[2, 2049]), f32s(0x2000, &[2049]), f32s(0x3000, &[2049])];
        let k = kernel(lower(&inputs, &f32s(0x4000, &[2, 2049]), false).unwrap());
        assert_eq!((k.grid, k.block, k.shared_bytes), ([2, 1, 1], [1024, 1, 1], 0));
        let at = LayerNormParams::layout().0.iter().find(|f| f.0 == "staged").map(|f| f.1).unwrap();
        assert_eq!(&k.params[at..at + 4], &0u32.to_le_bytes(), "staged");
    }

    #[test]
    fn empty_outputs_launch_nothing() {
        let inputs = [f32s(0x1000, &[0, 4]), f32s(0x2000, &[4]), f32s(0x3000, &[4])];
        assert_eq!(lower(&inputs, &f32s(0x4000, &[0, 4]), false).unwrap(), Vec::new());
    }
}
