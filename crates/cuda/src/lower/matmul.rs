//! matmul and matmul + bias (+ GELU), and [`gemm`], the product every op with one uses
//! (attention's scores and values, conv1d's windows).
//!
//! Products with a weight and at most [`GEMV_ROWS`] rows (decoder steps) run `matmul_gemv`:
//! a warp per output column reads the weight row once for every row, in f32 arithmetic. All
//! others go to cuBLAS: with [`Precision::F16`] the operands are f16 (f32 ones are rounded into
//! scratch first, f16 weights used as stored) on the tensor cores with f32 accumulation; with
//! [`Precision::F32`] they are f32 with f32 arithmetic. cuBLAS writes f32; a bias, GELU and
//! f16 rounding of the result follow in `matmul_epilogue`.

use susurrus_core::exec::index::broadcast_offset;
use susurrus_core::ir::Shape;
use susurrus_core::ops::{MatMul, MatMulBias};
use susurrus_core::{Error, Result};

use super::{CublasGemm, KernelLaunch, Launch, LowerCtx, Precision};
use crate::params::{In, Out, ParamsInfo, dtype_code, kind};

crate::cuda_params! {
    /// `matmul_gemv`: `out[r, c] = act(sum_k a[r, k] * b[c, k] + bias[c])` for `m` rows.
    pub struct GemvParams {
        pub a: In,
        pub b: In,
        pub bias: In,
        /// Added last, at the output's index, when `has_residual`.
        pub residual: In,
        pub out: Out,
        /// [`GEMV_Q8`]: the weight's row scales.
        pub scales: u64,
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub has_bias: u32,
        pub gelu: u32,
        pub has_residual: u32,
        /// How the kernel loads: [`GEMV_HALF8`], [`GEMV_FLOAT4`], [`GEMV_Q8`] or element by
        /// element (0).
        pub mode: u32,
    }
}

/// `matmul_gemv` loads eight f16 weights and eight f32 row values at a time.
pub const GEMV_HALF8: u32 = 1;
/// `matmul_gemv` loads four f32 weights and four f32 row values at a time.
pub const GEMV_FLOAT4: u32 = 2;

/// `matmul_gemv` loads eight int8 weights (a q8 weight as stored) and eight f32 row values at
/// a time, and scales each column's sum by its row's scale.
pub const GEMV_Q8: u32 = 3;

/// The widest loads `matmul_gemv` can use for rows `a` and weights `b` of length `k` (every
/// row then starts 16-byte aligned: blocks are 256-aligned and rows a multiple of 16 bytes).
fn gemv_mode(a: In, b: In, k: usize) -> u32 {
    let aligned = |x: In| x.ptr.is_multiple_of(16);
    match (a.kind, b.kind) {
        (kind::F32, kind::F16) if k.is_multiple_of(8) && aligned(a) && aligned(b) => GEMV_HALF8,
        (kind::F32, kind::F32) if k.is_multiple_of(4) && aligned(a) && aligned(b) => GEMV_FLOAT4,
        (kind::F32, kind::Q8) if k.is_multiple_of(8) && aligned(a) && aligned(b) => GEMV_Q8,
        _ => 0,
    }
}

/// Whether a product of `ctx` (input 1 a q8 weight) runs `matmul_gemv` on the weight as stored:
/// a decoder step's few rows, with loads [`GEMV_Q8`] takes. Otherwise the lowering dequantizes
/// the weight into scratch first.
pub fn gemv_reads_q8(ctx: &LowerCtx, transpose_b: bool) -> bool {
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    let (ra, k) = (a.ty.shape.rank(), a.ty.shape.last());
    let rows = a.ty.numel() / k.max(1);
    b.ty.dtype == susurrus_core::DType::Q8
        && transpose_b
        && ra >= 2
        && b.ty.shape.rank() == 2
        && rows <= GEMV_ROWS
        && gemv_mode(a.input(), b.input(), k) == GEMV_Q8
}

crate::cuda_params! {
    /// `matmul_convert`: `n` elements of `x` written as f16 (`to_f16`) or f32 words to `out`;
    /// `vec4`: four per thread (f32 words, both addresses 16-byte aligned).
    pub struct ConvertParams {
        pub x: In,
        pub out: u64,
        pub n: u32,
        pub to_f16: u32,
        pub vec4: u32,
    }
}

crate::cuda_params! {
    /// `matmul_epilogue`: `out[i] = act(out[i] + bias[(i / bias_div) % bias_len])`, stored as
    /// the output's dtype (a bias over columns: `bias_div` 1, `bias_len` n; over rows: n, m).
    pub struct EpilogueParams {
        pub bias: In,
        /// Added after GELU, at the output's index, when `has_residual`.
        pub residual: In,
        pub out: Out,
        pub total: u32,
        pub bias_div: u32,
        pub bias_len: u32,
        pub has_bias: u32,
        pub gelu: u32,
        pub has_residual: u32,
    }
}

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![ParamsInfo::of::<GemvParams>(), ParamsInfo::of::<ConvertParams>(), ParamsInfo::of::<EpilogueParams>()]
}

/// Most rows (over all batches) a product with a weight runs as a matrix-vector kernel.
pub const GEMV_ROWS: usize = 8;

/// A row-major product `C[i] = alpha * A[i] x op(B[i])` for `batch` matrices, then `+ bias`
/// (over columns) and GELU. `A[i]` is `m x k` at `a` + `a_offsets[i]` elements, `B[i]` is
/// `k x n` (or `n x k` with `transpose_b`) at `b + b_offsets[i]`, `C[i]` is `m x n` at
/// `i * c_batch_stride` elements of `c`. Leading dimensions are the row lengths given.
#[derive(Clone, Debug)]
pub struct RowGemm {
    pub a: In,
    pub lda: usize,
    pub b: In,
    pub ldb: usize,
    pub transpose_b: bool,
    pub c: Out,
    pub ldc: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub a_offsets: Vec<usize>,
    pub b_offsets: Vec<usize>,
    pub c_batch_stride: usize,
    /// Elements of `a` and `b` (from offset 0) that the product reads: what a conversion
    /// into scratch copies.
    pub a_len: usize,
    pub b_len: usize,
    pub bias: Option<In>,
    /// The bias runs over rows (one value per row of `C`) rather than over columns.
    pub bias_rows: bool,
    pub gelu: bool,
    /// An input of `C`'s shape added after GELU.
    pub residual: Option<In>,
}

/// `x` as the product's operand type: as stored when it already is, else converted into
/// scratch (a launch appended to `work`).
fn operand(x: In, len: usize, f16: bool, ctx: &LowerCtx, work: &mut Vec<Launch>) -> u64 {
    let want = if f16 { kind::F16 } else { kind::F32 };
    if x.kind == want {
        return x.ptr;
    }
    let bytes = if f16 { 2 } else { 4 };
    let out = ctx.scratch.take(len * bytes);
    let vec4 = x.kind == kind::F32 && x.ptr.is_multiple_of(16) && out.is_multiple_of(16);
    let params = ConvertParams { x, out, n: len as u32, to_f16: f16 as u32, vec4: vec4 as u32 };
    let threads = if vec4 { len.div_ceil(4) } else { len };
    work.push(Launch::Kernel(KernelLaunch::new("matmul_convert", &params).threads(threads)));
    out
}

/// Equal steps between consecutive offsets, if they are.
fn uniform_stride(offsets: &[usize]) -> Option<i64> {
    match offsets {
        [] | [_] => Some(0),
        [first, second, ..] => {
            let step = *second as i64 - *first as i64;
            offsets.windows(2).all(|w| w[1] as i64 - w[0] as i64 == step).then_some(step)
        }
    }
}

/// The device work of `g` (see [`RowGemm`]).
pub fn gemm(ctx: &LowerCtx, g: &RowGemm) -> Result<Vec<Launch>> {
    let batch = g.a_offsets.len();
    if g.m == 0 || g.n == 0 || batch == 0 {
        return Ok(Vec::new());
    }
    let too_big = [g.m, g.n, g.k, g.lda, g.ldb, g.ldc, batch, g.a_len, g.b_len].iter().any(|&d| d > i32::MAX as usize)
        || g.m * g.n * batch > u32::MAX as usize;
    if too_big {
        return Err(Error::Unsupported { op: format!("a {}x{}x{} product", g.m, g.k, g.n), backend: "cuda".into() });
    }
    let f16 = ctx.precision == Precision::F16;
    let mut work = Vec::new();
    let a = operand(g.a, g.a_len, f16, ctx, &mut work);
    let b = operand(g.b, g.b_len, f16, ctx, &mut work);
    let elem = if f16 { 2 } else { 4 };
    let call = |a_off: usize, b_off: usize, c_off: usize, count: usize, sa: i64, sb: i64| CublasGemm {
        // Row-major C = A x op(B) is column-major C^T = op(B)^T x A^T: cuBLAS's A is our B.
        trans_a: g.transpose_b,
        trans_b: false,
        m: g.n as i32,
        n: g.m as i32,
        k: g.k as i32,
        alpha: g.alpha,
        beta: 0.0,
        a: b + (b_off * elem) as u64,
        lda: g.ldb as i32,
        stride_a: sb,
        b: a + (a_off * elem) as u64,
        ldb: g.lda as i32,
        stride_b: sa,
        c: g.c.ptr + (c_off * 4) as u64,
        ldc: g.ldc as i32,
        stride_c: g.c_batch_stride as i64,
        batch: count as i32,
        f16_inputs: f16,
    };
    match (uniform_stride(&g.a_offsets), uniform_stride(&g.b_offsets)) {
        (Some(sa), Some(sb)) => {
            work.push(Launch::Gemm(call(g.a_offsets[0], g.b_offsets[0], 0, batch, sa, sb)));
        }
        _ => {
            for (i, (&ao, &bo)) in g.a_offsets.iter().zip(&g.b_offsets).enumerate() {
                work.push(Launch::Gemm(call(ao, bo, i * g.c_batch_stride, 1, 0, 0)));
            }
        }
    }
    let rounds = g.c.dtype == dtype_code(susurrus_core::DType::F16);
    if g.bias.is_some() || g.gelu || g.residual.is_some() || rounds {
        if g.ldc != g.n {
            return Err(Error::Unsupported { op: "a strided product with an epilogue".into(), backend: "cuda".into() });
        }
        let total = batch * g.c_batch_stride.max(g.m * g.n);
        let (bias_div, bias_len) = if g.bias_rows { (g.n, g.m) } else { (1, g.n) };
        let params = EpilogueParams {
            bias: g.bias.unwrap_or_default(),
            out: g.c,
            total: total as u32,
            bias_div: bias_div as u32,
            bias_len: bias_len as u32,
            has_bias: g.bias.is_some() as u32,
            gelu: g.gelu as u32,
            residual: g.residual.unwrap_or_default(),
            has_residual: g.residual.is_some() as u32,
        };
        work.push(Launch::Kernel(KernelLaunch::new("matmul_epilogue", &params).threads(total.div_ceil(4))));
    }
    Ok(work)
}

/// The product of inputs 0 and 1 of `ctx` (+ input 2 as bias, + input 3 as residual), for
/// matmul and matmul + bias.
fn product(
    ctx: &LowerCtx,
    transpose_b: bool,
    bias: Option<In>,
    gelu: bool,
    residual: Option<In>,
) -> Result<Vec<Launch>> {
    let (a_ty, b_ty, out_ty) = (&ctx.inputs[0].ty, &ctx.inputs[1].ty, &ctx.output.ty);
    let (a, b, out) = (&a_ty.shape, &b_ty.shape, &out_ty.shape);
    let (ra, rb, ro) = (a.rank(), b.rank(), out.rank());
    let (m, k, n) = (a.dims()[ra - 2], a.dims()[ra - 1], out.dims()[ro - 1]);
    if out.numel() == 0 {
        return Ok(Vec::new());
    }
    let batch = Shape::from(&out.dims()[..ro - 2]);
    let a_batch = Shape::from(&a.dims()[..ra - 2]);
    let b_batch = Shape::from(&b.dims()[..rb - 2]);
    let weight = b_batch.numel() == 1;
    if weight && transpose_b && batch.numel() * m <= GEMV_ROWS {
        let rows = batch.numel() * m;
        let params = GemvParams {
            a: ctx.input(0),
            b: ctx.input(1),
            bias: bias.unwrap_or_default(),
            out: ctx.out(),
            scales: ctx.inputs[1].ptr + (n * k).div_ceil(4) as u64 * 4,
            m: rows as u32,
            n: n as u32,
            k: k as u32,
            has_bias: bias.is_some() as u32,
            gelu: gelu as u32,
            residual: residual.unwrap_or_default(),
            has_residual: residual.is_some() as u32,
            mode: gemv_mode(ctx.input(0), ctx.input(1), k),
        };
        // A warp per output column, four columns per block (a 384-wide layer is 96 blocks).
        let launch = KernelLaunch::new("matmul_gemv", &params).grid(n.div_ceil(4) as u32, 1, 1).block(128, 1, 1);
        return Ok(vec![Launch::Kernel(launch)]);
    }
    let (m_all, a_offsets, b_offsets) = if weight {
        // `b` serves every batch: `a`'s batches are the rows of one taller matrix.
        (m * batch.numel(), vec![0], vec![0])
    } else {
        let offsets = |s: &Shape, per: usize| {
            let strides = s.broadcast_strides(&batch);
            (0..batch.numel()).map(|i| broadcast_offset(i, batch.dims(), &strides) * per).collect::<Vec<_>>()
        };
        (m, offsets(&a_batch, m * k), offsets(&b_batch, k * n))
    };
    let g = RowGemm {
        a: ctx.input(0),
        lda: k,
        b: ctx.input(1),
        ldb: if transpose_b { k } else { n },
        transpose_b,
        c: ctx.out(),
        ldc: n,
        m: m_all,
        n,
        k,
        alpha: 1.0,
        a_offsets,
        b_offsets,
        c_batch_stride: m_all * n,
        a_len: a.numel(),
        b_len: b.numel(),
        bias,
        bias_rows: false,
        gelu,
        residual,
    };
    gemm(ctx, &g)
}

pub fn matmul(op: &MatMul, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    product(ctx, op.transpose_b, None, false, None)
}

pub fn matmul_bias(op: &MatMulBias, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    product(ctx, op.transpose_b, Some(ctx.input(2)), op.gelu, op.residual.then(|| ctx.input(3)))
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::TensorType;

    use super::*;
    use crate::lower::{Operand, Scratch};

    use crate::lower::testing::ty;

    fn lower(op: &MatMul, a: TensorType, b: Operand, out: TensorType, precision: Precision) -> (Vec<Launch>, u64) {
        let inputs = [Operand::arena(0x10000, a), b];
        let output = Operand::arena(0x20000, out);
        let scratch = Scratch::new(0x80000);
        let ctx = LowerCtx { inputs: &inputs, output: &output, scalars: 0x9000, precision, scratch: &scratch };
        (matmul(op, &ctx).unwrap(), scratch.used())
    }

    fn weight(dims: &[usize]) -> Operand {
        Operand { ptr: 0x40000, kind: kind::F16, ty: ty(DType::F16, dims) }
    }

    #[test]
    fn a_decoder_step_is_one_gemv() {
        let op = MatMul { transpose_b: true };
        let (work, scratch) = lower(
            &op,
            ty(DType::F32, &[1, 1, 384]),
            weight(&[1536, 384]),
            ty(DType::F32, &[1, 1, 1536]),
            Precision::F16,
        );
        assert_eq!(scratch, 0);
        let [Launch::Kernel(k)] = &work[..] else { panic!("{work:?}") };
        assert_eq!((k.name, k.grid, k.block), ("matmul_gemv", [384, 1, 1], [128, 1, 1]));
        // f16 weights, f32 rows of 384: eight of each per load.
        let at = std::mem::offset_of!(GemvParams, mode);
        assert_eq!(&k.params[at..at + 4], &GEMV_HALF8.to_le_bytes());
    }

    /// A q8 weight: a decoder step reads it as stored (int8 loads, scales from right after the
    /// values); an encoder product dequantizes it into f16 scratch for cuBLAS.
    #[test]
    fn q8_weights_are_read_as_stored_by_a_step_and_dequantized_for_cublas() {
        let op: susurrus_core::ops::Op = MatMul { transpose_b: true }.into();
        let q8 = Operand { ptr: 0x40000, kind: kind::Q8, ty: ty(DType::Q8, &[1536, 384]) };
        let run = |rows: usize| {
            let a = Operand::arena(0x1000, ty(DType::F32, &[rows, 384]));
            let out = Operand::arena(0x200000, ty(DType::F32, &[rows, 1536]));
            let scratch = Scratch::new(0x900000);
            let ctx = LowerCtx {
                inputs: &[a, q8.clone()],
                output: &out,
                scalars: 0x9000,
                precision: Precision::F16,
                scratch: &scratch,
            };
            super::super::lower(&op, &ctx).unwrap()
        };
        let step = run(1);
        let [Launch::Kernel(k)] = &step[..] else { panic!("{step:?}") };
        assert_eq!(k.name, "matmul_gemv");
        let at = std::mem::offset_of!(GemvParams, scales);
        let scales = u64::from_le_bytes(k.params[at..at + 8].try_into().unwrap());
        assert_eq!(scales, 0x40000 + 1536 * 384);
        let at = std::mem::offset_of!(GemvParams, mode);
        assert_eq!(&k.params[at..at + 4], &GEMV_Q8.to_le_bytes());
        let encoder = run(1500);
        let names: Vec<&str> = encoder
            .iter()
            .map(|l| match l {
                Launch::Kernel(k) => k.name,
                Launch::Gemm(_) => "cublas",
            })
            .collect();
        assert_eq!(names[0], "dequantize_q8", "{names:?}");
        assert!(names.contains(&"cublas"), "{names:?}");
    }

    #[test]
    fn an_encoder_product_rounds_activations_and_calls_cublas_once() {
        let op = MatMul { transpose_b: true };
        let (work, scratch) = lower(
            &op,
            ty(DType::F32, &[1, 1500, 384]),
            weight(&[1536, 384]),
            ty(DType::F32, &[1, 1500, 1536]),
            Precision::F16,
        );
        assert_eq!(scratch, 1500 * 384 * 2);
        let [Launch::Kernel(convert), Launch::Gemm(g)] = &work[..] else { panic!("{work:?}") };
        assert_eq!(convert.name, "matmul_convert");
        let want = CublasGemm {
            trans_a: true,
            trans_b: false,
            m: 1536,
            n: 1500,
            k: 384,
            alpha: 1.0,
            beta: 0.0,
            a: 0x40000,
            lda: 384,
            stride_a: 0,
            b: 0x80000,
            ldb: 384,
            stride_b: 0,
            c: 0x20000,
            ldc: 1536,
            stride_c: 1500 * 1536,
            batch: 1,
            f16_inputs: true,
        };
        assert_eq!(g, &want);
    }

    #[test]
    fn f32_precision_widens_an_f16_operand_and_batches_by_stride() {
        let op = MatMul { transpose_b: false };
        let b = Operand { ptr: 0x40000, kind: kind::F16, ty: ty(DType::F16, &[3, 5, 7]) };
        let (work, scratch) = lower(&op, ty(DType::F32, &[3, 4, 5]), b, ty(DType::F32, &[3, 4, 7]), Precision::F32);
        assert_eq!(scratch, 3 * 5 * 7 * 4);
        let [Launch::Kernel(_), Launch::Gemm(g)] = &work[..] else { panic!("{work:?}") };
        assert_eq!((g.m, g.n, g.k, g.lda, g.ldb, g.ldc), (7, 4, 5, 7, 5, 7));
        assert_eq!((g.stride_a, g.stride_b, g.stride_c, g.batch, g.trans_a), (35, 20, 28, 3, false));
        assert_eq!((g.a, g.b, g.f16_inputs), (0x80000, 0x10000, false));
    }

    #[test]
    fn broadcast_batches_without_a_common_stride_are_separate_calls() {
        let op = MatMul { transpose_b: false };
        let b = Operand::arena(0x40000, ty(DType::F32, &[2, 1, 3, 2]));
        let (work, _) = lower(&op, ty(DType::F32, &[1, 2, 2, 3]), b, ty(DType::F32, &[2, 2, 2, 2]), Precision::F32);
        let calls: Vec<(u64, u64, u64)> = work
            .iter()
            .filter_map(|w| match w {
                Launch::Gemm(g) => Some((g.a, g.b, g.c)),
                Launch::Kernel(_) => None,
            })
            .collect();
        // Output batch (i, j) reads a[0, j] and b[i, 0]: a's offsets 0, 6, 0, 6 and b's 0, 0, 6, 6.
        let want = [(0, 0, 0), (0, 6, 4), (6, 0, 8), (6, 6, 12)]
            .map(|(bo, ao, co)| (0x40000 + bo * 4, 0x10000 + ao * 4, 0x20000 + co * 4));
        assert_eq!(calls, want);
    }
}
