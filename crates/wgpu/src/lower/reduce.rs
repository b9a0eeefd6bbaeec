//! Ops along one axis: reductions, argmax, top_k and softmax. Each but top_k views its input
//! as `[outer, n, inner]` around the axis and folds every run of `n` values with the threads
//! [`axis_layout`] gives it, whose lanes are combined by [`lane_folds`]; top_k selects along
//! the last axis with a whole workgroup per row or split of a row.

use super::{KernelCtx, Lowering};
use crate::{KernelSpec, ScratchUse, WORKGROUP, grid};
use susurrus_core::error::{Error, Result};
use susurrus_core::ir::DType;
use susurrus_core::ops::{Argmax, Reduce, ReduceKind, Softmax, TopK};

crate::kernel_params! {
    /// A tensor viewed as `[outer, n, inner]` around the axis a kernel works along, with
    /// `outputs = outer * inner` results (one per run of `n` values). The reduce and argmax
    /// kernels may fold each run in `splits` splits of `chunk` values (1 and `n` otherwise).
    pub struct AxisParams {
        pub n: u32,
        pub inner: u32,
        pub outputs: u32,
        pub splits: u32,
        pub chunk: u32,
    }
}

crate::kernel_params! {
    /// top_k over rows of `n` values, each in `splits` splits of `chunk` values (the last one
    /// shorter), for the `k` first indices. `groups` workgroups of a pass have work: one per
    /// split, then one per row (the grid may hold more).
    pub struct TopKParams {
        pub n: u32,
        pub k: u32,
        pub splits: u32,
        pub chunk: u32,
        pub groups: u32,
    }
}

impl AxisParams {
    /// The parameters of a `[outer, n, inner]` view (see [`Shape::split_at_axis`](susurrus_core::ir::Shape::split_at_axis)).
    pub fn new((outer, n, inner): (usize, usize, usize)) -> Self {
        AxisParams { n: n as u32, inner: inner as u32, outputs: (outer * inner) as u32, splits: 1, chunk: n as u32 }
    }
}

/// Runs at most this many, along the last axis and at least [`SPLIT_MIN`] long, are folded
/// in two passes: one workgroup folding a run of 51864 logits (a decoder step's token
/// selection) kept one multiprocessor busy for 14-30 us on an H200.
const SPLIT_MAX_RUNS: usize = 8;
const SPLIT_MIN: usize = 8192;
/// Values per split of such runs: four per thread of a workgroup.
const SPLIT_CHUNK: usize = 1024;

/// How many splits the runs of a `[outer, n, inner]` view are folded in: 1 (one pass) unless
/// they are few and long.
fn splits((outer, n, inner): (usize, usize, usize)) -> usize {
    if inner == 1 && outer <= SPLIT_MAX_RUNS && n >= SPLIT_MIN { n.div_ceil(SPLIT_CHUNK) } else { 1 }
}

/// Results a workgroup's lanes may interleave: 32 neighbouring results of one `k` fill a
/// 128-byte line when the axis is not the last.
const MAX_COLUMNS: usize = 32;

/// Shares the threads of each workgroup of an axis kernel (reduce, argmax, softmax, layer
/// norm) among the runs of `n` values of a `[outer, n, inner]` view, and dispatches enough
/// workgroups for all `outer * inner` runs.
///
/// `LANES` threads (a power of two, at most `n` rounded up) fold one run, so short runs do
/// not leave most of a workgroup idle and long ones get all 256 threads; the workgroup holds
/// `SLOTS = 256 / LANES` runs. Along the last axis (`inner == 1`) a run's lanes are
/// neighbouring threads reading consecutive values; otherwise neighbouring threads are
/// neighbouring runs, which also read consecutive values (`i` and `i + 1` at one `k`).
/// `LANE_STRIDE` and `SLOT_STRIDE` are those distances in thread index. The lane folds
/// ([`lane_folds`]) come with the layout.
pub fn axis_layout(spec: KernelSpec, ctx: &KernelCtx, (outer, n, inner): (usize, usize, usize)) -> KernelSpec {
    let threads = WORKGROUP as usize;
    let columns = inner.next_power_of_two().min(MAX_COLUMNS);
    let lanes = n.next_power_of_two().min(threads / columns);
    let slots = threads / lanes;
    let (lane_stride, slot_stride) = if inner == 1 { (1, lanes) } else { (slots, 1) };
    let [x, y, z] = grid((outer * inner).div_ceil(slots));
    lane_folds(spec, ctx, lane_stride)
        .define("LANES", format!("{lanes}u"))
        .define("SLOTS", format!("{slots}u"))
        .define("LANE_STRIDE", format!("{lane_stride}u"))
        .define("SLOT_STRIDE", format!("{slot_stride}u"))
        .groups(x, y, z)
}

/// Places the lane folds before an axis kernel whose result's lanes are `lane_stride` threads
/// apart: on subgroup shuffles where the device has subgroups and the lanes are neighbours
/// (`kernels/lanes_subgroup.wgsl`: a decoder step's GEMV then needs no workgroup memory at
/// all), else by a tree in workgroup memory (`kernels/lanes.wgsl`).
pub fn lane_folds(spec: KernelSpec, ctx: &KernelCtx, lane_stride: usize) -> KernelSpec {
    match ctx.subgroups {
        Some(width) if lane_stride == 1 => {
            spec.prelude(include_str!("../../kernels/lanes_subgroup.wgsl")).define("SUBGROUP_MIN", format!("{width}u"))
        }
        _ => spec.prelude(include_str!("../../kernels/lanes.wgsl")),
    }
}

pub fn reduce(op: &Reduce, ctx: &KernelCtx) -> Result<Lowering> {
    let split = ctx.inputs[0].shape.split_at_axis(op.axis);
    let (outer, n, inner) = split;
    let fold = match op.kind {
        ReduceKind::Sum | ReduceKind::Mean => "FOLD_SUM",
        ReduceKind::Max => "FOLD_MAX_NAN",
    };
    // Starting from the split's first value keeps -inf (not a WGSL constant) out.
    let init = |load: &str| if op.kind == ReduceKind::Max { format!("{load}(first)") } else { "0.0".into() };
    let kernel = |params: &AxisParams, load: &str, last: &str| {
        KernelSpec::new("reduce", include_str!("../../kernels/reduce.wgsl"), params)
            .define("FOLD", fold)
            .define("LOAD", load)
            .define("INIT", init(load))
            .define("FINAL", last)
    };
    let splits = splits(split);
    if splits == 1 {
        let last = if op.kind == ReduceKind::Mean { "v / f32(p.n)" } else { "v" };
        return Ok(Lowering::Kernel(axis_layout(kernel(&AxisParams::new(split), "ld0", last), ctx, split)));
    }
    // Each split's partial result (a sum for the mean), then the partials of each run.
    let chunk = SPLIT_CHUNK;
    let first = AxisParams { splits: splits as u32, chunk: chunk as u32, ..AxisParams::new(split) };
    let first = axis_layout(kernel(&first, "ld0", "v"), ctx, (outer * splits, chunk, 1)).scratch(ScratchUse::Writes);
    let last = if op.kind == ReduceKind::Mean { format!("v / {n}.0") } else { "v".into() };
    let merged = (outer, splits, inner);
    let load = format!("ld{}", ctx.inputs.len());
    let second = axis_layout(kernel(&AxisParams::new(merged), &load, &last), ctx, merged).scratch(ScratchUse::Reads);
    Ok(Lowering::Passes { scratch_bytes: 4 * outer * splits, kernels: vec![first, second] })
}

pub fn argmax(op: &Argmax, ctx: &KernelCtx) -> Result<Lowering> {
    let x = ctx.inputs[0];
    let split = x.shape.split_at_axis(op.axis);
    // Integers compare in their own type: u32 and i32 values beyond 2^24 collide in f32.
    let (t, load, greater, [key, unkey], from_bits) = match x.dtype {
        DType::F32 | DType::F16 => {
            ("f32", "ld0", "(is_nan(a) && !is_nan(b)) || a > b", ["key_f32", "unkey_f32"], "bitcast<f32>")
        }
        DType::I32 => ("i32", "ldi0", "a > b", ["key_i32", "unkey_i32"], "bitcast<i32>"),
        DType::U32 => ("u32", "ldu0", "a > b", ["u32", "u32"], "u32"),
        DType::Q8 => unreachable!("argmax takes no q8 operand (the graph refuses it)"),
    };
    let splits = splits(split);
    let chunk = if splits == 1 { split.1 } else { SPLIT_CHUNK };
    let params = AxisParams { splits: splits as u32, chunk: chunk as u32, ..AxisParams::new(split) };
    let spec = KernelSpec::new("argmax", include_str!("../../kernels/argmax.wgsl"), &params)
        .define("T", t)
        .define("LOAD", load)
        .define("GREATER", greater)
        .define("KEY", key)
        .define("UNKEY", unkey);
    if splits == 1 {
        return Ok(Lowering::Kernel(axis_layout(spec, ctx, split)));
    }
    // Each split's first best (value bits, k), then the first best of each run's splits.
    let (outer, _, _) = split;
    let first = axis_layout(spec, ctx, (outer * splits, params.chunk as usize, 1)).scratch(ScratchUse::Writes);
    let second = KernelSpec::new("argmax_combine", include_str!("../../kernels/argmax_combine.wgsl"), &params)
        .define("T", t)
        .define("GREATER", greater)
        .define("FROM_BITS", from_bits)
        .define("SCRATCH_INPUT", ctx.inputs.len().to_string())
        .threads(outer)
        .scratch(ScratchUse::Reads);
    Ok(Lowering::Passes { scratch_bytes: 8 * outer * splits, kernels: vec![first, second] })
}

/// The largest `k` [`top_k`] takes: each of its k rounds costs two workgroup folds, and its
/// scratch grows with k (beam search asks for twice the beams, at most 32 or so).
pub const TOP_K_MAX: usize = 64;

/// Values of a split of a top_k row: 16 per thread, which the thread holding a round's pick
/// scans again (from cache) for its next candidate.
const TOP_K_CHUNK: usize = 4096;

/// The `k` largest values' indices along the last axis, in the reference's order (larger
/// first, equal values by lower index, NaN above every number); `k` at most [`TOP_K_MAX`].
///
/// A workgroup selects the first k of its candidates in k rounds of two lane folds
/// (`kernels/top_k_select.wgsl`). Rows of at most [`TOP_K_CHUNK`] values take a workgroup
/// each. Longer rows (a decoder step's scores for every beam: up to 16 x 51866 values) are
/// cut into splits of that many, a workgroup each, which write their k candidates, as pairs
/// (key, index), to the scratch; then one workgroup per row selects among its splits'
/// candidates (`kernels/top_k_combine.wgsl`). Integers compare in their own type, floats by
/// order-preserving u32 keys (NaN above everything, -0 equal to +0).
pub fn top_k(op: &TopK, ctx: &KernelCtx) -> Result<Lowering> {
    if op.k > TOP_K_MAX {
        return Err(Error::Unsupported {
            op: format!("top_k with k={}", op.k),
            backend: format!("wgpu (k at most {TOP_K_MAX})"),
        });
    }
    let x = ctx.inputs[0];
    let (t, load, key) = match x.dtype {
        DType::F32 | DType::F16 => ("f32", "ld0", "key_f32"),
        DType::I32 => ("i32", "ldi0", "key_i32"),
        DType::U32 => ("u32", "ldu0", "u32"),
        DType::Q8 => unreachable!("top_k takes no q8 operand (the graph refuses it)"),
    };
    let n = x.shape.last();
    let rows = x.numel() / n;
    let splits = n.div_ceil(TOP_K_CHUNK);
    let chunk = if splits == 1 { n } else { TOP_K_CHUNK };
    let params = TopKParams {
        n: n as u32,
        k: op.k as u32,
        splits: splits as u32,
        chunk: chunk as u32,
        groups: (rows * splits) as u32,
    };
    let source = concat!(include_str!("../../kernels/top_k.wgsl"), include_str!("../../kernels/top_k_select.wgsl"));
    let spec = KernelSpec::new("top_k", source, &params).define("T", t).define("LOAD", load).define("KEY", key);
    let [gx, gy, gz] = grid(rows * splits);
    let first = lane_folds(spec, ctx, 1).groups(gx, gy, gz);
    if splits == 1 {
        return Ok(Lowering::Kernel(first));
    }
    let params = TopKParams { groups: rows as u32, ..params };
    let source =
        concat!(include_str!("../../kernels/top_k_combine.wgsl"), include_str!("../../kernels/top_k_select.wgsl"));
    let spec = KernelSpec::new("top_k_combine", source, &params).define("SCRATCH_INPUT", ctx.inputs.len().to_string());
    let [gx, gy, gz] = grid(rows);
    let second = lane_folds(spec, ctx, 1).groups(gx, gy, gz).scratch(ScratchUse::Reads);
    let scratch_bytes = 8 * rows * splits * op.k;
    Ok(Lowering::Passes { scratch_bytes, kernels: vec![first.scratch(ScratchUse::Writes), second] })
}

pub fn softmax(_op: &Softmax, ctx: &KernelCtx) -> Result<Lowering> {
    let n = ctx.output.shape.last();
    let split = (ctx.output.numel() / n, n, 1);
    let spec = KernelSpec::new("softmax", include_str!("../../kernels/softmax.wgsl"), &AxisParams::new(split));
    Ok(Lowering::Kernel(axis_layout(spec, ctx, split)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::testing::{define, kernel, kernels_on, lower_on, params, ty};
    use susurrus_core::ops::Op;

    /// `(LANES, SLOTS, LANE_STRIDE, SLOT_STRIDE)` and the workgroups of an axis kernel.
    fn layout(split: (usize, usize, usize)) -> ([String; 4], [u32; 3]) {
        let x = ty(DType::F32, &[1]);
        let ctx = KernelCtx { inputs: &[&x], output: &x, f16: false, cpu: false, matrix: false, subgroups: None };
        let spec = axis_layout(KernelSpec::new("reduce", "", &AxisParams::new(split)), &ctx, split);
        let get = |key: &str| spec.defines.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()).unwrap();
        (["LANES", "SLOTS", "LANE_STRIDE", "SLOT_STRIDE"].map(get), spec.workgroups)
    }

    #[test]
    fn axis_layout_fits_threads_to_runs() {
        let want = |l: u32, s: u32, ls: u32, ss: u32| [l, s, ls, ss].map(|v| format!("{v}u"));
        // Attention-sized rows: all 256 threads on one row, neighbours reading neighbours.
        assert_eq!(layout((9000, 1500, 1)), (want(256, 1, 1, 256), [9000, 1, 1]));
        // Rows of 6: 8 lanes each, 32 rows per workgroup, 1500 / 32 -> 47 workgroups.
        assert_eq!(layout((1500, 6, 1)), (want(8, 32, 1, 8), [47, 1, 1]));
        // Down the columns of [1500, 384]: 32 neighbouring columns by 8 lanes, 384 / 32 = 12.
        assert_eq!(layout((1, 1500, 384)), (want(8, 32, 32, 1), [12, 1, 1]));
        // Three columns of three: 4 lanes cover the axis, 64 slots cover the columns.
        assert_eq!(layout((1, 3, 3)), (want(4, 64, 64, 1), [1, 1, 1]));
        // 2^24 + 256 single values: 65537 workgroups of 256 spill into a second grid row.
        assert_eq!(layout(((1 << 24) + 256, 1, 1)), (want(1, 256, 1, 1), [65535, 2, 1]));
    }

    #[test]
    fn reductions_fold_runs_along_the_axis() {
        // The mean of each row of [3,5]: 8 lanes per row, 32 rows per workgroup.
        let spec = kernel(Reduce { kind: ReduceKind::Mean, axis: 1, keep_dim: false }, &[ty(DType::F32, &[3, 5])]);
        let spec = spec.unwrap();
        assert_eq!((spec.name, spec.workgroups), ("reduce", [1, 1, 1]));
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 5, inner: 1, outputs: 3, splits: 1, chunk: 5 });
        assert_eq!(
            ["FOLD", "LOAD", "INIT", "FINAL", "LANES"].map(|k| define(&spec, k)),
            ["FOLD_SUM", "ld0", "0.0", "v / f32(p.n)", "8u"]
        );
        // The maximum down the columns starts from each run's first value.
        let spec = kernel(Reduce { kind: ReduceKind::Max, axis: 0, keep_dim: true }, &[ty(DType::F16, &[3, 5])]);
        let spec = spec.unwrap();
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 3, inner: 5, outputs: 5, splits: 1, chunk: 3 });
        assert_eq!(["FOLD", "INIT", "FINAL"].map(|k| define(&spec, k)), ["FOLD_MAX_NAN", "ld0(first)", "v"]);
    }

    #[test]
    fn a_few_long_rows_fold_in_two_passes() {
        // The mean over a decoder step's 51864 logits: 51 splits of 1024, a workgroup each,
        // partial sums in the scratch; then one workgroup folds the 51 and divides by 51864.
        let op = Reduce { kind: ReduceKind::Mean, axis: 1, keep_dim: true };
        let passes = kernels_on(op, &[ty(DType::F32, &[1, 51864])], false).unwrap();
        let (first, second) = (&passes[0], &passes[1]);
        assert_eq!((first.scratch, first.workgroups), (ScratchUse::Writes, [51, 1, 1]));
        assert_eq!(params::<AxisParams>(first), AxisParams { n: 51864, inner: 1, outputs: 1, splits: 51, chunk: 1024 });
        assert_eq!(["LOAD", "FINAL", "LANES"].map(|k| define(first, k)), ["ld0", "v", "256u"]);
        assert_eq!((second.scratch, second.workgroups), (ScratchUse::Reads, [1, 1, 1]));
        assert_eq!(params::<AxisParams>(second), AxisParams { n: 51, inner: 1, outputs: 1, splits: 1, chunk: 51 });
        assert_eq!(["LOAD", "FINAL"].map(|k| define(second, k)), ["ld1", "v / 51864.0"]);
        // The max reads each split's first value, then the first partial.
        let op = Reduce { kind: ReduceKind::Max, axis: 1, keep_dim: true };
        let passes = kernels_on(op.clone(), &[ty(DType::F32, &[1, 51864])], false).unwrap();
        assert_eq!((define(&passes[0], "INIT"), define(&passes[1], "INIT")), ("ld0(first)", "ld1(first)"));
        // Argmax: each split's (value bits, k) pair, then one thread per row merges them.
        let passes = kernels_on(Argmax { axis: 1 }, &[ty(DType::F32, &[2, 51864])], false).unwrap();
        assert_eq!((passes[0].name, passes[0].workgroups), ("argmax", [102, 1, 1]));
        assert_eq!((passes[1].name, define(&passes[1], "SCRATCH_INPUT")), ("argmax_combine", "1"));
        assert_eq!(define(&passes[1], "FROM_BITS"), "bitcast<f32>");
        // Many rows, short rows, or columns stay one pass.
        for dims in [[9, 51864], [1, 8191]] {
            assert_eq!(kernels_on(op.clone(), &[ty(DType::F32, &dims)], false).unwrap().len(), 1, "{dims:?}");
        }
        let columns = Reduce { kind: ReduceKind::Sum, axis: 0, keep_dim: false };
        assert_eq!(kernels_on(columns, &[ty(DType::F32, &[51864, 2])], false).unwrap().len(), 1);
    }

    #[test]
    fn top_k_takes_a_workgroup_per_short_row() {
        // [3, 5, 100] rows, k = 4: 15 workgroups, keys of the input type.
        let spec = kernel(TopK { k: 4 }, &[ty(DType::I32, &[3, 5, 100])]).unwrap();
        assert_eq!((spec.name, spec.workgroups, spec.scratch), ("top_k", [15, 1, 1], ScratchUse::None));
        assert_eq!(params::<TopKParams>(&spec), TopKParams { n: 100, k: 4, splits: 1, chunk: 100, groups: 15 });
        assert_eq!(["T", "LOAD", "KEY"].map(|k| define(&spec, k)), ["i32", "ldi0", "key_i32"]);
        // The selection folds all 256 lanes of a workgroup.
        assert!(spec.prelude.contains("fn lanes("));
        let spec = kernel(TopK { k: 1 }, &[ty(DType::F16, &[4096])]).unwrap();
        assert_eq!(["T", "LOAD", "KEY"].map(|k| define(&spec, k)), ["f32", "ld0", "key_f32"]);
        assert_eq!((params::<TopKParams>(&spec).splits, spec.workgroups), (1, [1, 1, 1]));
        let spec = kernel(TopK { k: 2 }, &[ty(DType::U32, &[7])]).unwrap();
        assert_eq!(["T", "LOAD", "KEY"].map(|k| define(&spec, k)), ["u32", "ldu0", "u32"]);
    }

    #[test]
    fn top_k_of_long_rows_selects_in_splits_then_merges_them() {
        // Five beams' scores [1, 5 * 51864], k = 10: 64 splits of 4096 (the last of 1272), a
        // workgroup each writing 10 pairs to the scratch; one workgroup merges the 640.
        let passes = kernels_on(TopK { k: 10 }, &[ty(DType::F32, &[1, 5 * 51864])], false).unwrap();
        let (first, second) = (&passes[0], &passes[1]);
        assert_eq!((first.name, first.scratch, first.workgroups), ("top_k", ScratchUse::Writes, [64, 1, 1]));
        let want = TopKParams { n: 259320, k: 10, splits: 64, chunk: 4096, groups: 64 };
        assert_eq!(params::<TopKParams>(first), want);
        assert_eq!((second.name, second.scratch, second.workgroups), ("top_k_combine", ScratchUse::Reads, [1, 1, 1]));
        assert_eq!(params::<TopKParams>(second), TopKParams { groups: 1, ..want });
        assert_eq!(define(second, "SCRATCH_INPUT"), "1");
        // Two rows of 51864: 13 splits each, 8 bytes per candidate.
        let op: Op = TopK { k: 32 }.into();
        match lower_on(&op, &[ty(DType::F32, &[2, 51864])], false).unwrap() {
            Lowering::Passes { scratch_bytes, kernels } => {
                assert_eq!(scratch_bytes, 8 * 2 * 13 * 32);
                assert_eq!((kernels[0].workgroups, kernels[1].workgroups), ([26, 1, 1], [2, 1, 1]));
            }
            other => panic!("{other:?}"),
        }
        // A row of exactly one split stays one pass.
        assert_eq!(kernels_on(TopK { k: 10 }, &[ty(DType::F32, &[3, 4096])], false).unwrap().len(), 1);
    }

    #[test]
    fn top_k_refuses_k_past_its_limit() {
        let op: Op = TopK { k: TOP_K_MAX + 1 }.into();
        let err = lower_on(&op, &[ty(DType::F32, &[1, 100])], false).unwrap_err();
        assert_eq!(err.to_string(), "top_k with k=65 is not supported by the wgpu (k at most 64) backend");
        assert!(lower_on(&TopK { k: TOP_K_MAX }.into(), &[ty(DType::F32, &[1, 100])], false).is_ok());
    }

    #[test]
    fn argmax_compares_in_the_input_type_and_softmax_takes_rows() {
        let spec = kernel(Argmax { axis: 1 }, &[ty(DType::U32, &[2, 7, 3])]).unwrap();
        assert_eq!(spec.name, "argmax");
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 7, inner: 3, outputs: 6, splits: 1, chunk: 7 });
        assert_eq!(["T", "LOAD", "GREATER"].map(|k| define(&spec, k)), ["u32", "ldu0", "a > b"]);
        let spec = kernel(Argmax { axis: 0 }, &[ty(DType::F16, &[4])]).unwrap();
        assert_eq!(["T", "LOAD"].map(|k| define(&spec, k)), ["f32", "ld0"]);
        assert_eq!(define(&spec, "GREATER"), "(is_nan(a) && !is_nan(b)) || a > b");
        let spec = kernel(Softmax, &[ty(DType::F32, &[2, 2, 9])]).unwrap();
        assert_eq!(spec.name, "softmax");
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 9, inner: 1, outputs: 4, splits: 1, chunk: 9 });
        assert_eq!(define(&spec, "LANES"), "16u");
    }
}
