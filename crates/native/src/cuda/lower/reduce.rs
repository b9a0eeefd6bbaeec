//! Reductions over one axis (sum, mean, max), argmax and softmax over the last axis
//! (kernels/cuda/reduce.cu).
//!
//! A tensor is viewed as `[outer, n, inner]` around the axis. Along the last axis (`inner ==
//! 1`) with runs of at least [`ROW_MIN`] values, one block folds each run with block
//! reductions, its threads reading consecutive values. Otherwise one thread folds each run in
//! index order (as the reference does): neighbouring threads are neighbouring results, which
//! read neighbouring words when `inner > 1`, and short rows do not leave a block idle.

use susurrus_core::ops::{Argmax, Reduce, ReduceKind, Softmax};
use susurrus_core::{Error, Result};

use super::{KernelLaunch, Launch, LowerCtx};
use crate::cuda::params::{In, KernelParams, Out, ParamsInfo};

crate::cuda_params! {
    /// `outputs = outer * inner` runs of `n` values `inner` apart; `op` is a [`reduce_op`] code.
    pub struct ReduceParams { pub x: In, pub out: Out, pub n: u32, pub inner: u32, pub outputs: u32, pub op: u32 }
}

crate::cuda_params! {
    /// `outputs = outer * inner` runs of `n` values `inner` apart; the result is a u32 index.
    pub struct ArgmaxParams { pub x: In, pub out: Out, pub n: u32, pub inner: u32, pub outputs: u32 }
}

crate::cuda_params! {
    /// `rows` rows of `n` values.
    pub struct SoftmaxParams { pub x: In, pub out: Out, pub n: u32, pub rows: u32 }
}

/// The `op` codes of [`ReduceParams`] (`REDUCE_*` in kernels/cuda/reduce.cu).
pub mod reduce_op {
    pub const SUM: u32 = 0;
    pub const MEAN: u32 = 1;
    pub const MAX: u32 = 2;
}

/// The shortest last-axis run folded by a whole block: below it most of a warp would idle.
pub const ROW_MIN: usize = 32;

/// Most threads of a row block: a bound well below any register limit of these kernels.
const ROW_THREADS: usize = 512;

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![ParamsInfo::of::<ReduceParams>(), ParamsInfo::of::<ArgmaxParams>(), ParamsInfo::of::<SoftmaxParams>()]
}

/// `n` as a kernel's u32 count.
fn count(n: usize, op: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Unsupported {
        op: format!("{op} of {n} elements"),
        backend: "cuda (at most 2^32 - 1)".into(),
    })
}

/// A launch of `name` with a block of [`row_threads`] for each of `rows` rows of `n` values.
fn per_row<P: KernelParams>(name: &'static str, params: &P, rows: usize, n: usize, op: &str) -> Result<KernelLaunch> {
    let grid = u32::try_from(rows).ok().filter(|&r| r <= i32::MAX as u32).ok_or_else(|| Error::Unsupported {
        op: format!("{op} of {rows} rows"),
        backend: "cuda (at most 2^31 - 1 rows)".into(),
    })?;
    Ok(KernelLaunch::new(name, params).grid(grid, 1, 1).block(row_threads(n), 1, 1))
}

/// Threads of a block that folds rows of `n` values: about four values each, whole warps
/// (the block reductions need them), at most [`ROW_THREADS`].
pub fn row_threads(n: usize) -> u32 {
    n.div_ceil(4).next_multiple_of(32).clamp(32, ROW_THREADS) as u32
}

/// `[outer, n, inner]` around `axis` of the op's input.
fn split(ctx: &LowerCtx, axis: usize) -> (usize, usize, usize) {
    let dims = ctx.inputs[0].ty.shape.dims();
    (dims[..axis].iter().product(), dims[axis], dims[axis + 1..].iter().product())
}

/// Whether runs of `n` values with `inner` between them get a block each.
fn by_rows(n: usize, inner: usize) -> bool {
    inner == 1 && n >= ROW_MIN
}

pub fn reduce(op: &Reduce, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let (outer, n, inner) = split(ctx, op.axis);
    let outputs = outer * inner;
    if outputs == 0 {
        return Ok(Vec::new());
    }
    count(ctx.inputs[0].ty.numel(), op.kind.name())?;
    let code = match op.kind {
        ReduceKind::Sum => reduce_op::SUM,
        ReduceKind::Mean => reduce_op::MEAN,
        ReduceKind::Max => reduce_op::MAX,
    };
    let params = ReduceParams {
        x: ctx.input(0),
        out: ctx.out(),
        n: n as u32,
        inner: inner as u32,
        outputs: outputs as u32,
        op: code,
    };
    let launch = if by_rows(n, inner) {
        per_row("reduce_rows", &params, outputs, n, op.kind.name())?
    } else {
        KernelLaunch::new("reduce_runs", &params).threads(outputs)
    };
    Ok(vec![Launch::Kernel(launch)])
}

/// The first index of the largest value; NaN beats every number (the first NaN wins);
/// integers compare in their own type.
pub fn argmax(op: &Argmax, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let (outer, n, inner) = split(ctx, op.axis);
    let outputs = outer * inner;
    if outputs == 0 {
        return Ok(Vec::new());
    }
    count(ctx.inputs[0].ty.numel(), "argmax")?;
    let params =
        ArgmaxParams { x: ctx.input(0), out: ctx.out(), n: n as u32, inner: inner as u32, outputs: outputs as u32 };
    let launch = if by_rows(n, inner) {
        per_row("argmax_rows", &params, outputs, n, "argmax")?
    } else {
        KernelLaunch::new("argmax_runs", &params).threads(outputs)
    };
    Ok(vec![Launch::Kernel(launch)])
}

/// One block per row whatever its length: softmax reads each value three times (maximum,
/// sum, result), which the block's threads share.
pub fn softmax(_op: &Softmax, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let numel = ctx.output.ty.numel();
    if numel == 0 {
        return Ok(Vec::new());
    }
    let n = ctx.output.ty.shape.last();
    let rows = numel / n;
    count(numel, "softmax")?;
    let params = SoftmaxParams { x: ctx.input(0), out: ctx.out(), n: n as u32, rows: rows as u32 };
    Ok(vec![Launch::Kernel(per_row("softmax_rows", &params, rows, n, "softmax")?)])
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::TensorType;

    use super::super::{Operand, Precision, Scratch};
    use super::*;
    use crate::cuda::params::kind;

    fn ty(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType::new(dtype, dims.to_vec())
    }

    /// Lowers with the input at 0x1000 and the output at 0x8000.
    fn lower_with(x: Operand, out: TensorType, f: impl Fn(&LowerCtx) -> Result<Vec<Launch>>) -> Vec<Launch> {
        let output = Operand::arena(0x8000, out);
        let scratch = Scratch::new(0);
        let inputs = [x];
        f(&LowerCtx { inputs: &inputs, output: &output, scalars: 0x9000, precision: Precision::F32, scratch: &scratch })
            .unwrap()
    }

    fn x(dtype: DType, dims: &[usize]) -> Operand {
        Operand::arena(0x1000, ty(dtype, dims))
    }

    const X: In = In { ptr: 0x1000, kind: kind::F32, pad: 0 };

    fn out(dtype: u32) -> Out {
        Out { ptr: 0x8000, dtype, pad: 0 }
    }

    #[test]
    fn row_threads_are_whole_warps_of_about_four_values() {
        assert_eq!(row_threads(1), 32);
        assert_eq!(row_threads(128), 32);
        assert_eq!(row_threads(129), 64);
        assert_eq!(row_threads(1500), 384);
        assert_eq!(row_threads(51864), 512);
    }

    #[test]
    fn reduce_over_the_last_axis_takes_a_block_per_row() {
        // [3,5,100] max over axis 2, keep_dim: 15 rows of 100, 32 threads each.
        let op = Reduce { kind: ReduceKind::Max, axis: 2, keep_dim: true };
        let got = lower_with(x(DType::F16, &[3, 5, 100]), ty(DType::F16, &[3, 5, 1]), |c| reduce(&op, c));
        let want = ReduceParams { x: X, out: out(1), n: 100, inner: 1, outputs: 15, op: reduce_op::MAX };
        let launch = KernelLaunch::new("reduce_rows", &want).grid(15, 1, 1).block(32, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
    }

    #[test]
    fn reduce_over_other_axes_and_short_rows_takes_a_thread_per_result() {
        // [3,5,100] mean over axis 1: 300 results of 5 values 100 apart, 2 blocks of 256.
        let op = Reduce { kind: ReduceKind::Mean, axis: 1, keep_dim: false };
        let got = lower_with(x(DType::F32, &[3, 5, 100]), ty(DType::F32, &[3, 100]), |c| reduce(&op, c));
        let want = ReduceParams { x: X, out: out(0), n: 5, inner: 100, outputs: 300, op: reduce_op::MEAN };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("reduce_runs", &want).threads(300))]);
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("reduce_runs", &want).grid(2, 1, 1))]);
        // Rows of 6 along the last axis: a thread each.
        let op = Reduce { kind: ReduceKind::Sum, axis: 1, keep_dim: false };
        let got = lower_with(x(DType::F32, &[1000, 6]), ty(DType::F32, &[1000]), |c| reduce(&op, c));
        let want = ReduceParams { x: X, out: out(0), n: 6, inner: 1, outputs: 1000, op: reduce_op::SUM };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("reduce_runs", &want).threads(1000))]);
    }

    #[test]
    fn argmax_by_rows_and_by_runs() {
        // Logits [1, 51864] over the vocabulary: one block of 512.
        let got = lower_with(x(DType::F32, &[1, 51864]), ty(DType::U32, &[1]), |c| argmax(&Argmax { axis: 1 }, c));
        let want = ArgmaxParams { x: X, out: out(3), n: 51864, inner: 1, outputs: 1 };
        let launch = KernelLaunch::new("argmax_rows", &want).grid(1, 1, 1).block(512, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
        // i32 [4,3,2] over axis 1: 8 results of 3 values 2 apart.
        let got = lower_with(x(DType::I32, &[4, 3, 2]), ty(DType::U32, &[4, 2]), |c| argmax(&Argmax { axis: 1 }, c));
        let x_i32 = In { kind: kind::I32, ..X };
        let want = ArgmaxParams { x: x_i32, out: out(3), n: 3, inner: 2, outputs: 8 };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("argmax_runs", &want).threads(8))]);
        // No results: nothing to launch.
        let got = lower_with(x(DType::F32, &[0, 3]), ty(DType::U32, &[0]), |c| argmax(&Argmax { axis: 1 }, c));
        assert_eq!(got, vec![]);
    }

    #[test]
    fn softmax_takes_a_block_per_row() {
        // [2,6,1500] attention scores: 12 rows of 1500, 384 threads each.
        let got = lower_with(x(DType::F32, &[2, 6, 1500]), ty(DType::F32, &[2, 6, 1500]), |c| softmax(&Softmax, c));
        let want = SoftmaxParams { x: X, out: out(0), n: 1500, rows: 12 };
        let launch = KernelLaunch::new("softmax_rows", &want).grid(12, 1, 1).block(384, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
    }
}
