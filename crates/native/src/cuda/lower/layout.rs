//! Data movement: permute, slice, concat, gather and KV-cache writes (kernels/cuda/layout.cu).
//! Every kernel copies 32-bit words (`ldw`/`stw`), so each dtype arrives bit for bit and
//! integers never pass through f32.

use susurrus_core::ops::{Concat, Gather, KvWrite, Permute, Slice};
use susurrus_core::{Error, Result};

use super::{KernelLaunch, Launch, LowerCtx};
use crate::cuda::params::{In, Out, ParamsInfo, dims8};

crate::cuda_params! {
    /// The output's `rank` dimensions (outermost first) and, for each, the input stride it
    /// walks.
    pub struct PermuteParams { pub x: In, pub out: Out, pub n: u32, pub rank: u32, pub dims: [u32; 8], pub strides: [u32; 8] }
}

crate::cuda_params! {
    /// A slice as words of `[outer, dim, inner]` blocks: `block` words kept out of every
    /// `in_block`, from word `start` on.
    pub struct SliceParams { pub x: In, pub out: Out, pub n: u32, pub block: u32, pub in_block: u32, pub start: u32 }
}

crate::cuda_params! {
    /// One input of a concat: its `n` words are blocks of `part` words, each copied `at`
    /// words into the output's blocks of `block` words.
    pub struct ConcatParams { pub x: In, pub out: Out, pub n: u32, pub part: u32, pub block: u32, pub at: u32 }
}

crate::cuda_params! {
    /// Output words, table rows and words per row; the ids' kind says how to read them.
    pub struct GatherParams { pub table: In, pub ids: In, pub out: Out, pub n: u32, pub rows: u32, pub row_len: u32 }
}

crate::cuda_params! {
    /// The value (`n` words, `[outer, len, inner]`) goes into the buffer (`[outer, cap,
    /// inner]`) at the offset held by runtime scalar `scalar` of the array at `scalars`
    /// ([`NO_OFFSET`]: offset 0).
    pub struct KvWriteParams { pub value: In, pub out: Out, pub scalars: u64, pub n: u32, pub len: u32, pub cap: u32, pub inner: u32, pub scalar: u32 }
}

/// The `scalar` of a write without an offset scalar (a whole-state write).
pub const NO_OFFSET: u32 = u32::MAX;

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

/// The fewest axes that walk the same offsets as output axes of sizes `dims` reading the
/// input with `strides` (as the wgpu lowering does): size-1 axes go and neighbours that stay
/// contiguous in the input merge, so fewer divisions per element and ranks above 8 may fit.
fn collapse(dims: &[usize], strides: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut out_dims: Vec<usize> = Vec::new();
    let mut out_strides: Vec<usize> = Vec::new();
    for (&d, &s) in dims.iter().zip(strides).filter(|(d, _)| **d != 1) {
        match (out_dims.last_mut(), out_strides.last_mut()) {
            (Some(last_d), Some(last_s)) if *last_s == s * d => {
                *last_d *= d;
                *last_s = s;
            }
            _ => {
                out_dims.push(d);
                out_strides.push(s);
            }
        }
    }
    (out_dims, out_strides)
}

pub fn permute(op: &Permute, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let x = &ctx.inputs[0].ty.shape;
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let in_strides = x.strides();
    let dims: Vec<usize> = op.perm.iter().map(|&p| x.dims()[p]).collect();
    let strides: Vec<usize> = op.perm.iter().map(|&p| in_strides[p]).collect();
    let (dims, strides) = collapse(&dims, &strides);
    if dims.len() > 8 {
        return Err(Error::Unsupported {
            op: format!("permute of {} axes that cannot be merged", dims.len()),
            backend: "cuda (at most 8)".into(),
        });
    }
    let params = PermuteParams {
        x: ctx.input(0),
        out: ctx.out(),
        n: count(n, "permute")?,
        rank: dims.len() as u32,
        dims: dims8(&dims, 1),
        strides: dims8(&strides, 0),
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new("permute_copy", &params).threads(n))])
}

pub fn slice(op: &Slice, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let dims = ctx.inputs[0].ty.shape.dims();
    let n = ctx.output.ty.numel();
    if n == 0 {
        return Ok(Vec::new());
    }
    let inner = dims[op.axis + 1..].iter().product::<usize>();
    let params = SliceParams {
        x: ctx.input(0),
        out: ctx.out(),
        n: count(n, "slice")?,
        block: count((op.end - op.start) * inner, "slice")?,
        in_block: count(dims[op.axis] * inner, "slice")?,
        start: count(op.start * inner, "slice")?,
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new("slice_copy", &params).threads(n))])
}

/// One launch per non-empty input, each copying its blocks into place: any number of inputs,
/// and every read and write is coalesced.
pub fn concat(op: &Concat, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let dims = ctx.output.ty.shape.dims();
    if ctx.output.ty.numel() == 0 {
        return Ok(Vec::new());
    }
    let inner = dims[op.axis + 1..].iter().product::<usize>();
    let block = count(dims[op.axis] * inner, "concat")?;
    let mut at = 0;
    let mut launches = Vec::new();
    for (k, input) in ctx.inputs.iter().enumerate() {
        let part = input.ty.shape.dims()[op.axis] * inner;
        let n = input.ty.numel();
        if n > 0 {
            let params = ConcatParams {
                x: ctx.input(k),
                out: ctx.out(),
                n: count(n, "concat")?,
                part: count(part, "concat")?,
                block,
                at: count(at, "concat")?,
            };
            launches.push(Launch::Kernel(KernelLaunch::new("concat_part", &params).threads(n)));
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
    let params = GatherParams {
        table: ctx.input(0),
        ids: ctx.input(1),
        out: ctx.out(),
        n: count(n, "gather")?,
        rows: count(rows, "gather")?,
        row_len: count(table.shape.dims()[1..].iter().product::<usize>(), "gather")?,
    };
    Ok(vec![Launch::Kernel(KernelLaunch::new("gather_rows", &params).threads(n))])
}

/// One thread per element of the value; the offset is read on the device at run time, so a
/// recorded graph replays with new offsets. The planner gives the buffer (input 0) the
/// output's storage, so only the value's rows are written; should the two differ, the buffer
/// is copied over first. A write past the capacity (a run-time error in the reference)
/// writes nothing, as on wgpu: a kernel cannot fail, and the buffer stays in bounds.
pub fn kv_write(op: &KvWrite, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let value = &ctx.inputs[1].ty;
    let dims = ctx.output.ty.shape.dims();
    let mut launches = Vec::new();
    let total = ctx.output.ty.numel();
    if ctx.inputs[0].ptr != ctx.output.ptr && total > 0 {
        let words = count(total, "kv_write")?;
        let copy = SliceParams { x: ctx.input(0), out: ctx.out(), n: words, block: words, in_block: words, start: 0 };
        launches.push(Launch::Kernel(KernelLaunch::new("slice_copy", &copy).threads(total)));
    }
    let n = value.numel();
    if n == 0 {
        return Ok(launches);
    }
    let params = KvWriteParams {
        value: ctx.input(1),
        out: ctx.out(),
        scalars: ctx.scalars,
        n: count(n, "kv_write")?,
        len: count(value.shape.dims()[op.axis], "kv_write")?,
        cap: count(dims[op.axis], "kv_write")?,
        inner: count(dims[op.axis + 1..].iter().product::<usize>(), "kv_write")?,
        scalar: op.offset.map_or(NO_OFFSET, |s| s.0),
    };
    launches.push(Launch::Kernel(KernelLaunch::new("kv_write_rows", &params).threads(n)));
    Ok(launches)
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::{ScalarId, TensorType};

    use super::super::{Operand, Precision, Scratch};
    use super::*;
    use crate::cuda::params::kind;

    fn ty(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType::new(dtype, dims.to_vec())
    }

    /// Lowers with inputs at 0x1000, 0x2000, ... and the output at 0x8000.
    fn lower_with(
        inputs: &[Operand],
        out: TensorType,
        f: impl Fn(&LowerCtx) -> Result<Vec<Launch>>,
    ) -> Result<Vec<Launch>> {
        let output = Operand::arena(0x8000, out);
        let scratch = Scratch::new(0);
        f(&LowerCtx { inputs, output: &output, scalars: 0x9000, precision: Precision::F32, scratch: &scratch })
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

    #[test]
    fn permute_collapses_axes_and_passes_strides() {
        // [2,3,4] -> perm [2,0,1]: output [4,2,3] walks strides [1,12,4]; the last two merge.
        let x = arena(0, ty(DType::F16, &[2, 3, 4]));
        let op = Permute { perm: vec![2, 0, 1] };
        let got = lower_with(&[x], ty(DType::F16, &[4, 2, 3]), |c| permute(&op, c)).unwrap();
        let want = PermuteParams {
            x: in_at(0x1000, kind::F32),
            out: out_at(0x8000, 1),
            n: 24,
            rank: 2,
            dims: [4, 6, 1, 1, 1, 1, 1, 1],
            strides: [1, 4, 0, 0, 0, 0, 0, 0],
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("permute_copy", &want).threads(24))]);
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
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("slice_copy", &want).threads(18))]);
        // An empty slice launches nothing.
        let x = arena(0, ty(DType::I32, &[2, 5, 3]));
        let op = Slice { axis: 1, start: 2, end: 2 };
        assert_eq!(lower_with(&[x], ty(DType::I32, &[2, 0, 3]), |c| slice(&op, c)).unwrap(), vec![]);
    }

    #[test]
    fn concat_launches_one_copy_per_nonempty_input() {
        // [2,1,4] ++ [2,0,4] ++ [2,3,4] on axis 1 -> [2,4,4]: blocks of 16 words; the parts
        // are 4 and 12 words, at 0 and 4.
        let a = arena(0, ty(DType::U32, &[2, 1, 4]));
        let b = arena(1, ty(DType::U32, &[2, 0, 4]));
        let c = Operand { ptr: 0x3000, kind: kind::F16, ty: ty(DType::U32, &[2, 3, 4]) };
        let op = Concat { axis: 1 };
        let got = lower_with(&[a, b, c], ty(DType::U32, &[2, 4, 4]), |ctx| concat(&op, ctx)).unwrap();
        let first =
            ConcatParams { x: in_at(0x1000, kind::U32), out: out_at(0x8000, 3), n: 8, part: 4, block: 16, at: 0 };
        let last =
            ConcatParams { x: in_at(0x3000, kind::F16), out: out_at(0x8000, 3), n: 24, part: 12, block: 16, at: 4 };
        assert_eq!(
            got,
            vec![
                Launch::Kernel(KernelLaunch::new("concat_part", &first).threads(8)),
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
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("kv_write_rows", &want).threads(12))]);

        // A whole-state write at a buffer of its own: the buffer is copied, then offset 0.
        let buf = arena(0, out.clone());
        let value = arena(1, out.clone());
        let op = KvWrite { axis: 0, offset: None };
        let got = lower_with(&[buf, value], out, |c| kv_write(&op, c)).unwrap();
        let copy = SliceParams {
            x: in_at(0x1000, kind::F32),
            out: out_at(0x8000, 0),
            n: 48,
            block: 48,
            in_block: 48,
            start: 0,
        };
        let write = KvWriteParams { n: 48, len: 2, cap: 2, inner: 24, scalar: NO_OFFSET, ..want };
        assert_eq!(
            got,
            vec![
                Launch::Kernel(KernelLaunch::new("slice_copy", &copy).threads(48)),
                Launch::Kernel(KernelLaunch::new("kv_write_rows", &write).threads(48)),
            ]
        );
    }
}
