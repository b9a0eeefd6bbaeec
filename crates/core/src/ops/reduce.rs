//! Reductions over one axis: sum, mean, max. Floats accumulate in f32, in index order.
//!
//! `max` propagates NaN (a NaN anywhere in the reduced run gives NaN), like PyTorch and
//! consistent with argmax treating NaN as the largest value.

use super::{EvalCtx, Memory, OpKind, expect_arity};
use crate::error::{Error, Result};
use crate::exec::wgpu::{KernelCtx, KernelSpec, Lowering, WORKGROUP, grid};
use crate::ir::{Graph, NodeId, Shape, TensorType};
use crate::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
}

impl ReduceKind {
    pub const ALL: [ReduceKind; 3] = [ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max];

    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "reduce_sum",
            ReduceKind::Mean => "reduce_mean",
            ReduceKind::Max => "reduce_max",
        }
    }
}

/// Reduces `axis`; with `keep_dim` the axis stays with size 1, else it is removed.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduce {
    pub kind: ReduceKind,
    pub axis: usize,
    pub keep_dim: bool,
}

/// Views `shape` as `[outer, n, inner]` around `axis` (`n` is the axis' size), so element
/// `(o, k, i)` is at flat index `(o * n + k) * inner + i`. The caller checks `axis < rank`.
pub(crate) fn split_at_axis(shape: &Shape, axis: usize) -> (usize, usize, usize) {
    let dims = shape.dims();
    (dims[..axis].iter().product(), dims[axis], dims[axis + 1..].iter().product())
}

impl OpKind for Reduce {
    fn name(&self) -> &'static str {
        self.kind.name()
    }
    fn attrs(&self) -> String {
        format!("axis={} keep_dim={}", self.axis, self.keep_dim)
    }
    fn infer(&self, inputs: &[&TensorType]) -> Result<TensorType> {
        expect_arity(self.name(), inputs.len(), 1)?;
        let x = inputs[0];
        if !x.dtype.is_float() {
            return Err(Error::shape(self.name(), format!("needs a float tensor, got {x}")));
        }
        if self.axis >= x.shape.rank() || x.shape.dims()[self.axis] == 0 {
            return Err(Error::shape(self.name(), format!("axis {} is out of range or empty for {x}", self.axis)));
        }
        let mut dims = x.shape.dims().to_vec();
        if self.keep_dim {
            dims[self.axis] = 1;
        } else {
            dims.remove(self.axis);
        }
        Ok(TensorType::new(x.dtype, Shape(dims)))
    }
    fn eval(&self, inputs: &[&Tensor], _: &EvalCtx) -> Result<Tensor> {
        let x = inputs[0];
        let ty = self.infer(&[&x.ty()])?;
        let (outer, n, inner) = split_at_axis(x.shape(), self.axis);
        let v = x.to_f32();
        let mut out = Vec::with_capacity(outer * inner);
        for o in 0..outer {
            for i in 0..inner {
                let run = (0..n).map(|k| v[(o * n + k) * inner + i]);
                out.push(match self.kind {
                    ReduceKind::Sum => run.sum(),
                    ReduceKind::Mean => run.sum::<f32>() / n as f32,
                    ReduceKind::Max => run.fold(f32::NEG_INFINITY, |m, e| if e.is_nan() || e > m { e } else { m }),
                });
            }
        }
        Tensor::from_f32(ty.dtype, ty.shape, out)
    }
    fn memory(&self) -> Memory {
        Memory::Fresh
    }
    fn kernel(&self, ctx: &KernelCtx) -> Result<Lowering> {
        let split = split_at_axis(&ctx.inputs[0].shape, self.axis);
        let (combine, init, last) = match self.kind {
            ReduceKind::Sum => ("a + b", "0.0", "v"),
            ReduceKind::Mean => ("a + b", "0.0", "v / f32(p.n)"),
            // Starting from the run's first value keeps -inf (not a WGSL constant) out.
            ReduceKind::Max => ("max_nan(a, b)", "ld0(base)", "v"),
        };
        let spec = KernelSpec::new("reduce", include_str!("../../../../kernels/reduce.wgsl"), &AxisParams::new(split))
            .define("COMBINE", combine)
            .define("INIT", init)
            .define("FINAL", last);
        Ok(Lowering::Kernel(axis_layout(spec, split)))
    }
}

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
    /// The parameters of a `[outer, n, inner]` view (see [`split_at_axis`]).
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
pub(crate) fn axis_layout(spec: KernelSpec, (outer, n, inner): (usize, usize, usize)) -> KernelSpec {
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

impl Graph {
    /// Reduces `x` (a float tensor) over `axis`; with `keep_dim` the axis stays with size 1.
    pub fn reduce(&mut self, kind: ReduceKind, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.push(Reduce { kind, axis, keep_dim }, &[x])
    }
    /// Sum over `axis`.
    pub fn reduce_sum(&mut self, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.reduce(ReduceKind::Sum, x, axis, keep_dim)
    }
    /// Arithmetic mean over `axis`.
    pub fn reduce_mean(&mut self, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.reduce(ReduceKind::Mean, x, axis, keep_dim)
    }
    /// Maximum over `axis` (NaN if any reduced value is NaN).
    pub fn reduce_max(&mut self, x: NodeId, axis: usize, keep_dim: bool) -> Result<NodeId> {
        self.reduce(ReduceKind::Max, x, axis, keep_dim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::DType;
    use crate::ops::testing::eval_op;

    fn reduce(kind: ReduceKind, x: &Tensor, axis: usize, keep_dim: bool) -> Tensor {
        eval_op(Reduce { kind, axis, keep_dim }, &[x]).unwrap()
    }

    #[test]
    fn every_axis_of_a_rank3_tensor() {
        // x[i,j,k] = 12i + 4j + k + 1 for shape [2,3,4] (values 1..=24).
        let x = Tensor::f32([2, 3, 4], (1..=24).map(|v| v as f32).collect()).unwrap();
        // axis 0: x[0,j,k] + x[1,j,k] = 2 * (4j + k + 1) + 12.
        let y = reduce(ReduceKind::Sum, &x, 0, false);
        assert_eq!(y.shape(), &Shape::from([3, 4]));
        assert_eq!(y.to_f32(), (0..12).map(|m| 2.0 * (m + 1) as f32 + 12.0).collect::<Vec<_>>());
        // axis 1 mean: the middle row j = 1, i.e. 12i + k + 5.
        let y = reduce(ReduceKind::Mean, &x, 1, true);
        assert_eq!(y.shape(), &Shape::from([2, 1, 4]));
        assert_eq!(y.to_f32(), vec![5.0, 6.0, 7.0, 8.0, 17.0, 18.0, 19.0, 20.0]);
        // axis 2 max: the last column k = 3, i.e. 12i + 4j + 4.
        let y = reduce(ReduceKind::Max, &x, 2, false);
        assert_eq!(y.to_f32(), vec![4.0, 8.0, 12.0, 16.0, 20.0, 24.0]);
    }

    #[test]
    fn max_propagates_nan_and_handles_negative_infinity() {
        let x = Tensor::f32([2, 3], vec![1.0, f32::NAN, 3.0, f32::NEG_INFINITY, -5.0, -2.0]).unwrap();
        let y = reduce(ReduceKind::Max, &x, 1, false).to_f32();
        assert!(y[0].is_nan());
        assert_eq!(y[1], -2.0);
        let all_neg_inf = Tensor::f32([2], vec![f32::NEG_INFINITY; 2]).unwrap();
        assert_eq!(reduce(ReduceKind::Max, &all_neg_inf, 0, false).to_f32(), vec![f32::NEG_INFINITY]);
    }

    #[test]
    fn f16_accumulates_in_f32() {
        // 2048 + 1 + 1 + 1 + 1: in f16 each +1 would round back to 2048 (spacing 2 there);
        // in f32 the sum is 2052, which f16 represents exactly.
        let x = Tensor::from_f32(DType::F16, [5], vec![2048.0, 1.0, 1.0, 1.0, 1.0]).unwrap();
        let y = reduce(ReduceKind::Sum, &x, 0, false);
        assert_eq!(y.ty(), TensorType::new(DType::F16, []));
        assert_eq!(y.to_f32(), vec![2052.0]);
        // Mean 2052 / 5 = 410.4, rounded to the f16 grid (spacing 0.25 in [256, 512)): 410.5.
        assert_eq!(reduce(ReduceKind::Mean, &x, 0, false).to_f32(), vec![410.5]);
    }

    #[test]
    fn builder_rejects_bad_axes_and_integers() {
        let mut g = Graph::new("t");
        let x = g.input("x", TensorType::new(DType::F32, [2, 0])).unwrap();
        let i = g.input("i", TensorType::new(DType::I32, [2])).unwrap();
        assert_eq!(
            g.reduce_sum(x, 2, false).unwrap_err().to_string(),
            "reduce_sum: axis 2 is out of range or empty for f32[2,0]"
        );
        assert_eq!(
            g.reduce_max(x, 1, true).unwrap_err().to_string(),
            "reduce_max: axis 1 is out of range or empty for f32[2,0]"
        );
        assert_eq!(
            g.reduce_mean(i, 0, false).unwrap_err().to_string(),
            "reduce_mean: needs a float tensor, got i32[2]"
        );
    }

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
}
