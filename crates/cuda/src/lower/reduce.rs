//! Reductions over one axis (sum, mean, max), argmax, top_k and softmax over the last axis
//! (kernels/reduce.cu).
//!
//! A tensor is viewed as `[outer, n, inner]` around the axis. Along the last axis (`inner ==
//! 1`) with runs of at least [`ROW_MIN`] values, one block folds each run with block
//! reductions, its threads reading consecutive values (16 bytes at a time where they can).
//! A few long rows (at most [`SPLIT_ROWS`] of at least [`SPLIT_MIN`] values: the decoder's
//! rows of 51864 logits) would leave most of the device idle that way, so each row is split
//! into parts of about [`PART_LEN`] values, a block each, whose partial results (in scratch)
//! a second, small launch combines. Otherwise one thread folds each run in index order (as
//! the reference does): neighbouring threads are neighbouring results, which read
//! neighbouring words when `inner > 1`, and short rows do not leave a block idle. top_k sizes
//! its blocks and parts its own way (see [`top_k`]).

use susurrus_core::ops::{Argmax, Reduce, ReduceKind, Softmax, TopK};
use susurrus_core::{Error, Result};

use super::{KernelLaunch, Launch, LowerCtx};
use crate::params::{In, KernelParams, Out, ParamsInfo};

crate::cuda_params! {
    /// `outputs = outer * inner` runs of `n` values `inner` apart; `op` is a [`reduce_op`]
    /// code. Rows (`inner == 1`) come in `parts` parts of `chunk` values; with more than one,
    /// the partial results (an f32 each, `[rows, parts]`) go to `partials`.
    pub struct ReduceParams { pub x: In, pub out: Out, pub partials: u64, pub n: u32, pub inner: u32, pub outputs: u32, pub op: u32, pub parts: u32, pub chunk: u32 }
}

crate::cuda_params! {
    /// `outputs = outer * inner` runs of `n` values `inner` apart; the result is a u32 index.
    /// Rows come in `parts` parts of `chunk` values, as for [`ReduceParams`]; a partial result
    /// is the pair (value word, index).
    pub struct ArgmaxParams { pub x: In, pub out: Out, pub partials: u64, pub n: u32, pub inner: u32, pub outputs: u32, pub parts: u32, pub chunk: u32 }
}

crate::cuda_params! {
    /// `rows` rows of `n` values for the first `k` indices of each, in `parts` parts of `chunk`
    /// values (the last one shorter); with more than one, a part's k candidates, pairs (key,
    /// index), go to `partials` (`[rows, parts, k]` pairs).
    pub struct TopKParams { pub x: In, pub out: Out, pub partials: u64, pub n: u32, pub k: u32, pub rows: u32, pub parts: u32, pub chunk: u32 }
}

crate::cuda_params! {
    /// `rows` rows of `n` values, in `parts` parts of `chunk` values; with more than one, a
    /// part's maximum and sum of exponentials (an f32 pair) go to `partials`.
    pub struct SoftmaxParams { pub x: In, pub out: Out, pub partials: u64, pub n: u32, pub rows: u32, pub parts: u32, pub chunk: u32 }
}

/// The `op` codes of [`ReduceParams`] (`REDUCE_*` in kernels/reduce.cu).
pub mod reduce_op {
    pub const SUM: u32 = 0;
    pub const MEAN: u32 = 1;
    pub const MAX: u32 = 2;
}

/// The shortest last-axis run folded by a whole block: below it most of a warp would idle.
pub const ROW_MIN: usize = 32;

/// Most threads of a row block: a bound well below any register limit of these kernels.
const ROW_THREADS: usize = 512;

/// The shortest row split into parts: a block folds shorter ones in a few loads per thread,
/// quicker than a second launch.
pub const SPLIT_MIN: usize = 8192;

/// The most rows split into parts: more rows keep the device busy with a block each.
pub const SPLIT_ROWS: usize = 64;

/// About the values of a part of a split row: one 16-byte load per thread of [`PART_THREADS`].
pub const PART_LEN: usize = 1024;

/// The most parts of a split row: one warp combines them in two steps.
const MAX_PARTS: usize = 64;

/// Threads of a block folding a part of a split row.
const PART_THREADS: u32 = 256;

pub(super) fn params() -> Vec<ParamsInfo> {
    vec![
        ParamsInfo::of::<ReduceParams>(),
        ParamsInfo::of::<ArgmaxParams>(),
        ParamsInfo::of::<TopKParams>(),
        ParamsInfo::of::<SoftmaxParams>(),
    ]
}

/// `n` as a kernel's u32 count.
fn count(n: usize, op: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Unsupported {
        op: format!("{op} of {n} elements"),
        backend: "cuda (at most 2^32 - 1)".into(),
    })
}

/// Threads of a block that folds rows of `n` values: about four values each, whole warps
/// (the block reductions need them), at most [`ROW_THREADS`].
pub fn row_threads(n: usize) -> u32 {
    n.div_ceil(4).next_multiple_of(32).clamp(32, ROW_THREADS) as u32
}

/// How `rows` rows of `n` values are folded: `parts` blocks per row, each over `chunk`
/// values (the last part over what is left; none is empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    pub rows: u32,
    pub parts: u32,
    pub chunk: u32,
}

impl Rows {
    /// A block per row, or, for a few long rows, parts of about [`PART_LEN`] values (a
    /// multiple of 4, so parts of an aligned row stay aligned for 16-byte loads), at most
    /// [`MAX_PARTS`].
    pub fn new(rows: usize, n: usize, op: &str) -> Result<Self> {
        let grid = u32::try_from(rows).ok().filter(|&r| r <= i32::MAX as u32).ok_or_else(|| Error::Unsupported {
            op: format!("{op} of {rows} rows"),
            backend: "cuda (at most 2^31 - 1 rows)".into(),
        })?;
        let n32 = count(n, op)?;
        if n < SPLIT_MIN || rows > SPLIT_ROWS {
            return Ok(Rows { rows: grid, parts: 1, chunk: n32 });
        }
        let chunk = n.div_ceil(n.div_ceil(PART_LEN).min(MAX_PARTS)).next_multiple_of(4);
        Ok(Rows { rows: grid, parts: n.div_ceil(chunk) as u32, chunk: chunk as u32 })
    }

    fn split(&self) -> bool {
        self.parts > 1
    }

    /// Scratch for `bytes` per part, if the rows are split (0 otherwise).
    fn partials(&self, ctx: &LowerCtx, bytes: usize) -> u64 {
        if self.split() { ctx.scratch.take(self.rows as usize * self.parts as usize * bytes) } else { 0 }
    }

    /// The launch of `name` on the grid (rows, parts): a block of [`PART_THREADS`] per part,
    /// or of [`row_threads`] per whole row of `n` values.
    fn launch<P: KernelParams>(&self, name: &'static str, params: &P, n: usize) -> KernelLaunch {
        let threads = if self.split() { PART_THREADS } else { row_threads(n) };
        KernelLaunch::new(name, params).grid(self.rows, self.parts, 1).block(threads, 1, 1)
    }

    /// The launch of `name` folding each row's partial results with a warp.
    fn combine<P: KernelParams>(&self, name: &'static str, params: &P) -> KernelLaunch {
        KernelLaunch::new(name, params).grid(self.rows, 1, 1).block(32, 1, 1)
    }
}

/// Whether runs of `n` values with `inner` between them get a block each.
fn by_rows(n: usize, inner: usize) -> bool {
    inner == 1 && n >= ROW_MIN
}

pub fn reduce(op: &Reduce, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let (outer, n, inner) = ctx.inputs[0].ty.shape.split_at_axis(op.axis);
    let outputs = outer * inner;
    if outputs == 0 {
        return Ok(Vec::new());
    }
    let name = op.kind.name();
    count(ctx.inputs[0].ty.numel(), name)?;
    let code = match op.kind {
        ReduceKind::Sum => reduce_op::SUM,
        ReduceKind::Mean => reduce_op::MEAN,
        ReduceKind::Max => reduce_op::MAX,
    };
    let mut params = ReduceParams {
        x: ctx.input(0),
        out: ctx.out(),
        partials: 0,
        n: n as u32,
        inner: inner as u32,
        outputs: outputs as u32,
        op: code,
        parts: 1,
        chunk: n as u32,
    };
    if !by_rows(n, inner) {
        return Ok(vec![Launch::Kernel(KernelLaunch::new("reduce_runs", &params).threads(outputs))]);
    }
    let rows = Rows::new(outputs, n, name)?;
    params.parts = rows.parts;
    params.chunk = rows.chunk;
    params.partials = rows.partials(ctx, 4);
    let mut launches = vec![Launch::Kernel(rows.launch("reduce_rows", &params, n))];
    if rows.split() {
        launches.push(Launch::Kernel(rows.combine("reduce_combine", &params)));
    }
    Ok(launches)
}

/// The first index of the largest value; NaN beats every number (the first NaN wins);
/// integers compare in their own type.
pub fn argmax(op: &Argmax, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let (outer, n, inner) = ctx.inputs[0].ty.shape.split_at_axis(op.axis);
    let outputs = outer * inner;
    if outputs == 0 {
        return Ok(Vec::new());
    }
    count(ctx.inputs[0].ty.numel(), "argmax")?;
    let mut params = ArgmaxParams {
        x: ctx.input(0),
        out: ctx.out(),
        partials: 0,
        n: n as u32,
        inner: inner as u32,
        outputs: outputs as u32,
        parts: 1,
        chunk: n as u32,
    };
    if !by_rows(n, inner) {
        return Ok(vec![Launch::Kernel(KernelLaunch::new("argmax_runs", &params).threads(outputs))]);
    }
    let rows = Rows::new(outputs, n, "argmax")?;
    params.parts = rows.parts;
    params.chunk = rows.chunk;
    params.partials = rows.partials(ctx, 8);
    let mut launches = vec![Launch::Kernel(rows.launch("argmax_rows", &params, n))];
    if rows.split() {
        launches.push(Launch::Kernel(rows.combine("argmax_combine", &params)));
    }
    Ok(launches)
}

/// The largest `k` [`top_k`] takes: the kernels' shared memory holds `k` picks per warp.
pub const TOP_K_MAX: usize = 64;

/// Values of a part of a split top_k row: 16 per thread of a block of 256, the most a thread
/// keeps in registers (`TOP_K_HELD` in kernels/reduce.cu), so the thread holding a
/// round's pick finds its next candidate without reading memory.
pub const TOP_K_PART: usize = 4096;

/// Most threads of a top_k block (`TOP_K_WARPS` warps in kernels/reduce.cu).
const TOP_K_THREADS: usize = 512;

/// Threads of a top_k block selecting among `count` candidates: about 16 each (all in
/// registers up to 512 x 16 candidates), whole warps, at most [`TOP_K_THREADS`].
pub fn top_k_threads(count: usize) -> u32 {
    count.div_ceil(16).next_multiple_of(32).clamp(32, TOP_K_THREADS) as u32
}

/// The `k` largest values' indices along the last axis, in the reference's order (larger
/// first, equal values by lower index, NaN above every number); integers compare in their own
/// type. `k` is at most [`TOP_K_MAX`].
///
/// Each warp selects the first k of its lanes' values in k rounds of shuffles, then one warp
/// selects among the warps' picks (kernels/reduce.cu). A row of at most [`TOP_K_PART`]
/// values takes a block; longer rows (beam search's scores, up to 16 x 51866 values in one
/// row) are cut into parts of that many, a block each, whose k candidates go to scratch, and
/// `top_k_combine` selects among a row's candidates with one block.
pub fn top_k(op: &TopK, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    if op.k > TOP_K_MAX {
        return Err(Error::Unsupported {
            op: format!("top_k with k={}", op.k),
            backend: format!("cuda (k at most {TOP_K_MAX})"),
        });
    }
    let numel = ctx.inputs[0].ty.numel();
    let n = ctx.inputs[0].ty.shape.last();
    let rows = numel / n;
    if rows == 0 {
        return Ok(Vec::new());
    }
    count(numel, "top_k")?;
    let parts = n.div_ceil(TOP_K_PART);
    let blocks =
        u32::try_from(rows * parts).ok().filter(|&b| b <= i32::MAX as u32).ok_or_else(|| Error::Unsupported {
            op: format!("top_k of {rows} rows of {n}"),
            backend: "cuda (at most 2^31 - 1 blocks)".into(),
        })?;
    let chunk = if parts == 1 { n } else { TOP_K_PART };
    let partials = if parts == 1 { 0 } else { ctx.scratch.take(rows * parts * op.k * 8) };
    let params = TopKParams {
        x: ctx.input(0),
        out: ctx.out(),
        partials,
        n: n as u32,
        k: op.k as u32,
        rows: rows as u32,
        parts: parts as u32,
        chunk: chunk as u32,
    };
    let first = KernelLaunch::new("top_k_rows", &params).grid(blocks, 1, 1).block(top_k_threads(chunk), 1, 1);
    if parts == 1 {
        return Ok(vec![Launch::Kernel(first)]);
    }
    let threads = top_k_threads(parts * op.k);
    let combine = KernelLaunch::new("top_k_combine", &params).grid(rows as u32, 1, 1).block(threads, 1, 1);
    Ok(vec![Launch::Kernel(first), Launch::Kernel(combine)])
}

/// One block per row whatever its length (softmax reads each value three times: maximum,
/// sum, result, which the block's threads share), or, for a few long rows, a pass over parts
/// for their maxima and sums and a second pass, on the same grid, writing the results.
pub fn softmax(_op: &Softmax, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    let numel = ctx.output.ty.numel();
    if numel == 0 {
        return Ok(Vec::new());
    }
    let n = ctx.output.ty.shape.last();
    let rows = numel / n;
    count(numel, "softmax")?;
    let grid = Rows::new(rows, n, "softmax")?;
    let params = SoftmaxParams {
        x: ctx.input(0),
        out: ctx.out(),
        partials: grid.partials(ctx, 8),
        n: n as u32,
        rows: rows as u32,
        parts: grid.parts,
        chunk: grid.chunk,
    };
    if !grid.split() {
        return Ok(vec![Launch::Kernel(grid.launch("softmax_rows", &params, n))]);
    }
    Ok(vec![
        Launch::Kernel(grid.launch("softmax_parts", &params, n)),
        Launch::Kernel(grid.launch("softmax_finish", &params, n)),
    ])
}

#[cfg(test)]
mod tests {
    use susurrus_core::DType;
    use susurrus_core::ir::TensorType;

    use super::super::Operand;
    use super::*;
    use crate::params::kind;

    use crate::lower::testing::ty;

    /// Scratch of the tests' lowerings.
    const SCRATCH: u64 = 0x10_0000;

    /// Lowers with the input at 0x1000, the output at 0x8000 and scratch at [`SCRATCH`].
    fn lower_with(x: Operand, out: TensorType, f: impl Fn(&LowerCtx) -> Result<Vec<Launch>>) -> Vec<Launch> {
        crate::lower::testing::lower_at(&[x], 0x8000, out, SCRATCH, f).unwrap()
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
    fn few_long_rows_split_into_parts_of_about_a_thousand_values() {
        // 51864 logits: 51 parts of 1020 (1017 rounded up to a multiple of 4); the last has 864.
        assert_eq!(Rows::new(1, 51864, "t").unwrap(), Rows { rows: 1, parts: 51, chunk: 1020 });
        // The text logits before the timestamps: 50 parts of 1008, the last of 972.
        assert_eq!(Rows::new(1, 50364, "t").unwrap(), Rows { rows: 1, parts: 50, chunk: 1008 });
        // The shortest split row: 8 parts of 1024.
        assert_eq!(Rows::new(3, SPLIT_MIN, "t").unwrap(), Rows { rows: 3, parts: 8, chunk: 1024 });
        // Very long rows: at most 64 parts, each non-empty.
        assert_eq!(Rows::new(2, 1_000_001, "t").unwrap(), Rows { rows: 2, parts: 64, chunk: 15628 });
        // Shorter rows, or many rows: a block per row.
        assert_eq!(Rows::new(1, SPLIT_MIN - 1, "t").unwrap(), Rows { rows: 1, parts: 1, chunk: 8191 });
        assert_eq!(Rows::new(65, 51864, "t").unwrap(), Rows { rows: 65, parts: 1, chunk: 51864 });
        assert_eq!(Rows::new(12, 1500, "t").unwrap(), Rows { rows: 12, parts: 1, chunk: 1500 });
        // Every part is non-empty and the parts cover the row.
        for n in SPLIT_MIN..SPLIT_MIN + 200 {
            let r = Rows::new(1, n, "t").unwrap();
            let (parts, chunk) = (r.parts as usize, r.chunk as usize);
            assert!(chunk.is_multiple_of(4) && (parts - 1) * chunk < n && parts * chunk >= n, "{n}: {r:?}");
        }
    }

    #[test]
    fn reduce_over_the_last_axis_takes_a_block_per_row() {
        // [3,5,100] max over axis 2, keep_dim: 15 rows of 100, 32 threads each.
        let op = Reduce { kind: ReduceKind::Max, axis: 2, keep_dim: true };
        let got = lower_with(x(DType::F16, &[3, 5, 100]), ty(DType::F16, &[3, 5, 1]), |c| reduce(&op, c));
        let want = ReduceParams {
            x: X,
            out: out(1),
            partials: 0,
            n: 100,
            inner: 1,
            outputs: 15,
            op: reduce_op::MAX,
            parts: 1,
            chunk: 100,
        };
        let launch = KernelLaunch::new("reduce_rows", &want).grid(15, 1, 1).block(32, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
    }

    #[test]
    fn reduce_of_a_long_row_folds_parts_then_combines_them() {
        // The decoder's logits [1, 51864] summed: 51 blocks of 256 threads write partial sums
        // to scratch, one warp adds them.
        let op = Reduce { kind: ReduceKind::Sum, axis: 1, keep_dim: true };
        let got = lower_with(x(DType::F32, &[1, 51864]), ty(DType::F32, &[1, 1]), |c| reduce(&op, c));
        let want = ReduceParams {
            x: X,
            out: out(0),
            partials: SCRATCH,
            n: 51864,
            inner: 1,
            outputs: 1,
            op: reduce_op::SUM,
            parts: 51,
            chunk: 1020,
        };
        let parts = KernelLaunch::new("reduce_rows", &want).grid(1, 51, 1).block(256, 1, 1);
        let combine = KernelLaunch::new("reduce_combine", &want).grid(1, 1, 1).block(32, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(parts), Launch::Kernel(combine)]);
    }

    #[test]
    fn reduce_over_other_axes_and_short_rows_takes_a_thread_per_result() {
        // [3,5,100] mean over axis 1: 300 results of 5 values 100 apart, 2 blocks of 256.
        let op = Reduce { kind: ReduceKind::Mean, axis: 1, keep_dim: false };
        let got = lower_with(x(DType::F32, &[3, 5, 100]), ty(DType::F32, &[3, 100]), |c| reduce(&op, c));
        let want = ReduceParams {
            x: X,
            out: out(0),
            partials: 0,
            n: 5,
            inner: 100,
            outputs: 300,
            op: reduce_op::MEAN,
            parts: 1,
            chunk: 5,
        };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("reduce_runs", &want).threads(300))]);
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("reduce_runs", &want).grid(2, 1, 1))]);
        // Rows of 6 along the last axis: a thread each.
        let op = Reduce { kind: ReduceKind::Sum, axis: 1, keep_dim: false };
        let got = lower_with(x(DType::F32, &[1000, 6]), ty(DType::F32, &[1000]), |c| reduce(&op, c));
        let want = ReduceParams { n: 6, inner: 1, outputs: 1000, op: reduce_op::SUM, chunk: 6, ..want };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("reduce_runs", &want).threads(1000))]);
    }

    #[test]
    fn argmax_by_rows_parts_and_runs() {
        // Logits [1, 51864] over the vocabulary: 51 parts whose (value, index) pairs (8 bytes
        // each) one warp combines.
        let got = lower_with(x(DType::F32, &[1, 51864]), ty(DType::U32, &[1]), |c| argmax(&Argmax { axis: 1 }, c));
        let want = ArgmaxParams {
            x: X,
            out: out(3),
            partials: SCRATCH,
            n: 51864,
            inner: 1,
            outputs: 1,
            parts: 51,
            chunk: 1020,
        };
        let parts = KernelLaunch::new("argmax_rows", &want).grid(1, 51, 1).block(256, 1, 1);
        let combine = KernelLaunch::new("argmax_combine", &want).grid(1, 1, 1).block(32, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(parts), Launch::Kernel(combine)]);
        // [70, 51864]: too many rows to split, a block of 512 each.
        let got = lower_with(x(DType::F32, &[70, 51864]), ty(DType::U32, &[70]), |c| argmax(&Argmax { axis: 1 }, c));
        let want = ArgmaxParams { partials: 0, outputs: 70, parts: 1, chunk: 51864, ..want };
        let launch = KernelLaunch::new("argmax_rows", &want).grid(70, 1, 1).block(512, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
        // i32 [4,3,2] over axis 1: 8 results of 3 values 2 apart.
        let got = lower_with(x(DType::I32, &[4, 3, 2]), ty(DType::U32, &[4, 2]), |c| argmax(&Argmax { axis: 1 }, c));
        let x_i32 = In { kind: kind::I32, ..X };
        let want = ArgmaxParams { x: x_i32, out: out(3), partials: 0, n: 3, inner: 2, outputs: 8, parts: 1, chunk: 3 };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("argmax_runs", &want).threads(8))]);
        // No results: nothing to launch.
        let got = lower_with(x(DType::F32, &[0, 3]), ty(DType::U32, &[0]), |c| argmax(&Argmax { axis: 1 }, c));
        assert_eq!(got, vec![]);
    }

    #[test]
    fn top_k_threads_are_whole_warps_of_about_sixteen_candidates() {
        assert_eq!(top_k_threads(1), 32);
        assert_eq!(top_k_threads(512), 32);
        assert_eq!(top_k_threads(513), 64);
        assert_eq!(top_k_threads(TOP_K_PART), 256);
        assert_eq!(top_k_threads(64 * 32), 128);
        assert_eq!(top_k_threads(1_000_000), 512);
    }

    #[test]
    fn top_k_takes_a_block_per_short_row() {
        // [3, 5, 100] i32, k = 4: 15 rows of 100, a block of one warp each.
        let got = lower_with(x(DType::I32, &[3, 5, 100]), ty(DType::U32, &[3, 5, 4]), |c| top_k(&TopK { k: 4 }, c));
        let x_i32 = In { kind: kind::I32, ..X };
        let want = TopKParams { x: x_i32, out: out(3), partials: 0, n: 100, k: 4, rows: 15, parts: 1, chunk: 100 };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("top_k_rows", &want).grid(15, 1, 1).block(32, 1, 1))]);
        // A row of exactly one part: 256 threads.
        let got = lower_with(x(DType::F32, &[2, 4096]), ty(DType::U32, &[2, 1]), |c| top_k(&TopK { k: 1 }, c));
        let want = TopKParams { x: X, out: out(3), partials: 0, n: 4096, k: 1, rows: 2, parts: 1, chunk: 4096 };
        assert_eq!(got, vec![Launch::Kernel(KernelLaunch::new("top_k_rows", &want).grid(2, 1, 1).block(256, 1, 1))]);
        // No rows: nothing to launch.
        let got = lower_with(x(DType::F32, &[0, 3]), ty(DType::U32, &[0, 2]), |c| top_k(&TopK { k: 2 }, c));
        assert_eq!(got, vec![]);
    }

    #[test]
    fn top_k_of_long_rows_selects_in_parts_then_combines_them() {
        // Beam search over 5 beams' scores [1, 5 * 51864], k = 10: 64 parts of 4096 (the last
        // of 1272), a block of 256 each writing 10 pairs (80 bytes) to scratch; one block of
        // 32 threads selects among the 640.
        let got = lower_with(x(DType::F32, &[1, 5 * 51864]), ty(DType::U32, &[1, 10]), |c| top_k(&TopK { k: 10 }, c));
        let want =
            TopKParams { x: X, out: out(3), partials: SCRATCH, n: 259320, k: 10, rows: 1, parts: 64, chunk: 4096 };
        let parts = KernelLaunch::new("top_k_rows", &want).grid(64, 1, 1).block(256, 1, 1);
        let combine = KernelLaunch::new("top_k_combine", &want).grid(1, 1, 1).block(64, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(parts), Launch::Kernel(combine)]);
        // Two rows of 51864, k = 32: 13 parts each, blocks row * parts + part.
        let got = lower_with(x(DType::F16, &[2, 51864]), ty(DType::U32, &[2, 32]), |c| top_k(&TopK { k: 32 }, c));
        let want = TopKParams { n: 51864, k: 32, rows: 2, parts: 13, ..want };
        let parts = KernelLaunch::new("top_k_rows", &want).grid(26, 1, 1).block(256, 1, 1);
        let combine = KernelLaunch::new("top_k_combine", &want).grid(2, 1, 1).block(32, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(parts), Launch::Kernel(combine)]);
    }

    #[test]
    fn top_k_refuses_k_past_its_limit() {
        let err = crate::lower::testing::lower_at(
            &[x(DType::F32, &[1, 100])],
            0x8000,
            ty(DType::U32, &[1, 65]),
            SCRATCH,
            |c| top_k(&TopK { k: 65 }, c),
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "top_k with k=65 is not supported by the cuda (k at most 64) backend");
    }

    #[test]
    fn softmax_takes_a_block_per_row() {
        // [2,6,1500] attention scores: 12 rows of 1500, 384 threads each.
        let got = lower_with(x(DType::F32, &[2, 6, 1500]), ty(DType::F32, &[2, 6, 1500]), |c| softmax(&Softmax, c));
        let want = SoftmaxParams { x: X, out: out(0), partials: 0, n: 1500, rows: 12, parts: 1, chunk: 1500 };
        let launch = KernelLaunch::new("softmax_rows", &want).grid(12, 1, 1).block(384, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(launch)]);
    }

    #[test]
    fn softmax_of_a_long_row_takes_two_passes_over_parts() {
        let got = lower_with(x(DType::F32, &[1, 51864]), ty(DType::F32, &[1, 51864]), |c| softmax(&Softmax, c));
        let want = SoftmaxParams { x: X, out: out(0), partials: SCRATCH, n: 51864, rows: 1, parts: 51, chunk: 1020 };
        let first = KernelLaunch::new("softmax_parts", &want).grid(1, 51, 1).block(256, 1, 1);
        let second = KernelLaunch::new("softmax_finish", &want).grid(1, 51, 1).block(256, 1, 1);
        assert_eq!(got, vec![Launch::Kernel(first), Launch::Kernel(second)]);
    }
}
