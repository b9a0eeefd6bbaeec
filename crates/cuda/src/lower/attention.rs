//! Fused attention, `softmax(q k^T * scale + mask) v` (kernels/attention.cu), on two paths:
//!
//! - few queries per head (decoder steps, at most [`FEW_QUERIES`]), split over the keys
//!   ("flash decoding"): `attention_split` runs a block per (query row, chunk of keys), so a
//!   step's handful of rows still fills the GPU, and writes each chunk's maximum, sum of
//!   exponentials and unnormalised weighted values to f32 scratch; `attention_combine`
//!   rescales and adds the chunks of each row. All f32.
//! - many (the encoder): the scores `scale * q k^T` as a batched product into f32 scratch,
//!   `attention_softmax` over each row in one pass (masking on the way; a warp per row held
//!   in registers up to [`WARP_ROW_KEYS`] keys, a block per row past them), then the weights
//!   times `v` as a second product into the output. With [`Precision::F16`] q, k and v are
//!   rounded to f16 by one `attention_convert` launch and the weights are written as f16
//!   halves: the tensor-core operands the products take without converting anything.
//!
//! A query row with no visible key comes out NaN, as in the reference.

use susurrus_core::ir::Shape;
use susurrus_core::ops::{Attention, MaskKind};
use susurrus_core::{DType, Error, Result};

use super::matmul::{RowGemm, gemm};
use super::{BLOCK, KernelLaunch, Launch, LowerCtx, Precision};
use crate::params::{In, Out, ParamsInfo, dims8, dtype_code, kind};

crate::cuda_params! {
    /// `attention_split`: block (row, split) scores keys `[split * chunk, + chunk)` of query
    /// row `row` (`sq` rows per batch) and writes the chunk's maximum and sum of exponentials
    /// to `stats` (f32 `[rows, splits, 2]`) and its unnormalised weighted sum of values to
    /// `part` (f32 `[rows, splits, dv]`). `dims` are the scores' dims `[..., sq, sk]` (`rank`
    /// of them) and `mask_strides` the mask's strides over them (0 where it broadcasts);
    /// `mode` 0 none, 1 additive, 2 causal.
    pub struct AttentionSplitParams {
        pub q: In,
        pub k: In,
        pub v: In,
        pub mask: In,
        pub stats: u64,
        pub part: u64,
        pub dims: [u32; 8],
        pub mask_strides: [u32; 8],
        pub rank: u32,
        pub sq: u32,
        pub sk: u32,
        pub d: u32,
        pub dv: u32,
        pub mode: u32,
        pub chunk: u32,
        pub splits: u32,
        pub scale: f32,
    }
}

crate::cuda_params! {
    /// `attention_combine`: a block per query row adds the `splits` chunks that
    /// `attention_split` left in `stats` and `part` into the row's `dv` outputs.
    pub struct AttentionCombineParams {
        pub stats: u64,
        pub part: u64,
        pub out: Out,
        pub splits: u32,
        pub dv: u32,
    }
}

crate::cuda_params! {
    /// `attention_softmax` over the `rows` rows of the f32 `scores` (`sk` each, `sq` rows per
    /// batch), weights written to `probs` as f16 halves (`half`) or f32. With `per_lane`
    /// (a power of two) a warp per row, each lane holding `per_lane` groups of 4 scores (of 1
    /// when `sk` is not a multiple of 4) in registers; with 0 a block per row, which with
    /// `staged` keeps the row in shared memory (Sk floats) and reads the scores once. Mask
    /// fields as in [`AttentionSplitParams`].
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
        pub staged: u32,
        pub rows: u32,
        pub per_lane: u32,
    }
}

crate::cuda_params! {
    /// `attention_convert`: `n[y]` elements of `src[y]` as f16 halves at `dst[y]`, for the
    /// operands y of the launch's grid (unused entries 0).
    pub struct AttentionConvertParams {
        pub src: [In; 3],
        pub dst: [u64; 3],
        pub n: [u32; 3],
    }
}

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![
        ParamsInfo::of::<AttentionSplitParams>(),
        ParamsInfo::of::<AttentionCombineParams>(),
        ParamsInfo::of::<AttentionSoftmaxParams>(),
        ParamsInfo::of::<AttentionConvertParams>(),
    ]
}

/// Most query rows per head that take the split path: a decoder step's handful, where two
/// products would mostly launch and idle. More go through the products.
pub const FEW_QUERIES: usize = 8;

/// Threads per block of `attention_split`: four warps, which score a chunk's keys together.
const SPLIT_THREADS: u32 = 128;

/// Keys per block of `attention_split` start at this many and double while the heads' chunks
/// number more than [`SPLIT_BLOCKS`], up to [`SPLIT_MAX_CHUNK`].
const SPLIT_MIN_CHUNK: usize = 32;
const SPLIT_MAX_CHUNK: usize = 4096;

/// (Head, chunk) pairs an `attention_split` call aims at: about two per SM of an H100 (132
/// SMs), so that a decoder step (6 heads over 448 or 1500 keys) runs 84 or 144 short blocks
/// at once. Each of a head's Sq queries takes its own blocks, so a prefill of Sq queries runs
/// Sq times as many of the same short blocks rather than Sq times longer ones.
const SPLIT_BLOCKS: usize = 264;

/// Threads per block of `attention_combine` and `attention_softmax`.
const ROW_THREADS: u32 = 128;

/// Longest softmax row a warp takes, in registers: 16 scores per lane. Longer rows take a
/// block: at 1500 keys (64 scores per lane, 147 registers) the warp path measured 92 us per
/// encoder call on an H100 against the block path's 72 us (Nsight Compute, warm caches).
const WARP_ROW_KEYS: usize = 16 * 32;

/// Shared memory a block may use without opting in (static and dynamic together).
const MAX_SHARED: usize = 48 * 1024;

/// Static shared memory of the kernels: 32 floats for block reductions.
const STATIC_SHARED: usize = 32 * 4;

/// Dynamic shared memory of `attention_split`: a float4 per thread for the value slices,
/// then the chunk's weights.
fn split_shared_bytes(chunk: usize) -> usize {
    4 * (4 * SPLIT_THREADS as usize + chunk)
}

fn unsupported(what: String) -> Error {
    Error::Unsupported { op: format!("attention {what}"), backend: "cuda".into() }
}

/// The mask fields the kernels share: mode, scores dims, mask strides, mask input.
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

/// The sizes both paths share.
#[derive(Clone, Copy)]
struct Sizes {
    /// Flattened batch (heads).
    batch: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dv: usize,
}

impl Sizes {
    fn rows(&self) -> usize {
        self.batch * self.sq
    }
}

/// The split path for at most [`FEW_QUERIES`] rows per head; the products around
/// `attention_softmax` otherwise (any size).
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
    let sizes = Sizes { batch: q.dims()[..r - 2].iter().product::<usize>(), sq, sk, d, dv };
    let mut scores = q.dims()[..r - 2].to_vec();
    scores.extend([sq, sk]);
    let scores = Shape(scores);
    // The kernels index with 32-bit arithmetic (and the rows are blocks of a grid's x).
    let mask_len = ctx.inputs.get(3).map_or(0, |m| m.ty.numel());
    let counts = [q.numel(), k.numel(), v.numel(), mask_len, ctx.output.ty.numel(), scores.numel()];
    if counts.iter().any(|&n| n > i32::MAX as usize) {
        return Err(unsupported(format!("on q {q}, k {k}, v {v} (sizes past 31 bits)")));
    }
    let mask = mask_fields(op, ctx, &scores)?;
    if let Some(chunk) = (sq <= FEW_QUERIES).then(|| split_chunk(sizes)).flatten() {
        return Ok(split(op, ctx, &mask, sizes, chunk));
    }
    products(op, ctx, &mask, sizes)
}

/// Keys per block of the split path: the fewest from [`SPLIT_MIN_CHUNK`] (doubling) that
/// keep the heads' chunks within [`SPLIT_BLOCKS`], if the splits fit a grid's y, the
/// combine's shared memory and 32-bit indices. The count is per head, not per query row:
/// growing the chunks with Sq would give a prefill's blocks Sq times the work of a step's.
fn split_chunk(s: Sizes) -> Option<usize> {
    let mut chunk = SPLIT_MIN_CHUNK;
    while chunk < s.sk && chunk < SPLIT_MAX_CHUNK && s.batch * s.sk.div_ceil(chunk) > SPLIT_BLOCKS {
        chunk *= 2;
    }
    let splits = s.sk.div_ceil(chunk);
    let fits = splits <= u16::MAX as usize
        && 4 * splits + STATIC_SHARED <= MAX_SHARED
        && s.rows() * splits * s.dv.max(2) <= i32::MAX as usize;
    fits.then_some(chunk)
}

/// The split path: `attention_split` over (row, chunk) blocks, then `attention_combine`.
fn split(op: &Attention, ctx: &LowerCtx, mask: &MaskFields, s: Sizes, chunk: usize) -> Vec<Launch> {
    let (rows, splits) = (s.rows(), s.sk.div_ceil(chunk));
    let stats = ctx.scratch.take(rows * splits * 2 * 4);
    let part = ctx.scratch.take(rows * splits * s.dv * 4);
    let params = AttentionSplitParams {
        q: ctx.input(0),
        k: ctx.input(1),
        v: ctx.input(2),
        mask: mask.input,
        stats,
        part,
        dims: mask.dims,
        mask_strides: mask.strides,
        rank: mask.rank,
        sq: s.sq as u32,
        sk: s.sk as u32,
        d: s.d as u32,
        dv: s.dv as u32,
        mode: mask.mode,
        chunk: chunk as u32,
        splits: splits as u32,
        scale: op.scale,
    };
    let scores = KernelLaunch::new("attention_split", &params)
        .grid(rows as u32, splits as u32, 1)
        .block(SPLIT_THREADS, 1, 1)
        .shared(split_shared_bytes(chunk) as u32);
    let params = AttentionCombineParams { stats, part, out: ctx.out(), splits: splits as u32, dv: s.dv as u32 };
    let combine = KernelLaunch::new("attention_combine", &params)
        .grid(rows as u32, 1, 1)
        .block(ROW_THREADS, 1, 1)
        .shared((4 * splits) as u32);
    vec![Launch::Kernel(scores), Launch::Kernel(combine)]
}

/// q, k and v as f16 halves for the tensor cores: those stored as f32 words converted into
/// scratch by one `attention_convert` launch (appended to `work`), f16 ones as stored.
fn halves(ctx: &LowerCtx, work: &mut Vec<Launch>) -> [In; 3] {
    let mut params = AttentionConvertParams::default();
    let mut count = 0;
    let mut out = [In::default(); 3];
    for (k, o) in out.iter_mut().enumerate() {
        let x = ctx.input(k);
        if x.kind == kind::F16 {
            *o = x;
            continue;
        }
        let len = ctx.inputs[k].ty.numel();
        let dst = ctx.scratch.take(len * 2);
        params.src[count] = x;
        params.dst[count] = dst;
        params.n[count] = len as u32;
        count += 1;
        *o = In { ptr: dst, kind: kind::F16, pad: 0 };
    }
    if count > 0 {
        // Four elements per thread.
        let most = params.n.iter().max().copied().unwrap_or(0) as usize;
        let blocks = most.div_ceil(4).div_ceil(BLOCK as usize);
        let launch = KernelLaunch::new("attention_convert", &params).grid(blocks as u32, count as u32, 1);
        work.push(Launch::Kernel(launch));
    }
    out
}

/// Groups per lane of `attention_softmax`'s warp path for rows of `sk` scores (groups of 4
/// when `sk` is a multiple of 4, else of 1): the least power of two that covers the row, or
/// 0 (the block path) for rows longer than [`WARP_ROW_KEYS`].
fn warp_groups(sk: usize) -> usize {
    let width = if sk.is_multiple_of(4) { 4 } else { 1 };
    if sk > WARP_ROW_KEYS {
        return 0;
    }
    sk.div_ceil(width * 32).next_power_of_two()
}

/// The product path: scores, softmax, weights times values.
fn products(op: &Attention, ctx: &LowerCtx, mask: &MaskFields, s: Sizes) -> Result<Vec<Launch>> {
    let Sizes { batch, sq, sk, d, dv } = s;
    let rows = s.rows();
    let scores = ctx.scratch.take(rows * sk * 4);
    let half = ctx.precision == Precision::F16;
    let mut work = Vec::new();
    let [q, k, v] = if half { halves(ctx, &mut work) } else { [ctx.input(0), ctx.input(1), ctx.input(2)] };
    work.extend(gemm(
        ctx,
        &RowGemm {
            a: q,
            lda: d,
            b: k,
            ldb: d,
            transpose_b: true,
            c: Out { ptr: scores, dtype: dtype_code(DType::F32), pad: 0 },
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
            bias_rows: false,
            gelu: false,
            residual: None,
        },
    )?);
    // f16 weights for the tensor cores need their own area; f32 ones replace the scores.
    let probs = if half { ctx.scratch.take(rows * sk * 2) } else { scores };
    let row_bytes = 4 * sk.next_multiple_of(4);
    let per_lane = warp_groups(sk);
    let staged = per_lane == 0 && row_bytes + STATIC_SHARED <= MAX_SHARED;
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
        staged: staged as u32,
        rows: rows as u32,
        per_lane: per_lane as u32,
    };
    // A warp per row, or a block per row.
    let blocks = if per_lane > 0 { rows.div_ceil(ROW_THREADS as usize / 32) } else { rows };
    let softmax = KernelLaunch::new("attention_softmax", &params)
        .grid(blocks as u32, 1, 1)
        .block(ROW_THREADS, 1, 1)
        .shared(if staged { row_bytes as u32 } else { 0 });
    work.push(Launch::Kernel(softmax));
    work.extend(gemm(
        ctx,
        &RowGemm {
            a: In { ptr: probs, kind: if half { kind::F16 } else { kind::F32 }, pad: 0 },
            lda: sk,
            b: v,
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
            bias_rows: false,
            gelu: false,
            residual: None,
        },
    )?);
    Ok(work)
}

#[cfg(test)]
mod tests {
    use susurrus_core::ir::TensorType;

    use super::*;
    use crate::lower::{CublasGemm, Operand, Scratch};
    use crate::params::KernelParams;

    use crate::lower::testing::ty;

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

    fn names(work: &[Launch]) -> Vec<&'static str> {
        work.iter()
            .map(|w| match w {
                Launch::Kernel(k) => k.name,
                Launch::Gemm(_) => "gemm",
            })
            .collect()
    }

    /// The split path's launches: `attention_split` and `attention_combine`.
    fn split_launches(work: &[Launch]) -> (&KernelLaunch, &KernelLaunch) {
        match work {
            [Launch::Kernel(s), Launch::Kernel(c)] if s.name == "attention_split" && c.name == "attention_combine" => {
                (s, c)
            }
            _ => panic!("{work:?}"),
        }
    }

    #[test]
    fn a_decoder_step_splits_the_keys_and_combines_the_chunks() {
        // 6 heads, 2 queries over 448 keys of 64, values of 33, a key-padding mask [6, 1, 448]:
        // its strides over the scores [6, 2, 448] are [448, 0, 1]. 12 rows of 14 chunks of 32
        // keys: 168 blocks, within the 264 aimed at.
        let op = Attention { scale: 0.125, mask: MaskKind::Additive };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let inputs = [f(&[6, 2, 64]), f(&[6, 448, 64]), f(&[6, 448, 33]), f(&[6, 1, 448])];
        let (work, scratch) = lower(&op, &inputs, Precision::F16).unwrap();
        let (k, c) = split_launches(&work);
        // Scratch: the stats [12, 14, 2] (1344 bytes), then at the next 256 the parts [12, 14, 33].
        let (stats, part) = (0x100000, 0x100000 + 1536);
        assert_eq!(scratch, 1536 + 12 * 14 * 33 * 4);
        assert_eq!(k.params_name, "AttentionSplitParams");
        assert_eq!((k.grid, k.block, k.shared_bytes), ([12, 14, 1], [128, 1, 1], 4 * (4 * 128 + 32)));
        let want = AttentionSplitParams {
            q: In { ptr: 0x1000, kind: kind::F32, pad: 0 },
            k: In { ptr: 0x2000, kind: kind::F32, pad: 0 },
            v: In { ptr: 0x3000, kind: kind::F32, pad: 0 },
            mask: In { ptr: 0x4000, kind: kind::F32, pad: 0 },
            stats,
            part,
            dims: [6, 2, 448, 1, 1, 1, 1, 1],
            mask_strides: [448, 0, 1, 0, 0, 0, 0, 0],
            rank: 3,
            sq: 2,
            sk: 448,
            d: 64,
            dv: 33,
            mode: 1,
            chunk: 32,
            splits: 14,
            scale: 0.125,
        };
        assert_eq!(k.params, want.to_bytes());
        assert_eq!(c.params_name, "AttentionCombineParams");
        assert_eq!((c.grid, c.block, c.shared_bytes), ([12, 1, 1], [128, 1, 1], 14 * 4));
        let want =
            AttentionCombineParams { stats, part, out: Out { ptr: 0x8000, dtype: 0, pad: 0 }, splits: 14, dv: 33 };
        assert_eq!(c.params, want.to_bytes());
    }

    /// (grid, chunk) of the split path for `heads` single queries over `sk` keys of 64.
    fn split_shape(heads: usize, sk: usize) -> ([u32; 3], u32) {
        let op = Attention { scale: 0.125, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let (work, _) =
            lower(&op, &[f(&[heads, 1, 64]), f(&[heads, sk, 64]), f(&[heads, sk, 64])], Precision::F16).unwrap();
        let (k, _) = split_launches(&work);
        (k.grid, words(&k.params)[42])
    }

    #[test]
    fn chunks_grow_until_the_blocks_are_about_two_per_sm() {
        // Whisper's self-attention (448 cached keys) and cross-attention (1500 audio frames).
        assert_eq!(split_shape(6, 448), ([6, 14, 1], 32));
        assert_eq!(split_shape(6, 1500), ([6, 24, 1], 64));
        // One query over 12 000 keys: 188 chunks of 64; many heads: a chunk holds every key.
        assert_eq!(split_shape(1, 12_000), ([1, 188, 1], 64));
        assert_eq!(split_shape(512, 448), ([512, 1, 1], 512));
        // The largest chunks: 8 rows over 2^20 keys take 256 chunks of 4096.
        assert_eq!(split_shape(8, 1 << 20), ([8, 256, 1], 4096));
    }

    #[test]
    fn a_prefill_takes_the_chunks_of_a_step_for_each_query() {
        // 4 queries of 6 heads: the chunks of a single query (64 over 1500 keys, 32 over
        // 448), each query row with its own blocks.
        let op = Attention { scale: 0.125, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        for (sk, grid, chunk) in [(1500, [24, 24, 1], 64), (448, [24, 14, 1], 32)] {
            let inputs = [f(&[6, 4, 64]), f(&[6, sk, 64]), f(&[6, sk, 64])];
            let (work, _) = lower(&op, &inputs, Precision::F16).unwrap();
            let (k, c) = split_launches(&work);
            assert_eq!((k.grid, words(&k.params)[42]), (grid, chunk));
            assert_eq!((c.grid, c.shared_bytes), ([24, 1, 1], 4 * grid[1]));
        }
    }

    #[test]
    fn causal_rows_carry_the_mode_and_no_mask() {
        let op = Attention { scale: 1.0, mask: MaskKind::Causal };
        let f = |dims: &[usize]| ty(DType::F16, dims);
        let (work, _) = lower(&op, &[f(&[2, 3, 3, 8]), f(&[2, 3, 5, 8]), f(&[2, 3, 5, 8])], Precision::F32).unwrap();
        let (k, c) = split_launches(&work);
        assert_eq!(k.grid, [18, 1, 1]);
        let w = words(&k.params);
        // The mask In at words 12..16 is empty; dims [2, 3, 3, 5]; rank 4, sq 3, sk 5, d 8,
        // dv 8, mode 2, one chunk of 32, scale 1.
        assert_eq!(&w[12..16], &[0, 0, 0, 0]);
        assert_eq!(&w[20..24], &[2, 3, 3, 5]);
        assert_eq!(&w[36..45], &[4, 3, 5, 8, 8, 2, 32, 1, 1.0f32.to_bits()]);
        // The combine writes f16 (dtype code 1 of its Out at words 4..8).
        assert_eq!(words(&c.params)[6], 1);
    }

    #[test]
    fn more_than_a_few_queries_take_the_products() {
        let op = Attention { scale: 1.0, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let (work, _) = lower(&op, &[f(&[9, 64]), f(&[20, 64]), f(&[20, 64])], Precision::F32).unwrap();
        assert_eq!(names(&work), ["gemm", "attention_softmax", "gemm"]);
        let (work, _) = lower(&op, &[f(&[8, 64]), f(&[20, 64]), f(&[20, 64])], Precision::F32).unwrap();
        split_launches(&work);
    }

    /// The encoder's self-attention in f16 precision (f16 activations, stored as f32 words):
    /// q, k and v rounded into scratch by one launch, scores f32, weights f16, and the output
    /// rounded to f16 by the epilogue.
    #[test]
    fn the_encoder_runs_two_products_around_the_softmax() {
        let op = Attention { scale: 0.125, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F16, dims);
        let (h, s, d) = (6, 1500, 64);
        let inputs = [f(&[1, h, s, d]), f(&[1, h, s, d]), f(&[1, h, s, d])];
        let (work, scratch) = lower(&op, &inputs, Precision::F16).unwrap();
        assert_eq!(names(&work), ["attention_convert", "gemm", "attention_softmax", "gemm", "matmul_epilogue"]);
        // Scratch, each area 256-aligned: scores (f32), q, k and v as f16, weights (f16).
        let (scores, qkv16, probs) = (h * s * s * 4, h * s * d * 2, h * s * s * 2);
        let at = |x: usize| x.next_multiple_of(256) as u64;
        let base = 0x100000;
        let (q16, k16, v16) = (base + at(scores), base + at(scores) + at(qkv16), base + at(scores) + 2 * at(qkv16));
        let probs_at = base + at(scores) + 3 * at(qkv16);
        assert_eq!(scratch, probs_at - base + probs as u64);
        let Launch::Kernel(k) = &work[0] else { panic!() };
        // 576 000 elements each, four per thread: 563 blocks of 256 for each of the three.
        assert_eq!((k.grid, k.block, k.shared_bytes), ([563, 3, 1], [256, 1, 1], 0));
        let f32_in = |ptr| In { ptr, kind: kind::F32, pad: 0 };
        let convert = AttentionConvertParams {
            src: [f32_in(0x1000), f32_in(0x2000), f32_in(0x3000)],
            dst: [q16, k16, v16],
            n: [(h * s * d) as u32; 3],
        };
        assert_eq!(k.params, convert.to_bytes());
        let Launch::Gemm(g) = &work[1] else { panic!() };
        let want = CublasGemm {
            trans_a: true,
            trans_b: false,
            m: s as i32,
            n: s as i32,
            k: d as i32,
            alpha: 0.125,
            beta: 0.0,
            a: k16,
            lda: d as i32,
            stride_a: (s * d) as i64,
            b: q16,
            ldb: d as i32,
            stride_b: (s * d) as i64,
            c: base,
            ldc: s as i32,
            stride_c: (s * s) as i64,
            batch: h as i32,
            f16_inputs: true,
        };
        assert_eq!(g, &want);
        // A block per row of 1500 scores, staged in shared memory.
        let Launch::Kernel(k) = &work[2] else { panic!() };
        assert_eq!((k.grid, k.block, k.shared_bytes), ([(h * s) as u32, 1, 1], [128, 1, 1], 6000));
        let softmax = AttentionSoftmaxParams {
            scores: base,
            probs: probs_at,
            mask: In::default(),
            dims: [1, 6, 1500, 1500, 1, 1, 1, 1],
            mask_strides: [0; 8],
            rank: 4,
            sq: 1500,
            sk: 1500,
            mode: 0,
            half: 1,
            staged: 1,
            rows: (h * s) as u32,
            per_lane: 0,
        };
        assert_eq!(k.params, softmax.to_bytes());
        // The weights and the values are used as stored (no conversion in front of the product).
        let Launch::Gemm(g) = &work[3] else { panic!() };
        assert_eq!((g.m, g.n, g.k, g.lda, g.ldb, g.ldc), (64, 1500, 1500, 64, 1500, 64));
        assert_eq!((g.a, g.b, g.c, g.f16_inputs), (v16, probs_at, 0x8000, true));
        assert_eq!(
            (g.stride_a, g.stride_b, g.stride_c, g.batch, g.trans_a),
            ((s * d) as i64, (s * s) as i64, (s * d) as i64, 6, false)
        );
    }

    #[test]
    fn f16_operands_are_not_converted() {
        // k is an f16 constant (halves as stored): only q and v go through the conversion.
        let op = Attention { scale: 1.0, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let mut inputs: Vec<Operand> = [f(&[2, 16, 4]), f(&[2, 8, 4]), f(&[2, 8, 4])]
            .into_iter()
            .enumerate()
            .map(|(i, t)| Operand::arena(0x1000 * (i as u64 + 1), t))
            .collect();
        inputs[1] = Operand { ptr: 0x2000, kind: kind::F16, ty: ty(DType::F16, &[2, 8, 4]) };
        let output = Operand::arena(0x8000, f(&[2, 16, 4]));
        let scratch = Scratch::new(0x100000);
        let ctx =
            LowerCtx { inputs: &inputs, output: &output, scalars: 0, precision: Precision::F16, scratch: &scratch };
        let work = attention(&op, &ctx).unwrap();
        assert_eq!(names(&work), ["attention_convert", "gemm", "attention_softmax", "gemm"]);
        let Launch::Kernel(k) = &work[0] else { panic!() };
        assert_eq!(k.grid, [1, 2, 1]);
        // Scores [2, 16, 8] f32 (1024 bytes), then q and v as f16.
        let (q16, v16) = (0x100000 + 1024, 0x100000 + 1280);
        let w = words(&k.params);
        assert_eq!(&w[0..8], &[0x1000, 0, kind::F32, 0, 0x3000, 0, kind::F32, 0]);
        assert_eq!(&w[12..16], &[q16 as u32, 0, v16 as u32, 0]);
        assert_eq!(&w[18..21], &[128, 64, 0]);
        let Launch::Gemm(g) = &work[1] else { panic!() };
        assert_eq!((g.a, g.b), (0x2000, q16));
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
        // rank 4, sq 9, sk 5, additive, f32 weights, not staged, 54 rows of a warp each
        // (5 single scores: one per lane), four per block.
        assert_eq!(&w[24..32], &[4, 9, 5, 1, 0, 0, 54, 1]);
        assert_eq!((k.grid, k.block, k.shared_bytes), ([14, 1, 1], [128, 1, 1], 0));
        assert_eq!((g2.m, g2.n, g2.k, g2.alpha, g2.trans_a, g2.f16_inputs), (2, 9, 5, 1.0, false, false));
        assert_eq!((g2.a, g2.b, g2.c, g2.stride_a, g2.stride_b, g2.stride_c), (0x3000, 0x100000, 0x8000, 10, 45, 18));
    }

    #[test]
    fn rows_of_up_to_512_keys_take_a_warp() {
        // Groups of 4 when Sk is a multiple of 4 (up to 4 per lane), else single scores (up
        // to 16 per lane); longer rows take a block.
        let cases = [(4, 1), (128, 1), (132, 2), (448, 4), (512, 4), (5, 1), (33, 2), (511, 16)];
        for (sk, groups) in cases.into_iter().chain([(513, 0), (1500, 0), (2049, 0), (2052, 0)]) {
            assert_eq!(warp_groups(sk), groups, "sk {sk}");
        }
        let op = Attention { scale: 1.0, mask: MaskKind::Causal };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let (work, _) = lower(&op, &[f(&[10, 8]), f(&[2052, 8]), f(&[2052, 8])], Precision::F32).unwrap();
        let Launch::Kernel(k) = &work[1] else { panic!("{work:?}") };
        // A block per row, the row staged (8208 bytes).
        assert_eq!((k.grid, k.shared_bytes, &words(&k.params)[29..32]), ([10, 1, 1], 8208, &[1, 10, 0][..]));
    }

    #[test]
    fn rows_past_the_shared_memory_are_read_again() {
        // Ten queries over 12 289 keys: 49 156 bytes of row exceed the shared memory.
        let op = Attention { scale: 1.0, mask: MaskKind::None };
        let f = |dims: &[usize]| ty(DType::F32, dims);
        let (work, _) = lower(&op, &[f(&[10, 8]), f(&[12_289, 8]), f(&[12_289, 8])], Precision::F32).unwrap();
        let Launch::Kernel(k) = &work[1] else { panic!("{work:?}") };
        assert_eq!((k.name, k.shared_bytes, words(&k.params)[29]), ("attention_softmax", 0, 0));
        let (work, _) = lower(&op, &[f(&[10, 8]), f(&[12_000, 8]), f(&[12_000, 8])], Precision::F32).unwrap();
        let Launch::Kernel(k) = &work[1] else { panic!("{work:?}") };
        assert_eq!((k.shared_bytes, words(&k.params)[29]), (48_000, 1));
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
