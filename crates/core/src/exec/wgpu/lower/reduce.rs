//! Ops along one axis: reductions, argmax and softmax. Each views its input as
//! `[outer, n, inner]` around the axis and folds every run of `n` values with the threads
//! [`axis_layout`] gives it.

use super::{KernelCtx, Lowering};
use crate::error::Result;
use crate::exec::wgpu::{KernelSpec, WORKGROUP, grid};
use crate::ir::DType;
use crate::ops::{Argmax, Reduce, ReduceKind, Softmax};

crate::kernel_params! {
    /// A tensor viewed as `[outer, n, inner]` around the axis a kernel works along, with
    /// `outputs = outer * inner` results (one per run of `n` values).
    pub struct AxisParams {
        pub n: u32,
        pub inner: u32,
        pub outputs: u32,
    }
}

impl AxisParams {
    /// The parameters of a `[outer, n, inner]` view (see [`Shape::split_at_axis`](crate::ir::Shape::split_at_axis)).
    pub fn new((outer, n, inner): (usize, usize, usize)) -> Self {
        AxisParams { n: n as u32, inner: inner as u32, outputs: (outer * inner) as u32 }
    }
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
/// `LANE_STRIDE` and `SLOT_STRIDE` are those distances in thread index.
pub fn axis_layout(spec: KernelSpec, (outer, n, inner): (usize, usize, usize)) -> KernelSpec {
    let threads = WORKGROUP as usize;
    let columns = inner.next_power_of_two().min(MAX_COLUMNS);
    let lanes = n.next_power_of_two().min(threads / columns);
    let slots = threads / lanes;
    let (lane_stride, slot_stride) = if inner == 1 { (1, lanes) } else { (slots, 1) };
    let [x, y, z] = grid((outer * inner).div_ceil(slots));
    spec.define("LANES", format!("{lanes}u"))
        .define("SLOTS", format!("{slots}u"))
        .define("LANE_STRIDE", format!("{lane_stride}u"))
        .define("SLOT_STRIDE", format!("{slot_stride}u"))
        .groups(x, y, z)
}

pub fn reduce(op: &Reduce, ctx: &KernelCtx) -> Result<Lowering> {
    let split = ctx.inputs[0].shape.split_at_axis(op.axis);
    let (combine, init, last) = match op.kind {
        ReduceKind::Sum => ("a + b", "0.0", "v"),
        ReduceKind::Mean => ("a + b", "0.0", "v / f32(p.n)"),
        // Starting from the run's first value keeps -inf (not a WGSL constant) out.
        ReduceKind::Max => ("max_nan(a, b)", "ld0(base)", "v"),
    };
    let spec =
        KernelSpec::new("reduce", include_str!("../../../../../../kernels/reduce.wgsl"), &AxisParams::new(split))
            .define("COMBINE", combine)
            .define("INIT", init)
            .define("FINAL", last);
    Ok(Lowering::Kernel(axis_layout(spec, split)))
}

pub fn argmax(op: &Argmax, ctx: &KernelCtx) -> Result<Lowering> {
    let x = ctx.inputs[0];
    let split = x.shape.split_at_axis(op.axis);
    // Integers compare in their own type: u32 and i32 values beyond 2^24 collide in f32.
    let (t, load, greater) = match x.dtype {
        DType::F32 | DType::F16 => ("f32", "ld0", "(is_nan(a) && !is_nan(b)) || a > b"),
        DType::I32 => ("i32", "ldi0", "a > b"),
        DType::U32 => ("u32", "ldu0", "a > b"),
        DType::Q8 => unreachable!("argmax takes no q8 operand (the graph refuses it)"),
    };
    let spec =
        KernelSpec::new("argmax", include_str!("../../../../../../kernels/argmax.wgsl"), &AxisParams::new(split))
            .define("T", t)
            .define("LOAD", load)
            .define("GREATER", greater);
    Ok(Lowering::Kernel(axis_layout(spec, split)))
}

pub fn softmax(_op: &Softmax, ctx: &KernelCtx) -> Result<Lowering> {
    let n = ctx.output.shape.last();
    let split = (ctx.output.numel() / n, n, 1);
    let spec =
        KernelSpec::new("softmax", include_str!("../../../../../../kernels/softmax.wgsl"), &AxisParams::new(split));
    Ok(Lowering::Kernel(axis_layout(spec, split)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::wgpu::lower::testing::{define, kernel, params, ty};

    /// `(LANES, SLOTS, LANE_STRIDE, SLOT_STRIDE)` and the workgroups of an axis kernel.
    fn layout(split: (usize, usize, usize)) -> ([String; 4], [u32; 3]) {
        let spec = axis_layout(KernelSpec::new("reduce", "", &AxisParams::new(split)), split);
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
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 5, inner: 1, outputs: 3 });
        assert_eq!(
            ["COMBINE", "INIT", "FINAL", "LANES"].map(|k| define(&spec, k)),
            ["a + b", "0.0", "v / f32(p.n)", "8u"]
        );
        // The maximum down the columns starts from each run's first value.
        let spec = kernel(Reduce { kind: ReduceKind::Max, axis: 0, keep_dim: true }, &[ty(DType::F16, &[3, 5])]);
        let spec = spec.unwrap();
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 3, inner: 5, outputs: 5 });
        assert_eq!(["COMBINE", "INIT", "FINAL"].map(|k| define(&spec, k)), ["max_nan(a, b)", "ld0(base)", "v"]);
    }

    #[test]
    fn argmax_compares_in_the_input_type_and_softmax_takes_rows() {
        let spec = kernel(Argmax { axis: 1 }, &[ty(DType::U32, &[2, 7, 3])]).unwrap();
        assert_eq!(spec.name, "argmax");
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 7, inner: 3, outputs: 6 });
        assert_eq!(["T", "LOAD", "GREATER"].map(|k| define(&spec, k)), ["u32", "ldu0", "a > b"]);
        let spec = kernel(Argmax { axis: 0 }, &[ty(DType::F16, &[4])]).unwrap();
        assert_eq!(["T", "LOAD"].map(|k| define(&spec, k)), ["f32", "ld0"]);
        assert_eq!(define(&spec, "GREATER"), "(is_nan(a) && !is_nan(b)) || a > b");
        let spec = kernel(Softmax, &[ty(DType::F32, &[2, 2, 9])]).unwrap();
        assert_eq!(spec.name, "softmax");
        assert_eq!(params::<AxisParams>(&spec), AxisParams { n: 9, inner: 1, outputs: 4 });
        assert_eq!(define(&spec, "LANES"), "16u");
    }
}
