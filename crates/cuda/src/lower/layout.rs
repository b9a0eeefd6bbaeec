//! Data movement: permute, slice, concat, gather and KV-cache writes (kernels/layout.cu).
//! Every kernel copies 32-bit words (`ldw`/`stw`), so each dtype arrives bit for bit and
//! integers never pass through f32; index arithmetic is 32-bit. Where every operand is
//! 32-bit words at 16-byte aligned addresses (arena values are) and the copy's sizes and
//! offsets are multiples of 4 words, a thread moves 4 words at once ([`Vec4`]).

use susurrus_core::exec::index::collapse;
use susurrus_core::ops::{Concat, Gather, KvWrite, Permute, Slice};
use susurrus_core::{DType, Error, Result};

use super::{KernelLaunch, Launch, LowerCtx};
use crate::params::{In, Out, ParamsInfo, dims8, kind};

crate::cuda_params! {
    /// The output's `rank` dimensions (outermost first) and, for each, the input stride it
    /// walks; `n` units of `vec` words. `permute_transpose` takes `[batch, a, b]`.
    pub struct PermuteParams { pub x: In, pub out: Out, pub n: u32, pub rank: u32, pub vec: u32, pub dims: [u32; 8], pub strides: [u32; 8] }
}

crate::cuda_params! {
    /// A slice as units (of `vec` words) of `[outer, dim, inner]` blocks: `block` units kept
    /// out of every `in_block`, from unit `start` on.
    pub struct SliceParams { pub x: In, pub out: Out, pub n: u32, pub block: u32, pub in_block: u32, pub start: u32, pub vec: u32 }
}

crate::cuda_params! {
    /// One input of a concat: its `n` units (of `vec` words) are blocks of `part` units, each
    /// copied `at` units into the output's blocks of `block` units.
    pub struct ConcatParams { pub x: In, pub out: Out, pub n: u32, pub part: u32, pub block: u32, pub at: u32, pub vec: u32 }
}

crate::cuda_params! {
    /// Output words, table rows and words per row; the ids' kind says how to read them. A q8
    /// table (kind Q8) is read as stored: its row scales at `scales`, the rows dequantized.
    pub struct GatherParams { pub table: In, pub ids: In, pub out: Out, pub scales: u64, pub n: u32, pub rows: u32, pub row_len: u32 }
}

crate::cuda_params! {
    /// The value (`n` units of `vec` words, `[outer, len, inner]`) goes into the buffer
    /// (`[outer, cap, inner]`) at the offset held by runtime scalar `scalar` of the array at
    /// `scalars` ([`NO_OFFSET`]: offset 0).
    pub struct KvWriteParams { pub value: In, pub out: Out, pub scalars: u64, pub n: u32, pub len: u32, pub cap: u32, pub inner: u32, pub scalar: u32, pub vec: u32 }
}

/// The `scalar` of a write without an offset scalar (a whole-state write).
pub const NO_OFFSET: u32 = u32::MAX;

/// The shortest sides of a transpose given tiles: below them most of a 32x32 tile idles, and
/// one thread per element reads few enough rows anyway.
pub const TILE_MIN: usize = 16;

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![
        ParamsInfo::of::<PermuteParams>(),
        ParamsInfo::of::<SliceParams>(),
        ParamsInfo::of::<ConcatParams>(),
        ParamsInfo::of::<GatherParams>(),
        ParamsInfo::of::<KvWriteParams>(),
    ]
}

/// `n` as a kernel's u32 count: the kernels index words with u32 sizes.
fn count(n: usize, op: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Unsupported {
        op: format!("{op} of {n} elements"),
        backend: "cuda (at most 2^32 - 1)".into(),
    })
}

/// How many words a thread of a copy moves: 4 (a 16-byte load and store) or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vec4(bool);

impl Vec4 {
    /// 4 words when the inputs are 32-bit words (not native halves, which are widened one by
    /// one), every address is 16-byte aligned and every size and offset of the copy is a
    /// multiple of 4 words.
    pub fn new(inputs: &[In], out: Out, sizes: &[usize]) -> Self {
        let words = inputs.iter().all(|x| x.kind != kind::F16 && x.ptr.is_multiple_of(16));
        Vec4(words && out.ptr.is_multiple_of(16) && sizes.iter().all(|s| s.is_multiple_of(4)))
    }

    /// The `vec` parameter: words per unit.
    pub fn words(self) -> u32 {
        if self.0 { 4 } else { 1 }
    }

    /// `words` words in units.
    pub fn units(self, words: usize) -> usize {
        words / self.words() as usize
    }
}

/// `[batch, a, b]` when the collapsed permute swaps the last two axes of a contiguous
/// `[batch, b, a]` input (output strides `[a * b, 1, a]`, or `[1, a]` without a batch), each
/// side at least [`TILE_MIN`] and the grid within the hardware's limits.
fn transpose(dims: &[usize], strides: &[usize]) -> Option<[usize; 3]> {
    let shape = match (dims, strides) {
        (&[a, b], &[1, sb]) if sb == a => [1, a, b],
        (&[batch, a, b], &[s, 1, sb]) if sb == a && s == a * b => [batch, a, b],
        _ => return None,
    };
    let [batch, a, b] = shape;
    (a.min(b) >= TILE_MIN && batch <= 65535 && a.div_ceil(32) <= 65535).then_some(shape)
}

/// Three kernels: a transpose of the last two axes goes through shared-memory tiles; when the
/// innermost axis stays innermost (attention heads: `[t, heads, 64]` to `[heads, t, 64]`) its
/// contiguous runs are copied 4 words per thread where [`Vec4`] allows; otherwise one thread
/// per element finds its input word through the strides.
pub fn permute(op: &Permute, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let x = &ctx.inputs[0].ty.shape;
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    count(n, "permute")?;
    let in_strides = x.strides();
    let dims: Vec<usize> = op.perm.iter().map(|&p| x.dims()[p]).collect();
    let strides: Vec<usize> = op.perm.iter().map(|&p| in_strides[p]).collect();
    let (mut dims, mut strides) = collapse(&dims, &strides);
    if dims.len() > 8 {
        return Err(Error::Unsupported {
            op: format!("permute of {} axes that cannot be merged", dims.len()),
            backend: "cuda (at most 8)".into(),
        });
    }
    if let Some([batch, a, b]) = transpose(&dims, &strides) {
        let params = PermuteParams {
            x: ctx.input(0),
            out: ctx.out(),
            n: n as u32,
            rank: 3,
            vec: 1,
            dims: dims8(&[batch, a, b], 1),
            strides: dims8(&[a * b, 1, a], 0),
        };
        let launch = KernelLaunch::new("permute_transpose", &params)
            .grid(b.div_ceil(32) as u32, a.div_ceil(32) as u32, batch as u32)
            .block(32, 8, 1);
        return Ok(vec![Launch::Kernel(launch)]);
    }
    // The innermost axis contiguous in the input: 4-word units, if every other axis' stride
    // and the innermost size are multiples of 4 (a copy collapses to one axis of stride 1).
    let (last, others) = strides.split_last().map_or((0, &[][..]), |(l, o)| (*l, o));
    let mut sizes = others.to_vec();
    sizes.push(dims.last().copied().unwrap_or(0));
    let vec = if last == 1 { Vec4::new(&[ctx.input(0)], ctx.out(), &sizes) } else { Vec4(false) };
    if let (Some(d), true) = (dims.last_mut(), vec.0) {
        *d /= 4;
        for s in strides.iter_mut().rev().skip(1) {
            *s /= 4;
        }
    }
    let units = vec.units(n);
    let params = PermuteParams {
        x: ctx.input(0),
        out: ctx.out(),
        n: units as u32,
        rank: dims.len() as u32,
        vec: vec.words(),
        dims: dims8(&dims, 1),
        strides: dims8(&strides, 0),
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new("permute_copy", &params).threads(units))])
}

pub fn slice(op: &Slice, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let dims = ctx.inputs[0].ty.shape.dims();
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    count(ctx.inputs[0].ty.numel(), "slice")?;
    let inner = dims[op.axis + 1..].iter().product::<usize>();
    let (block, in_block, start) = ((op.end - op.start) * inner, dims[op.axis] * inner, op.start * inner);
    let vec = Vec4::new(&[ctx.input(0)], ctx.out(), &[block, in_block, start]);
    let units = vec.units(n);
    let params = SliceParams {
        x: ctx.input(0),
        out: ctx.out(),
        n: units as u32,
        block: vec.units(block) as u32,
        in_block: vec.units(in_block) as u32,
        start: vec.units(start) as u32,
        vec: vec.words(),
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new("slice_copy", &params).threads(units))])
}

/// One launch per non-empty input, each copying its blocks into place: any number of inputs,
/// and every read and write is coalesced.
pub fn concat(op: &Concat, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let dims = ctx.output.ty.shape.dims();
    if ctx.output.ty.numel() == 0 {
        return Ok(Vec::new());
    }
    count(ctx.output.ty.numel(), "concat")?;
    let inner = dims[op.axis + 1..].iter().product::<usize>();
    let block = dims[op.axis] * inner;
    let mut at = 0;
    let mut launches = Vec::new();
    for (k, input) in ctx.inputs.iter().enumerate() {
        let part = input.ty.shape.dims()[op.axis] * inner;
        let n = input.ty.numel();
        if n > 0 {
            let vec = Vec4::new(&[ctx.input(k)], ctx.out(), &[part, block, at]);
            let units = vec.units(n);
            let params = ConcatParams {
                x: ctx.input(k),
                out: ctx.out(),
                n: units as u32,
                part: vec.units(part) as u32,
                block: vec.units(block) as u32,
                at: vec.units(at) as u32,
                vec: vec.words(),
            };
            launches.push(Launch::Kernel(KernelLaunch::new("concat_part", &params).threads(units)));
        }
        at += part;
    }
    Ok(launches)
}

/// Ids outside `0..rows` are clamped to the nearest row, as the wgpu kernel does: the
/// reference fails such a run, but a kernel cannot, and a clamped read stays in bounds. A
/// table with no rows has nothing to clamp to, so the plan is rejected here.
pub fn gather(_op: &Gather, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let table = &ctx.inputs[0].ty;
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let rows = table.shape.dims()[0];
    if rows == 0 {
        return Err(Error::Unsupported { op: format!("gather from the empty table {table}"), backend: "cuda".into() });
    }
    let q8 = ctx.inputs[0].ty.dtype == DType::Q8;
    let scales = if q8 { ctx.inputs[0].ptr + table.numel().div_ceil(4) as u64 * 4 } else { 0 };
    let params = GatherParams {
        table: ctx.input(0),
        ids: ctx.input(1),
        out: ctx.out(),
        scales,
        n: count(n, "gather")?,
        rows: count(rows, "gather")?,
        row_len: count(table.shape.dims()[1..].iter().product::<usize>(), "gather")?,
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new("gather_rows", &params).threads(n))])
}

/// One thread per element (or 4 words, see [`Vec4`]) of the value; the offset is read on the
/// device at run time, so a recorded graph replays with new offsets. The planner gives the
/// buffer (input 0) the output's storage, so only the value's rows are written; should the
/// two differ, the buffer is copied over first. A write past the capacity (a run-time error
/// in the reference) writes nothing, as on wgpu: a kernel cannot fail, and the buffer stays
/// in bounds.
pub fn kv_write(op: &KvWrite, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let value = &ctx.inputs[1].ty;
    let dims = ctx.output.ty.shape.dims();
    let mut launches = Vec::new();
    let total = ctx.output.ty.numel();
    count(total, "kv_write")?;
    if ctx.inputs[0].ptr != ctx.output.ptr && total > 0 {
        let vec = Vec4::new(&[ctx.input(0)], ctx.out(), &[total]);
        let units = vec.units(total) as u32;
        let copy = SliceParams {
            x: ctx.input(0),
            out: ctx.out(),
            n: units,
            block: units,
            in_block: units,
            start: 0,
            vec: vec.words(),
        };
        launches.push(Launch::Kernel(KernelLaunch::new("slice_copy", &copy).threads(units as usize)));
    }
    let n = value.numel();
    if n == 0 {
        return Ok(launches);
    }
    let inner = dims[op.axis + 1..].iter().product::<usize>();
    let vec = Vec4::new(&[ctx.input(1)], ctx.out(), &[inner]);
    let units = vec.units(n);
    let params = KvWriteParams {
        value: ctx.input(1),
        out: ctx.out(),
        scalars: ctx.scalars,
        n: units as u32,
        len: count(value.shape.dims()[op.axis], "kv_write")?,
        cap: count(dims[op.axis], "kv_write")?,
        inner: vec.units(inner) as u32,
        scalar: op.offset.map_or(NO_OFFSET, |s| s.0),
        vec: vec.words(),
    };
    launches.push(Launch::Kernel(KernelLaunch::new("kv_write_rows", &params).threads(units)));
    Ok(launches)
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::{ScalarId, TensorType};

    use super::super::Operand;
    use super::*;

    use crate::lower::testing::ty;

    /// Lowers with inputs at 0x1000, 0x2000, ... and the output at 0x8000.
    fn lower_with(
        inputs: &[Operand],
        out: TensorType,
        f: impl Fn(&LowerCtx) -> Result<Vec<Launch>>,
    ) -> Result<Vec<Launch>> {
        crate::lower::testing::lower_at(inputs, 0x8000, out, 0, f)
    }

    fn arena(k: u64, t: TensorType) -> Operand {
        Operand::arena(0x1000 * (k + 1), t)
    }

    fn in_at(ptr: u64, kind: u32) -> In {
        In { ptr, kind, pad: 0 }
    }

    fn out_at(ptr: u64, dtype: u32) -> Out {
        Out { ptr, dtype, pad: 0 }
    }

    fn permute_of(x: Operand, perm: &[usize]) -> Vec<Launch> {
        let dims: Vec<usize> = perm.iter().map(|&p| x.ty.shape.dims()[p]).collect();
        let out = ty(x.ty.dtype, &dims);
        lower_with(&[x], out, |c| permute(&Permute { perm: perm.to_vec() }, c)).unwrap()
    }

    #[test]
    fn permute_collapses_axes_and_passes_strides() {
        // [2,3,4] -> perm [2,0,1]: output [4,2,3] walks strides [1,12,4]; the last two merge.
        // A transpose, but of sides too short for tiles; the innermost stride is not 1.
        let got = permute_of(arena(0, ty(DType::F16, &[2, 3, 4])), &[2, 0, 1]);
        let want = PermuteParams {
            x: in_at(0x1000, kind::F32),
            out: out_at(0x8000, 1),
            n: 24,
            rank: 2,
            vec: 1,
            dims: [4, 6, 1, 1, 1, 1, 1, 1],
            strides: [1, 4, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("permute_copy", &want).threads(24))]);
    }

    #[test]
    fn permute_keeping_the_innermost_axis_moves_four_words_per_thread() {
        // Attention heads [1500,6,64] -> [6,1500,64]: strides [64,384,1] in words, 16-byte
        // units of [6,1500,16] with strides [16,96,1].
        let got = permute_of(arena(0, ty(DType::F32, &[1500, 6, 64])), &[1, 0, 2]);
        let want = PermuteParams {
            x: in_at(0x1000, kind::F32),
            out: out_at(0x8000, 0),
            n: 144_000,
            rank: 3,
            vec: 4,
            dims: [6, 1500, 16, 1, 1, 1, 1, 1],
            strides: [16, 96, 1, 0, 0, 0, 0, 0],
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("permute_copy", &want).threads(144_000))]);
        // A permute that only moves size-1 axes is a copy: one axis of stride 1.
        let got = permute_of(arena(0, ty(DType::I32, &[1, 6, 64])), &[1, 0, 2]);
        let want = PermuteParams {
            x: in_at(0x1000, kind::I32),
            out: out_at(0x8000, 2),
            n: 96,
            rank: 1,
            vec: 4,
            dims: [96, 1, 1, 1, 1, 1, 1, 1],
            strides: [1, 0, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("permute_copy", &want).threads(96))]);
    }

    #[test]
    fn permute_moves_words_one_by_one_unless_everything_is_in_fours() {
        let words = |x: Operand, perm: &[usize]| match &permute_of(x, perm)[..] {
            [Launch::Kernel(k)] => {
                (k.name, u32::from_le_bytes([k.params[40], k.params[41], k.params[42], k.params[43]]))
            }
            other => panic!("{other:?}"),
        };
        // Heads of 6 words: runs of 6 are not whole 16-byte units.
        assert_eq!(words(arena(0, ty(DType::F32, &[5, 3, 6])), &[1, 0, 2]), ("permute_copy", 1));
        // Native f16 weights are widened one by one.
        let halves = Operand { ptr: 0x1000, kind: kind::F16, ty: ty(DType::F16, &[5, 3, 8]) };
        assert_eq!(words(halves, &[1, 0, 2]), ("permute_copy", 1));
        // An address that is not 16-byte aligned.
        assert_eq!(words(Operand::arena(0x1004, ty(DType::F32, &[5, 3, 8])), &[1, 0, 2]), ("permute_copy", 1));
        // All in fours.
        assert_eq!(words(arena(0, ty(DType::F32, &[5, 3, 8])), &[1, 0, 2]), ("permute_copy", 4));
    }

    #[test]
    fn permute_transposing_the_last_two_axes_goes_through_tiles() {
        // The encoder's [384,1500] -> [1500,384]: output strides [1,1500], a = 1500, b = 384;
        // tiles of 32x32: 12 along b, 47 along a.
        let got = permute_of(arena(0, ty(DType::F32, &[384, 1500])), &[1, 0]);
        let want = PermuteParams {
            x: in_at(0x1000, kind::F32),
            out: out_at(0x8000, 0),
            n: 576_000,
            rank: 3,
            vec: 1,
            dims: [1, 1500, 384, 1, 1, 1, 1, 1],
            strides: [576_000, 1, 1500, 0, 0, 0, 0, 0],
        };
        let launch = KernelLaunch::new("permute_transpose", &want).grid(12, 47, 1).block(32, 8, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
        // A batch of 2: [2,20,30] -> [2,30,20], a = 30, b = 20.
        let got = permute_of(arena(0, ty(DType::F16, &[2, 20, 30])), &[0, 2, 1]);
        let want = PermuteParams {
            out: out_at(0x8000, 1),
            n: 1200,
            dims: [2, 30, 20, 1, 1, 1, 1, 1],
            strides: [600, 1, 30, 0, 0, 0, 0, 0],
            ..want
        };
        let launch = KernelLaunch::new("permute_transpose", &want).grid(1, 1, 2).block(32, 8, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
        // Three axes reversed (output strides [1,30,60]): one thread per word.
        let got = permute_of(arena(0, ty(DType::F32, &[20, 2, 30])), &[2, 1, 0]);
        assert!(matches!(&got[..], [Launch::Kernel(k)] if k.name == "permute_copy"));
    }

    #[test]
    fn permute_rejects_more_than_eight_unmergeable_axes() {
        let x = arena(0, ty(DType::F32, &[2; 9]));
        let op = Permute { perm: (0..9).rev().collect() };
        let err = lower_with(std::slice::from_ref(&x), ty(DType::F32, &[2; 9]), |c| permute(&op, c)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "permute of 9 axes that cannot be merged is not supported by the cuda (at most 8) backend"
        );
        // Moving the last of nine axes to the front is a 2-D transpose.
        let op = Permute { perm: vec![8, 0, 1, 2, 3, 4, 5, 6, 7] };
        assert!(lower_with(&[x], ty(DType::F32, &[2; 9]), |c| permute(&op, c)).is_ok());
    }

    #[test]
    fn slice_views_blocks_of_words() {
        // [2,5,3] sliced 1..4 on axis 1: blocks of 3*3 words out of 5*3, from word 3.
        let x = arena(0, ty(DType::I32, &[2, 5, 3]));
        let op = Slice { axis: 1, start: 1, end: 4 };
        let got = lower_with(&[x], ty(DType::I32, &[2, 3, 3]), |c| slice(&op, c)).unwrap();
        let want = SliceParams {
            x: in_at(0x1000, kind::I32),
            out: out_at(0x8000, 2),
            n: 18,
            block: 9,
            in_block: 15,
            start: 3,
            vec: 1,
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("slice_copy", &want).threads(18))]);
        // An empty slice launches nothing.
        let x = arena(0, ty(DType::I32, &[2, 5, 3]));
        let op = Slice { axis: 1, start: 2, end: 2 };
        assert_eq!(lower_with(&[x], ty(DType::I32, &[2, 0, 3]), |c| slice(&op, c)).unwrap(), vec![]);
    }

    #[test]
    fn slices_in_fours_move_four_words_per_thread() {
        // The timestamp logits 50364..51864 of [1,51864]: 375 units of 4 words from unit 12591.
        let x = arena(0, ty(DType::F32, &[1, 51864]));
        let op = Slice { axis: 1, start: 50364, end: 51864 };
        let got = lower_with(&[x], ty(DType::F32, &[1, 1500]), |c| slice(&op, c)).unwrap();
        let want = SliceParams {
            x: in_at(0x1000, kind::F32),
            out: out_at(0x8000, 0),
            n: 375,
            block: 375,
            in_block: 12966,
            start: 12591,
            vec: 4,
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("slice_copy", &want).threads(375))]);
    }

    #[test]
    fn concat_launches_one_copy_per_nonempty_input() {
        // [2,1,4] ++ [2,0,4] ++ [2,3,4] on axis 1 -> [2,4,4]: blocks of 16 words; the parts
        // are 4 and 12 words, at 0 and 4. The first moves units of 4 words; the last is of
        // native halves, moved word by word.
        let a = arena(0, ty(DType::U32, &[2, 1, 4]));
        let b = arena(1, ty(DType::U32, &[2, 0, 4]));
        let c = Operand { ptr: 0x3000, kind: kind::F16, ty: ty(DType::U32, &[2, 3, 4]) };
        let op = Concat { axis: 1 };
        let got = lower_with(&[a, b, c], ty(DType::U32, &[2, 4, 4]), |ctx| concat(&op, ctx)).unwrap();
        let first = ConcatParams {
            x: in_at(0x1000, kind::U32),
            out: out_at(0x8000, 3),
            n: 2,
            part: 1,
            block: 4,
            at: 0,
            vec: 4,
        };
        let last = ConcatParams {
            x: in_at(0x3000, kind::F16),
            out: out_at(0x8000, 3),
            n: 24,
            part: 12,
            block: 16,
            at: 4,
            vec: 1,
        };
        assert_eq!(
            got,
            vec![
                Launch::Kernel(KernelLaunch::new("concat_part", &first).threads(2)),
                Launch::Kernel(KernelLaunch::new("concat_part", &last).threads(24)),
            ]
        );
    }

    #[test]
    fn gather_passes_rows_and_rejects_an_empty_table() {
        // Table [5,2,3] (f16 weights), ids [4] -> [4,2,3]: 24 words, rows of 6.
        let table = Operand { ptr: 0x1000, kind: kind::F16, ty: ty(DType::F16, &[5, 2, 3]) };
        let ids = arena(1, ty(DType::I32, &[4]));
        let got = lower_with(&[table, ids.clone()], ty(DType::F16, &[4, 2, 3]), |c| gather(&Gather, c)).unwrap();
        let want = GatherParams {
            table: in_at(0x1000, kind::F16),
            ids: in_at(0x2000, kind::I32),
            out: out_at(0x8000, 1),
            scales: 0,
            n: 24,
            rows: 5,
            row_len: 6,
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("gather_rows", &want).threads(24))]);
        // A q8 table [5, 6] is read as stored: its 30 values take 8 words, then the scales.
        let q8 = Operand { ptr: 0x1000, kind: kind::Q8, ty: ty(DType::Q8, &[5, 6]) };
        let got = lower_with(&[q8, ids.clone()], ty(DType::F32, &[4, 6]), |c| gather(&Gather, c)).unwrap();
        let want = GatherParams {
            table: in_at(0x1000, kind::Q8),
            ids: in_at(0x2000, kind::I32),
            out: out_at(0x8000, 0),
            scales: 0x1000 + 32,
            n: 24,
            rows: 5,
            row_len: 6,
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("gather_rows", &want).threads(24))]);
        let empty = arena(0, ty(DType::F32, &[0, 3]));
        let err = lower_with(&[empty, ids], ty(DType::F32, &[4, 3]), |c| gather(&Gather, c)).unwrap_err();
        assert_eq!(err.to_string(), "gather from the empty table f32[0,3] is not supported by the cuda backend");
    }

    #[test]
    fn kv_write_reads_the_offset_scalar_on_the_device() {
        // Cache [2,8,3] written along axis 1 with [2,2,3] at runtime scalar #5, in place.
        let out = ty(DType::F32, &[2, 8, 3]);
        let buf = Operand::arena(0x8000, out.clone());
        let value = arena(1, ty(DType::F32, &[2, 2, 3]));
        let op = KvWrite { axis: 1, offset: Some(ScalarId(5)) };
        let got = lower_with(&[buf, value.clone()], out.clone(), |c| kv_write(&op, c)).unwrap();
        let want = KvWriteParams {
            value: in_at(0x2000, kind::F32),
            out: out_at(0x8000, 0),
            scalars: 0x9000,
            n: 12,
            len: 2,
            cap: 8,
            inner: 3,
            scalar: 5,
            vec: 1,
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("kv_write_rows", &want).threads(12))]);

        // A whole-state write at a buffer of its own: the buffer is copied (48 words, 12 units
        // of 4), then offset 0.
        let buf = arena(0, out.clone());
        let value = arena(1, out.clone());
        let op = KvWrite { axis: 0, offset: None };
        let got = lower_with(&[buf, value], out, |c| kv_write(&op, c)).unwrap();
        let copy = SliceParams {
            x: in_at(0x1000, kind::F32),
            out: out_at(0x8000, 0),
            n: 12,
            block: 12,
            in_block: 12,
            start: 0,
            vec: 4,
        };
        let write = KvWriteParams { n: 12, len: 2, cap: 2, inner: 6, scalar: NO_OFFSET, vec: 4, ..want };
        assert_eq!(
            got,
            vec![
                Launch::Kernel(KernelLaunch::new("slice_copy", &copy).threads(12)),
                Launch::Kernel(KernelLaunch::new("kv_write_rows", &write).threads(12)),
            ]
        );
    }

    #[test]
    fn kv_write_of_decoder_rows_moves_four_words_per_thread() {
        // One new row [1,1,384] into the cache [1,448,384] at runtime scalar #0: 96 units.
        let out = ty(DType::F32, &[1, 448, 384]);
        let buf = Operand::arena(0x8000, out.clone());
        let value = arena(1, ty(DType::F32, &[1, 1, 384]));
        let op = KvWrite { axis: 1, offset: Some(ScalarId(0)) };
        let got = lower_with(&[buf, value], out, |c| kv_write(&op, c)).unwrap();
        let want = KvWriteParams {
            value: in_at(0x2000, kind::F32),
            out: out_at(0x8000, 0),
            scalars: 0x9000,
            n: 96,
            len: 1,
            cap: 448,
            inner: 96,
            scalar: 0,
            vec: 4,
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("kv_write_rows", &want).threads(96))]);
    }
}
