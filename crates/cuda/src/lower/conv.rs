//! Conv1d (`kernels/conv.cu`). With [`Precision::F16`] the input windows are unrolled
//! into an f16 matrix in scratch (`conv1d_im2col`) and multiplied with the weights on the
//! tensor cores through [`gemm`] (f32 accumulation, bias per output channel in its
//! epilogue). With [`Precision::F32`]: a tiled implicit matrix product, one block per 64
//! output channels x 32 positions of one batch item, accumulating in f32.

use susurrus_core::ops::Conv1d;
use susurrus_core::{Error, Result};

use super::matmul::{RowGemm, gemm};
use super::{KernelLaunch, Launch, LowerCtx, Precision};
use crate::params::{In, Out, ParamsInfo, kind};

crate::cuda_params! {
    /// One convolution of `x [N, c_in, len]` with `w [c_out, c_in, k]` (`red = c_in * k`, the
    /// reduction length) into `out [N, c_out, out_len]`; `bias [c_out]` is read when
    /// `has_bias` is 1.
    pub struct Conv1dParams {
        pub x: In,
        pub w: In,
        pub bias: In,
        pub out: Out,
        pub c_in: u32,
        pub len: u32,
        pub c_out: u32,
        pub out_len: u32,
        pub k: u32,
        pub red: u32,
        pub stride: u32,
        pub padding: u32,
        pub dilation: u32,
        pub has_bias: u32,
    }
}

crate::cuda_params! {
    /// `conv1d_im2col`: `cols[b, ci * k + j, t] = x[b, ci, t * stride - padding + j * dilation]`
    /// (0 outside the input), as f16 halves at `cols`; `n` elements in all.
    pub struct Conv1dIm2colParams {
        pub x: In,
        pub cols: u64,
        pub n: u32,
        pub c_in: u32,
        pub len: u32,
        pub k: u32,
        pub out_len: u32,
        pub stride: u32,
        pub padding: u32,
        pub dilation: u32,
    }
}

/// Output channels of one block's tile (`CONV_TILE_C` in the kernel).
const TILE_C: usize = 64;

/// Positions of one block's tile (`CONV_TILE_T`).
const TILE_T: usize = 32;

/// Threads of a block (`CONV_THREADS`).
const THREADS: u32 = 128;

/// Most blocks along the grid's y and z dimensions (channel tiles, batch items).
const MAX_GRID_YZ: usize = 65535;

/// Largest size or setting the kernel's 32-bit index arithmetic takes.
const MAX_DIM: usize = i32::MAX as usize;

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![ParamsInfo::of::<Conv1dParams>(), ParamsInfo::of::<Conv1dIm2colParams>()]
}

pub fn conv1d(op: &Conv1d, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let (xs, ws, out) = (ctx.inputs[0].ty.shape.dims(), ctx.inputs[1].ty.shape.dims(), ctx.output.ty.shape.dims());
    let (r, ro) = (xs.len(), out.len());
    if r < 2 || ws.len() != 3 || ro != r {
        return Err(Error::shape(
            "conv1d",
            format!("needs x [.., C_in, L] and w [C_out, C_in, K], got {} and {}", ctx.inputs[0].ty, ctx.inputs[1].ty),
        ));
    }
    if ctx.output.ty.numel() == 0 {
        return Ok(Vec::new());
    }
    let (c_in, len, c_out, k, out_len) = (xs[r - 2], xs[r - 1], ws[0], ws[2], out[ro - 1]);
    let batch = xs[..r - 2].iter().product::<usize>();
    let red = c_in * k;
    let (tiles_t, tiles_c) = (out_len.div_ceil(TILE_T), c_out.div_ceil(TILE_C));
    let sizes = [c_in, len, c_out, out_len, k, red, op.stride, op.padding, op.dilation, tiles_t];
    if sizes.iter().any(|&s| s > MAX_DIM) || tiles_c > MAX_GRID_YZ || batch > MAX_GRID_YZ {
        return Err(Error::Unsupported {
            op: format!("conv1d of {} into {}", ctx.inputs[0].ty, ctx.output.ty),
            backend: format!(
                "cuda (sizes up to {MAX_DIM}, at most {MAX_GRID_YZ} tiles of {TILE_C} channels and {MAX_GRID_YZ} batch items)"
            ),
        });
    }
    let bias = ctx.inputs.get(2).map(|b| b.input());
    if ctx.precision == Precision::F16 {
        let im2col = Im2col { batch, c_in, len, c_out, k, out_len, bias };
        return tensor_cores(op, ctx, &im2col);
    }
    let params = Conv1dParams {
        x: ctx.input(0),
        w: ctx.input(1),
        bias: bias.unwrap_or_default(),
        out: ctx.out(),
        c_in: c_in as u32,
        len: len as u32,
        c_out: c_out as u32,
        out_len: out_len as u32,
        k: k as u32,
        red: red as u32,
        stride: op.stride as u32,
        padding: op.padding as u32,
        dilation: op.dilation as u32,
        has_bias: bias.is_some().into(),
    };
    let launch = KernelLaunch::new("conv1d_tiled", &params)
        .grid(tiles_t as u32, tiles_c as u32, batch as u32)
        .block(THREADS, 1, 1);
    Ok(vec![Launch::Kernel(launch)])
}

/// The sizes of one convolution.
struct Im2col {
    batch: usize,
    c_in: usize,
    len: usize,
    c_out: usize,
    k: usize,
    out_len: usize,
    bias: Option<In>,
}

/// The windows unrolled to f16 in scratch, then `w [c_out, c_in * k] x cols [c_in * k, out_len]`
/// per batch item on the tensor cores.
fn tensor_cores(op: &Conv1d, ctx: &LowerCtx, s: &Im2col) -> Result<Vec<Launch>> {
    let red = s.c_in * s.k;
    let n = s.batch * red * s.out_len;
    if n > u32::MAX as usize {
        return Err(Error::Unsupported { op: format!("conv1d unrolling {n} values"), backend: "cuda".into() });
    }
    let cols = ctx.scratch.take(n * 2);
    let params = Conv1dIm2colParams {
        x: ctx.input(0),
        cols,
        n: n as u32,
        c_in: s.c_in as u32,
        len: s.len as u32,
        k: s.k as u32,
        out_len: s.out_len as u32,
        stride: op.stride as u32,
        padding: op.padding as u32,
        dilation: op.dilation as u32,
    };
    let mut work = vec![Launch::Kernel(KernelLaunch::new("conv1d_im2col", &params).threads(n))];
    let product = RowGemm {
        a: ctx.input(1),
        lda: red,
        b: In { ptr: cols, kind: kind::F16, pad: 0 },
        ldb: s.out_len,
        transpose_b: false,
        c: ctx.out(),
        ldc: s.out_len,
        m: s.c_out,
        n: s.out_len,
        k: red,
        alpha: 1.0,
        a_offsets: vec![0; s.batch],
        b_offsets: (0..s.batch).map(|b| b * red * s.out_len).collect(),
        c_batch_stride: s.c_out * s.out_len,
        a_len: s.c_out * red,
        b_len: n,
        bias: s.bias,
        bias_rows: true,
        gelu: false,
        residual: None,
    };
    work.extend(gemm(ctx, &product)?);
    Ok(work)
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::TensorType;

    use super::*;
    use crate::lower::{Operand, Scratch};
    use crate::params::KernelParams;

    fn lower(op: &Conv1d, inputs: &[Operand], output: &Operand) -> Result<Vec<Launch>> {
        lower_with(op, inputs, output, Precision::F32)
    }

    fn lower_with(op: &Conv1d, inputs: &[Operand], output: &Operand, precision: Precision) -> Result<Vec<Launch>> {
        let scratch = Scratch::new(0x7000_0000);
        let ctx = LowerCtx { inputs, output, scalars: 0x9000, precision, scratch: &scratch };
        conv1d(op, &ctx)
    }

    /// With f16 products, Whisper's second convolution is an unrolling, one product on the
    /// tensor cores (weights as stored, windows in scratch) and a bias per output channel.
    #[test]
    fn f16_products_unroll_and_multiply_on_the_tensor_cores() {
        let op = Conv1d { stride: 2, padding: 1, dilation: 1 };
        let inputs = [f32s(0x1000, &[384, 3000]), f16s(0x2000, &[384, 384, 3]), f16s(0x3000, &[384])];
        let out = f32s(0x4000, &[384, 1500]);
        let work = lower_with(&op, &inputs, &out, Precision::F16).unwrap();
        let [Launch::Kernel(unroll), Launch::Gemm(g), Launch::Kernel(epilogue)] = &work[..] else { panic!("{work:?}") };
        assert_eq!((unroll.name, unroll.grid[0]), ("conv1d_im2col", (1152 * 1500usize).div_ceil(256) as u32));
        assert_eq!((g.m, g.n, g.k, g.batch, g.f16_inputs), (1500, 384, 1152, 1, true));
        assert_eq!((g.a, g.lda, g.b, g.ldb, g.c, g.ldc), (0x7000_0000, 1500, 0x2000, 1152, 0x4000, 1500));
        assert_eq!(epilogue.name, "matmul_epilogue");
        // Bias index (i / 1500) % 384: one value per output channel.
        let p = &epilogue.params;
        let at = std::mem::offset_of!(super::super::matmul::EpilogueParams, bias_div);
        assert_eq!((&p[at..at + 4], &p[at + 4..at + 8]), (&1500u32.to_le_bytes()[..], &384u32.to_le_bytes()[..]));
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

    /// An f16 weight as uploaded: native halves.
    fn f16s(ptr: u64, dims: &[usize]) -> Operand {
        Operand { ptr, kind: kind::F16, ty: TensorType::new(DType::F16, dims) }
    }

    #[test]
    fn whisper_second_conv_tiles() {
        // x [384, 3000], w [384, 384, 3], stride 2, padding 1: (3000 + 2 - 3) / 2 + 1 = 1500
        // positions -> 47 tiles of 32; 384 channels -> 6 tiles of 64; no batch axis -> 1.
        let op = Conv1d { stride: 2, padding: 1, dilation: 1 };
        let inputs = [f32s(0x1000, &[384, 3000]), f16s(0x2000, &[384, 384, 3]), f16s(0x3000, &[384])];
        let k = kernel(lower(&op, &inputs, &f32s(0x4000, &[384, 1500])).unwrap());
        assert_eq!((k.name, k.params_name), ("conv1d_tiled", "Conv1dParams"));
        assert_eq!((k.grid, k.block, k.shared_bytes), ([47, 6, 1], [128, 1, 1], 0));
        let want = Conv1dParams {
            x: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            w: In { ptr: 0x2000, kind: kind::F16, pad: 0 },
            bias: In { ptr: 0x3000, kind: kind::F16, pad: 0 },
            out: Out { ptr: 0x4000, dtype: 0, pad: 0 },
            c_in: 384,
            len: 3000,
            c_out: 384,
            out_len: 1500,
            k: 3,
            red: 1152,
            stride: 2,
            padding: 1,
            dilation: 1,
            has_bias: 1,
        };
        assert_eq!(k.params, want.to_bytes());
    }

    #[test]
    fn batched_without_bias() {
        // x [3, 80, 3000] with w [65, 80, 3]: 94 position tiles, 2 channel tiles, 3 items.
        let op = Conv1d { stride: 1, padding: 1, dilation: 1 };
        let inputs = [f32s(0x1000, &[3, 80, 3000]), f32s(0x2000, &[65, 80, 3])];
        let k = kernel(lower(&op, &inputs, &f32s(0x4000, &[3, 65, 3000])).unwrap());
        assert_eq!(k.grid, [94, 2, 3]);
        let want = Conv1dParams {
            x: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            w: In { ptr: 0x2000, kind: kind::F32, pad: 0 },
            bias: In::default(),
            out: Out { ptr: 0x4000, dtype: 0, pad: 0 },
            c_in: 80,
            len: 3000,
            c_out: 65,
            out_len: 3000,
            k: 3,
            red: 240,
            stride: 1,
            padding: 1,
            dilation: 1,
            has_bias: 0,
        };
        assert_eq!(k.params, want.to_bytes());
    }

    #[test]
    fn too_many_batch_items_is_unsupported_and_empty_is_nothing() {
        let op = Conv1d { stride: 1, padding: 0, dilation: 1 };
        let inputs = [f32s(0x1000, &[65536, 1, 4]), f32s(0x2000, &[1, 1, 1])];
        let err = lower(&op, &inputs, &f32s(0x4000, &[65536, 1, 4])).unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
        let inputs = [f32s(0x1000, &[0, 1, 4]), f32s(0x2000, &[1, 1, 1])];
        assert_eq!(lower(&op, &inputs, &f32s(0x4000, &[0, 1, 4])).unwrap(), Vec::new());
    }
}
