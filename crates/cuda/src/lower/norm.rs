//! Layer norms (`kernels/norm.cu`): plain and fused with the residual add, mean and
//! variance accumulated in f64 as the reference does. Rows of up to 4096 values (all of
//! Whisper's) are held in registers: one warp per row up to 512 values, several rows per
//! block, else one block of warps per row; longer rows loop, one block each.

use susurrus_core::ops::{AddLayerNorm, LayerNorm};
use susurrus_core::{Error, Result};

use super::{KernelLaunch, Launch, LowerCtx};
use crate::params::{In, Out, ParamsInfo};

crate::cuda_params! {
    /// One layer norm over `rows` rows of `n` values. `residual` is added to `x` (in f32) by
    /// the fused kernel and unused by the plain one. `row_warps` is the warps holding a row in
    /// registers (1: several rows per block; more: one row per block), 0 for one block per
    /// row looping over it; `thread_values` the values each thread then holds (4, 8 or 16).
    pub struct LayerNormParams {
        pub x: In,
        pub residual: In,
        pub gamma: In,
        pub beta: In,
        pub out: Out,
        pub n: u32,
        pub rows: u32,
        pub row_warps: u32,
        pub thread_values: u32,
        pub eps: f32,
    }
}

/// Most values a thread holds in registers (with the row's gamma and beta). The kernel
/// unrolls 4, 8 or 16; 32 would take about 160 registers instead of about 115, and
/// registers are counted per kernel, for every launch.
const THREAD_VALUES: usize = 16;

/// Longest row one warp holds.
const WARP_ROW: usize = 32 * THREAD_VALUES;

/// Most warps holding one row: rows up to 8 * 512 = 4096 values are held in registers.
const ROW_WARPS: usize = 8;

/// Rows per block when a warp holds a row: 128 threads, so the encoder's 1500 rows make 375
/// blocks, about three per SM; fewer rows get a block of one warp each.
const BLOCK_ROWS: usize = 4;

/// Most threads of a looping block. The kernel's register count is the register path's
/// (about 115), and 256 threads may have 255 registers each.
const BLOCK_MAX: usize = 256;

/// Most blocks along a grid's x dimension.
const MAX_BLOCKS: usize = i32::MAX as usize;

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![ParamsInfo::of::<LayerNormParams>()]
}

pub fn layer_norm(op: &LayerNorm, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    norm(ctx, "layer_norm", In::default(), 1, op.eps)
}

pub fn add_layer_norm(op: &AddLayerNorm, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    norm(ctx, "add_layer_norm", ctx.input(1), 2, op.eps)
}

/// How rows of `n` values are spread: (warps per row, values per thread), `(0, 0)` for a
/// looping block. A warp's lanes hold 4, 8 or 16 values each (Whisper tiny's rows of 384
/// get 16); longer rows take as many warps as needed at 16 values each (1280 -> 3 warps).
fn layout(n: usize) -> (u32, u32) {
    if n <= WARP_ROW {
        (1, n.div_ceil(32).next_power_of_two().max(4) as u32)
    } else if n <= ROW_WARPS * WARP_ROW {
        (n.div_ceil(WARP_ROW) as u32, THREAD_VALUES as u32)
    } else {
        (0, 0)
    }
}

/// Threads for a looping block over a row of `n` values: about four values each, a power of
/// two from one warp to `BLOCK_MAX`.
fn threads_for(n: usize) -> u32 {
    n.div_ceil(4).next_power_of_two().clamp(32, BLOCK_MAX) as u32
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
    if rows > MAX_BLOCKS || n > u32::MAX as usize {
        return Err(Error::Unsupported {
            op: format!("{kernel} into {ty}"),
            backend: format!("cuda (at most {MAX_BLOCKS} rows of at most {} values)", u32::MAX),
        });
    }
    let (row_warps, thread_values) = layout(n);
    let params = LayerNormParams {
        x: ctx.input(0),
        residual,
        gamma: ctx.input(gamma),
        beta: ctx.input(gamma + 1),
        out: ctx.out(),
        n: n as u32,
        rows: rows as u32,
        row_warps,
        thread_values,
        eps,
    };
    let launch = KernelLaunch::new(kernel, &params);
    let launch = match row_warps {
        0 => launch.grid(rows as u32, 1, 1).block(threads_for(n), 1, 1),
        1 => launch.grid(rows.div_ceil(BLOCK_ROWS) as u32, 1, 1).block(32 * rows.min(BLOCK_ROWS) as u32, 1, 1),
        warps => launch.grid(rows as u32, 1, 1).block(32 * warps, 1, 1),
    };
    Ok(vec![Launch::Kernel(launch)])
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::TensorType;

    use super::*;
    use crate::lower::{Operand, Precision, Scratch};
    use crate::params::{KernelParams, kind};

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

    /// The four bytes of field `name` of the params.
    fn field(k: &KernelLaunch, name: &str) -> u32 {
        let at = LayerNormParams::layout().0.iter().find(|f| f.0 == name).map(|f| f.1).unwrap();
        u32::from_le_bytes(k.params[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn whisper_encoder_rows_one_warp_each_four_per_block() {
        // [1, 1500, 384]: 1500 rows of 384 -> a warp each holding 12 values per lane (the
        // kernel's 16), 4 rows per block of 128 threads -> 375 blocks, no shared memory.
        let inputs = [f32s(0x1000, &[1, 1500, 384]), f16_weight(0x2000, 384), f16_weight(0x3000, 384)];
        let output = f32s(0x4000, &[1, 1500, 384]);
        let k = kernel(lower(&inputs, &output, false).unwrap());
        assert_eq!((k.name, k.params_name), ("layer_norm", "LayerNormParams"));
        assert_eq!((k.grid, k.block, k.shared_bytes), ([375, 1, 1], [128, 1, 1], 0));
        let want = LayerNormParams {
            x: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            residual: In::default(),
            gamma: In { ptr: 0x2000, kind: kind::F16, pad: 0 },
            beta: In { ptr: 0x3000, kind: kind::F16, pad: 0 },
            out: Out { ptr: 0x4000, dtype: 0, pad: 0 },
            n: 384,
            rows: 1500,
            row_warps: 1,
            thread_values: 16,
            eps: 1e-5,
        };
        assert_eq!(k.params, want.to_bytes());
    }

    #[test]
    fn fused_add_of_a_decoder_row_is_one_warp() {
        // A decoder step's single row of f16 activations: one block of one warp.
        let h = |ptr| Operand::arena(ptr, TensorType::new(DType::F16, [1, 384]));
        let inputs = [h(0x1000), h(0x2000), f32s(0x3000, &[384]), f32s(0x4000, &[384])];
        let k = kernel(lower(&inputs, &h(0x5000), true).unwrap());
        assert_eq!((k.name, k.grid, k.block, k.shared_bytes), ("add_layer_norm", [1, 1, 1], [32, 1, 1], 0));
        let want = LayerNormParams {
            x: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            residual: In { ptr: 0x2000, kind: kind::F32, pad: 0 },
            gamma: In { ptr: 0x3000, kind: kind::F32, pad: 0 },
            beta: In { ptr: 0x4000, kind: kind::F32, pad: 0 },
            out: Out { ptr: 0x5000, dtype: 1, pad: 0 },
            n: 384,
            rows: 1,
            row_warps: 1,
            thread_values: 16,
            eps: 1e-5,
        };
        assert_eq!(k.params, want.to_bytes());
    }

    #[test]
    fn layouts_follow_the_row_length() {
        // Up to 512 values a warp, 4/8/16 per lane; then warps of 16 values per lane, up to
        // 8 (4096 values); then a looping block.
        let ns = [1, 7, 128, 129, 256, 257, 384, 512, 513, 768, 1024, 1025, 1280, 4096, 4097];
        let want =
            [(1, 4), (1, 4), (1, 4), (1, 8), (1, 8), (1, 16), (1, 16), (1, 16), (2, 16), (2, 16), (2, 16), (3, 16)];
        assert_eq!(ns.map(layout)[..12], want);
        assert_eq!(ns.map(layout)[12..], [(3, 16), (8, 16), (0, 0)]);
        assert_eq!([1, 7, 128, 129, 1000, 4097, 100_000].map(threads_for), [32, 32, 32, 64, 256, 256, 256]);
    }

    #[test]
    fn warp_rows_fill_blocks_of_four() {
        // 5 rows -> 2 blocks of 4 warps (the last block's 3 extra warps return); 3 rows -> one
        // block of 3 warps.
        for (rows, grid, block) in [(5, 2, 128), (3, 1, 96)] {
            let inputs = [f32s(0x1000, &[rows, 65]), f32s(0x2000, &[65]), f32s(0x3000, &[65])];
            let k = kernel(lower(&inputs, &f32s(0x4000, &[rows, 65]), false).unwrap());
            assert_eq!((k.grid, k.block), ([grid, 1, 1], [block, 1, 1]), "{rows} rows");
            assert_eq!([field(&k, "rows"), field(&k, "row_warps"), field(&k, "thread_values")], [rows as u32, 1, 4]);
        }
    }

    #[test]
    fn longer_rows_take_a_block_of_warps_then_a_looping_block() {
        // Whisper large's rows of 1280: 3 warps a row, 16 values per thread (13.3 used).
        let inputs = [f32s(0x1000, &[1500, 1280]), f32s(0x2000, &[1280]), f32s(0x3000, &[1280])];
        let k = kernel(lower(&inputs, &f32s(0x4000, &[1500, 1280]), false).unwrap());
        assert_eq!((k.grid, k.block, k.shared_bytes), ([1500, 1, 1], [96, 1, 1], 0));
        assert_eq!([field(&k, "row_warps"), field(&k, "thread_values")], [3, 16]);
        // Past 4096 values: one block of 256 threads per row, looping.
        let inputs = [f32s(0x1000, &[2, 4097]), f32s(0x2000, &[4097]), f32s(0x3000, &[4097])];
        let k = kernel(lower(&inputs, &f32s(0x4000, &[2, 4097]), false).unwrap());
        assert_eq!((k.grid, k.block, k.shared_bytes), ([2, 1, 1], [256, 1, 1], 0));
        assert_eq!([field(&k, "n"), field(&k, "rows"), field(&k, "row_warps")], [4097, 2, 0]);
    }

    #[test]
    fn empty_outputs_launch_nothing() {
        let inputs = [f32s(0x1000, &[0, 4]), f32s(0x2000, &[4]), f32s(0x3000, &[4])];
        assert_eq!(lower(&inputs, &f32s(0x4000, &[0, 4]), false).unwrap(), Vec::new());
    }
}
