//! Fused attention, `softmax(q k^T * scale + mask) v` (kernels/cuda/attention.cu), on two paths:
//!
//! - few queries per head (decoder steps, at most [`FEW_QUERIES`]): `attention_rows`, one
//!   block per query row holding the row's scores in shared memory, all in f32;
//! - many (the encoder): the scores `scale * q k^T` as a batched product into f32 scratch,
//!   `attention_softmax` over each row (masking on the way), then the weights times `v` as a
//!   second product into the output. With [`Precision::F16`] the weights are written as f16
//!   halves, the tensor-core operand the second product takes without converting them.
//!
//! A query row with no visible key comes out NaN, as in the reference.

use susurrus_core::ir::Shape;
use susurrus_core::ops::{Attention, MaskKind};
use susurrus_core::{Error, Result};

use super::matmul::{RowGemm, gemm};
use super::{KernelLaunch, Launch, LowerCtx, Precision};
use crate::cuda::params::{In, Out, ParamsInfo, dims8, dtype_code, kind};

crate::cuda_params! {
    /// `attention_rows`: one block per query row (`sq` rows per batch). `dims` are the scores'
    /// dims `[..., sq, sk]` (`rank` of them) and `mask_strides` the mask's strides over them
    /// (0 where it broadcasts); `mode` 0 none, 1 additive, 2 causal.
    pub struct AttentionRowsParams {
        pub q: In,
        pub k: In,
        pub v: In,
        pub mask: In,
        pub out: Out,
        pub dims: [u32; 8],
        pub mask_strides: [u32; 8],
        pub rank: u32,
        pub sq: u32,
        pub sk: u32,
        pub d: u32,
        pub dv: u32,
        pub mode: u32,
        pub scale: f32,
    }
}

crate::cuda_params! {
    /// `attention_softmax`: one block per row of the f32 `scores` (`sk` each, `sq` rows per
    /// batch), weights written to `probs` as f16 halves (`half`) or f32. Mask fields as in
    /// [`AttentionRowsParams`].
    pub struct AttentionSoftmaxParams {
        pub scores: u64,
        pub probs: u64,
        pub mask: In,
        pub dims: [u32; 8],
        pub mask_strides: [u32; 8],
        pub rank: u32,
        pub sq: u32,
        pub sk: u32,
        pub mode: u32,
        pub half: u32,
    }
}

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![ParamsInfo::of::<AttentionRowsParams>(), ParamsInfo::of::<AttentionSoftmaxParams>()]
}

/// Most query rows per head that run `attention_rows`: a decoder step's handful, where two
/// products would mostly launch and idle. More go through the products.
pub const FEW_QUERIES: usize = 8;

/// Threads per block of both kernels.
const THREADS: u32 = 256;

/// Dynamic shared memory a block may use without opting in.
const MAX_SHARED: usize = 48 * 1024;

/// Dynamic shared memory of `attention_rows`: the scores, the query row, the value partial
/// sums and the reductions' 32 floats.
fn rows_shared_bytes(sk: usize, d: usize) -> usize {
    4 * (sk + d + THREADS as usize + 32)
}

fn unsupported(what: String) -> Error {
    Error::Unsupported { op: format!("attention {what}"), backend: "cuda".into() }
}

/// The mask fields both kernels share: mode, scores dims, mask strides, mask input.
struct MaskFields {
    mode: u32,
    dims: [u32; 8],
    strides: [u32; 8],
    rank: u32,
    input: In,
}

fn mask_fields(op: &Attention, ctx: &LowerCtx, scores: &Shape) -> Result<MaskFields> {
    let (mode, strides, input) = match (op.mask, ctx.inputs.get(3)) {
        (MaskKind::None, _) => (0, vec![0; scores.rank()], In::default()),
        (MaskKind::Additive, Some(m)) => (1, m.ty.shape.broadcast_strides(scores), m.input()),
        (MaskKind::Additive, None) => return Err(Error::shape("attention", "an additive mask needs a 4th input")),
        (MaskKind::Causal, _) => (2, vec![0; scores.rank()], In::default()),
    };
    let (dims, strides) = (dims8(scores.dims(), 1), dims8(&strides, 0));
    Ok(MaskFields { mode, dims, strides, rank: scores.rank() as u32, input })
}

/// `attention_rows` for at most [`FEW_QUERIES`] rows per head whose scores fit its shared
/// memory; the products around `attention_softmax` otherwise (any size).
pub fn attention(op: &Attention, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let [q, k, v, ..] = ctx.inputs else {
        return Err(Error::shape("attention", format!("takes q, k and v, got {} inputs", ctx.inputs.len())));
    };
    let (q, k, v) = (&q.ty.shape, &k.ty.shape, &v.ty.shape);
    let r = q.rank();
    if ctx.output.ty.numel() == 0 {
        return Ok(Vec::new());
    }
    if r > 8 {
        return Err(unsupported(format!("of rank {r} (at most 8)")));
    }
    let (sq, d, sk, dv) = (q.dims()[r - 2], q.dims()[r - 1], k.dims()[r - 2], v.dims()[r - 1]);
    let batch = q.dims()[..r - 2].iter().product::<usize>();
    let mut scores = q.dims()[..r - 2].to_vec();
    scores.extend([sq, sk]);
    let scores = Shape(scores);
    // Kernel sizes and strides are u32 and rows are blocks of a grid's x dimension.
    let mask_len = ctx.inputs.get(3).map_or(0, |m| m.ty.numel());
    if [sq, sk, d, dv, mask_len].iter().any(|&n| n > u32::MAX as usize) || batch * sq > i32::MAX as usize {
        return Err(unsupported(format!("on q {q}, k {k}, v {v} (sizes past 32 bits)")));
    }
    let mask = mask_fields(op, ctx, &scores)?;
    if sq <= FEW_QUERIES && rows_shared_bytes(sk, d) <= MAX_SHARED {
        return Ok(vec![rows(op, ctx, &mask, batch, (sq, sk, d, dv))]);
    }
    products(op, ctx, &mask, batch, (sq, sk, d, dv))
}

/// The one-kernel path: a block per query row.
fn rows(
    op: &Attention,
    ctx: &LowerCtx,
    mask: &MaskFields,
    batch: usize,
    (sq, sk, d, dv): (usize, usize, usize, usize),
) -> Launch {
    let params = AttentionRowsParams {
        q: ctx.input(0),
        k: ctx.input(1),
        v: ctx.input(2),
        mask: mask.input,
        out: ctx.out(),
        dims: mask.dims,
        mask_strides: mask.strides,
        rank: mask.rank,
        sq: sq as u32,
        sk: sk as u32,
        d: d as u32,
        dv: dv as u32,
        mode: mask.mode,
        scale: op.scale,
    };
    let launch = KernelLaunch::new("attention_rows", &params)
        .grid((batch * sq) as u32, 1, 1)
        .block(THREADS, 1, 1)
        .shared(rows_shared_bytes(sk, d) as u32);
    Launch::Kernel(launch)
}

/// The product path: scores, softmax, weights times values.
fn products(
    op: &Attention,
    ctx: &LowerCtx,
    mask: &MaskFields,
    batch: usize,
    (sq, sk, d, dv): (usize, usize, usize, usize),
) -> Result<Vec<Launch>> {
    let rows = batch * sq;
    let scores = ctx.scratch.take(rows * sk * 4);
    let mut work = gemm(
        ctx,
        &RowGemm {
            a: ctx.input(0),
            lda: d,
            b: ctx.input(1),
            ldb: d,
            transpose_b: true,
            c: Out { ptr: scores, dtype: dtype_code(susurrus_core::DType::F32), pad: 0 },
            ldc: sk,
            m: sq,
            n: sk,
            k: d,
            alpha: op.scale,
            a_offsets: (0..batch).map(|i| i * sq * d).collect(),
            b_offsets: (0..batch).map(|i| i * sk * d).collect(),
            c_batch_stride: sq * sk,
            a_len: batch * sq * d,
            b_len: batch * sk * d,
            bias: None,
            gelu: false,
        },
    )?;
    // f16 weights for the tensor cores need their own area; f32 ones replace the scores.
    let half = ctx.precision == Precision::F16;
    let probs = if half { ctx.scratch.take(rows * sk * 2) } else { scores };
    let params = AttentionSoftmaxParams {
        scores,
        probs,
        mask: mask.input,
        dims: mask.dims,
        mask_strides: mask.strides,
        rank: mask.rank,
        sq: sq as u32,
        sk: sk as u32,
        mode: mask.mode,
        half: half as u32,
    };
    work.push(Launch::Kernel(
        KernelLaunch::new("attention_softmax", &params).grid(rows as u32, 1, 1).block(THREADS, 1, 1),
    ));
    work.extend(gemm(
        ctx,
        &RowGemm {
            a: In { ptr: probs, kind: if half { kind::F16 } else { kind::F32 }, pad: 0 },
            lda: sk,
            b: ctx.input(2),
            ldb: dv,
            transpose_b: false,
            c: ctx.out(),
            ldc: dv,
            m: sq,
            n: dv,
            k: sk,
            alpha: 1.0,
            a_offsets: (0..batch).map(|i| i * sq * sk).collect(),
            b_offsets: (0..batch).map(|i| i * sk * dv).collect(),
            c_batch_stride: sq * dv,
            a_len: rows * sk,
            b_len: batch * sk * dv,
            bias: None,
            gelu: false,
        },
    )?);
    Ok(work)
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::TensorType;

    use super::*;
    use crate::cuda::lower::{CublasGemm, Operand, Scratch};

    fn ty(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType::new(dtype, Shape(dims.to_vec()))
    }

    /// Lowers `op` on arena inputs at 0x1000, 0x2000, ... (the mask the 4th), the output at
    /// 0x8000 and scratch from 0x100000; returns the work and the scratch used.
    fn lower(op: &Attention, inputs: &[TensorType], precision: Precision) -> Result<(Vec<Launch>, u64)> {
        let inputs: Vec<Operand> =
            inputs.iter().enumerate().map(|(i, t)| Operand::arena(0x1000 * (i as u64 + 1), t.clone())).collect();
        let refs: Vec<&TensorType> = inputs.iter().map(|o| &o.ty).collect();
        let output_ty = susurrus_core::ops::OpKind::infer(op, &refs)?;
        let output = Operand::arena(0x8000, output_ty);
        let scratch = Scratch::new(0x100000);
        let ctx = LowerCtx { inputs: &inputs, output: &output, scalars: 0x9000, precision, scratch: &scratch };
        let work = attention(op, &ctx)?;
        Ok((work, scratch.used()))
    }

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }

    #[test]
    fn a_decoder_step_is_one_block_per_query_row() {
        // 6 heads, 2 queries over 448 keys of 64, values of 33, a key-padding mask [6, 1, 448]:
        // its strides over the scores [6, 2, 448] are [448, 0, 1].
        let op = Attention { scale: 0.125, mask: MaskKind::Additive };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let inputs = [f(&[6, 2, 64]), f(&[6, 448, 64]), f(&[6, 448, 33]), f(&[6, 1, 448])];
        let (work, scratch) = lower(&op, &inputs, Precision::F16).unwrap();
        assert_eq!(scratch, 0);
        let [Launch::Kernel(k)] = &work[..] else { panic!("{work:?}") };
        assert_eq!((k.name, k.params_name), ("attention_rows", "AttentionRowsParams"));
        assert_eq!((k.grid, k.block), ([12, 1, 1], [256, 1, 1]));
        assert_eq!(k.shared_bytes, 4 * (448 + 64 + 256 + 32));
        let want = AttentionRowsParams {
            q: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            k: In { ptr: 0x2000, kind: kind::F32, pad: 0 },
            v: In { ptr: 0x3000, kind: kind::F32, pad: 0 },
            mask: In { ptr: 0x4000, kind: kind::F32, pad: 0 },
            out: Out { ptr: 0x8000, dtype: 0, pad: 0 },
            dims: [6, 2, 448, 1, 1, 1, 1, 1],
            mask_strides: [448, 0, 1, 0, 0, 0, 0, 0],
            rank: 3,
            sq: 2,
            sk: 448,
            d: 64,
            dv: 33,
            mode: 1,
            scale: 0.125,
        };
        assert_eq!(k.params, crate::cuda::params::KernelParams::to_bytes(&want));
    }

    #[test]
    fn causal_rows_carry_the_mode_and_no_mask() {
        let op = Attention { scale: 1.0, mask: MaskKind::Causal };
        let f = |dims: &[usize]| ty(DType::F16, dims);
        let (work, _) = lower(&op, &[f(&[2, 3, 3, 8]), f(&[2, 3, 5, 8]), f(&[2, 3, 5, 8])], Precision::F32).unwrap();
        let [Launch::Kernel(k)] = &work[..] else { panic!("{work:?}") };
        assert_eq!(k.grid, [18, 1, 1]);
        let w = words(&k.params);
        // mask In at words 12..16 is empty; out dtype f16; dims [2, 3, 3, 5]; mode 2.
        assert_eq!(&w[12..16], &[0, 0, 0, 0]);
        assert_eq!(w[18], 1);
        assert_eq!(&w[20..24], &[2, 3, 3, 5]);
        assert_eq!(&w[36..43], &[4, 3, 5, 8, 8, 2, 1.0f32.to_bits()]);
    }

    #[test]
    fn rows_past_the_shared_memory_take_the_products() {
        // One query over 12 000 keys of 64: 4 * (12000 + 64 + 288) bytes exceed 48 KiB.
        let op = Attention { scale: 1.0, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let (work, _) = lower(&op, &[f(&[1, 64]), f(&[12000, 64]), f(&[12000, 64])], Precision::F32).unwrap();
        assert!(work.iter().any(|w| matches!(w, Launch::Kernel(k) if k.name == "attention_softmax")));
        assert!(rows_shared_bytes(11_900, 64) <= MAX_SHARED);
    }

    /// The encoder's self-attention in f16 precision (f16 activations, stored as f32 words):
    /// q and k rounded into scratch, scores f32, weights f16, values rounded, and the output
    /// rounded to f16 by the epilogue.
    #[test]
    fn the_encoder_runs_two_products_around_the_softmax() {
        let op = Attention { scale: 0.125, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F16, dims);
        let (h, s, d) = (6, 1500, 64);
        let inputs = [f(&[1, h, s, d]), f(&[1, h, s, d]), f(&[1, h, s, d])];
        let (work, scratch) = lower(&op, &inputs, Precision::F16).unwrap();
        let names: Vec<&str> = work
            .iter()
            .map(|w| match w {
                Launch::Kernel(k) => k.name,
                Launch::Gemm(_) => "gemm",
            })
            .collect();
        assert_eq!(
            names,
            [
                "matmul_convert",
                "matmul_convert",
                "gemm",
                "attention_softmax",
                "matmul_convert",
                "gemm",
                "matmul_epilogue"
            ]
        );
        // Scratch, each area 256-aligned: scores (f32), q and k as f16, weights (f16), v as f16.
        let (scores, qk16, probs, v16) = (h * s * s * 4, h * s * d * 2, h * s * s * 2, h * s * d * 2);
        let at = |x: usize| x.next_multiple_of(256) as u64;
        let probs_at = at(scores) + 2 * at(qk16);
        assert_eq!(scratch, at(probs_at as usize + probs) + v16 as u64);
        let Launch::Gemm(g) = &work[2] else { panic!() };
        let want = CublasGemm {
            trans_a: true,
            trans_b: false,
            m: s as i32,
            n: s as i32,
            k: d as i32,
            alpha: 0.125,
            beta: 0.0,
            a: 0x100000 + at(scores) + at(qk16),
            lda: d as i32,
            stride_a: (s * d) as i64,
            b: 0x100000 + at(scores),
            ldb: d as i32,
            stride_b: (s * d) as i64,
            c: 0x100000,
            ldc: s as i32,
            stride_c: (s * s) as i64,
            batch: h as i32,
            f16_inputs: true,
        };
        assert_eq!(g, &want);
        let Launch::Kernel(k) = &work[3] else { panic!() };
        assert_eq!((k.grid, k.block, k.shared_bytes), ([(h * s) as u32, 1, 1], [256, 1, 1], 0));
        let softmax = AttentionSoftmaxParams {
            scores: 0x100000,
            probs: 0x100000 + probs_at,
            mask: In::default(),
            dims: [1, 6, 1500, 1500, 1, 1, 1, 1],
            mask_strides: [0; 8],
            rank: 4,
            sq: 1500,
            sk: 1500,
            mode: 0,
            half: 1,
        };
        assert_eq!(k.params, crate::cuda::params::KernelParams::to_bytes(&softmax));
        // The weights are used as stored (no conversion between the softmax and the product).
        let Launch::Gemm(g) = &work[5] else { panic!() };
        assert_eq!((g.m, g.n, g.k, g.lda, g.ldb, g.ldc), (64, 1500, 1500, 64, 1500, 64));
        assert_eq!((g.a, g.b, g.c), (0x100000 + at(probs_at as usize + probs), 0x100000 + probs_at, 0x8000));
        assert_eq!(
            (g.stride_a, g.stride_b, g.stride_c, g.batch, g.trans_a),
            ((s * d) as i64, (s * s) as i64, (s * d) as i64, 6, false)
        );
    }

    #[test]
    fn f32_precision_softmaxes_the_scores_in_place() {
        // Batch [2, 3], Sq = 9, Sk = 5, D = 4, Dv = 2, an additive mask [9, 5].
        let op = Attention { scale: 0.5, mask: MaskKind::Additive };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let inputs = [f(&[2, 3, 9, 4]), f(&[2, 3, 5, 4]), f(&[2, 3, 5, 2]), f(&[9, 5])];
        let (work, scratch) = lower(&op, &inputs, Precision::F32).unwrap();
        assert_eq!(scratch, 6 * 9 * 5 * 4);
        let [Launch::Gemm(g1), Launch::Kernel(k), Launch::Gemm(g2)] = &work[..] else { panic!("{work:?}") };
        assert_eq!((g1.m, g1.n, g1.k, g1.alpha, g1.trans_a, g1.batch), (5, 9, 4, 0.5, true, 6));
        assert_eq!((g1.a, g1.b, g1.c, g1.stride_a, g1.stride_b, g1.stride_c), (0x2000, 0x1000, 0x100000, 20, 36, 45));
        let w = words(&k.params);
        assert_eq!(&w[0..4], &[0x100000, 0, 0x100000, 0]);
        assert_eq!(&w[4..6], &[0x4000, 0]);
        assert_eq!(&w[8..12], &[2, 3, 9, 5]);
        assert_eq!(&w[16..20], &[0, 0, 5, 1]);
        assert_eq!(&w[24..29], &[4, 9, 5, 1, 0]);
        assert_eq!(k.grid, [54, 1, 1]);
        assert_eq!((g2.m, g2.n, g2.k, g2.alpha, g2.trans_a, g2.f16_inputs), (2, 9, 5, 1.0, false, false));
        assert_eq!((g2.a, g2.b, g2.c, g2.stride_a, g2.stride_b, g2.stride_c), (0x3000, 0x100000, 0x8000, 10, 45, 18));
    }

    #[test]
    fn empty_outputs_do_nothing_and_high_ranks_are_unsupported() {
        let op = Attention { scale: 1.0, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let (work, _) = lower(&op, &[f(&[0, 3, 4]), f(&[0, 5, 4]), f(&[0, 5, 2])], Precision::F32).unwrap();
        assert!(work.is_empty());
        let dims = [1, 1, 1, 1, 1, 1, 1];
        let shape = |last: &[usize]| f(&[&dims[..], last].concat());
        let err = lower(&op, &[shape(&[3, 4]), shape(&[5, 4]), shape(&[5, 2])], Precision::F32).unwrap_err();
        assert_eq!(err.to_string(), "attention of rank 9 (at most 8) is not supported by the cuda backend");
    }
}
