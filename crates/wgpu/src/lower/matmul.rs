//! Matrix products: matmul and the fused matmul + bias (+ GELU) share one lowering, which
//! picks the tiled kernel (on matrix units where the device has them) or the matrix-vector
//! kernel (decoder steps), or on CPU adapters their register-blocked variants.

use super::reduce::lane_folds;
use super::{KernelCtx, Lowering};
use crate::{KernelSpec, grid, pack_dims};
use susurrus_core::error::{Error, Result};
use susurrus_core::ir::Shape;
use susurrus_core::ops::{MatMul, MatMulBias, OpKind};

crate::kernel_params! {
    /// One matmul dispatch (kernels/matmul.wgsl and kernels/gemv.wgsl): the output's batch
    /// dims and, per unit of each batch index, the element offset into `a` and `b` (0 where
    /// the operand is broadcast); the matrix sizes of one batch.
    pub struct MatMulParams {
        pub batch0: vec4u,
        pub batch1: vec4u,
        pub a0: vec4u,
        pub a1: vec4u,
        pub b0: vec4u,
        pub b1: vec4u,
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub batch_rank: u32,
    }
}

/// WebGPU's default limit on workgroups along one dispatch dimension.
const MAX_GROUPS: usize = 65535;

/// Output rows and columns of one workgroup of the tiled kernels (kernels/matmul.wgsl,
/// kernels/product_coop.wgsl).
const TILE: usize = 64;

/// The most rows a product computes with the matrix-vector kernel (kernels/gemv.wgsl) on a
/// GPU: a beam search's step (5 beams by default). CPU adapters take one row.
const GEMV_ROWS: usize = 8;

/// The shortest K for which several rows take the matrix-vector kernel: its lanes split K, so
/// a short one (attention's 64-wide heads) leaves them folding more than multiplying, where
/// the tiled kernel keeps them busy.
const GEMV_ROWS_MIN_K: usize = 256;

/// Invocations per workgroup of the CPU-adapter kernels (kernels/matmul_cpu.wgsl, gemv_cpu.wgsl).
const CPU_GROUP: usize = 64;

/// The parameters of `a x b` (inputs 0 and 1 of `ctx`) and the number of batches, which the
/// kernels take from the z workgroup id. When `b` has a single batch, the batches of `a`
/// are consecutive rows of one taller matrix: they are folded into M (fewer partial tiles,
/// one dispatch dimension free).
fn matmul_params(ctx: &KernelCtx) -> (MatMulParams, usize) {
    let (a, b, out) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape, &ctx.output.shape);
    let (ra, rb, ro) = (a.rank(), b.rank(), out.rank());
    let (mut m, k, n) = (a.dims()[ra - 2], a.dims()[ra - 1], out.dims()[ro - 1]);
    let mut batch = Shape::from(&out.dims()[..ro - 2]);
    let mut a_batch = Shape::from(&a.dims()[..ra - 2]);
    let mut b_batch = Shape::from(&b.dims()[..rb - 2]);
    if b_batch.numel() == 1 {
        // `b` broadcasts to every batch, so the output's batches are exactly `a`'s.
        m *= batch.numel();
        (batch, a_batch, b_batch) = (Shape(Vec::new()), Shape(Vec::new()), Shape(Vec::new()));
    }
    let offsets = |s: &Shape, per_batch: usize| {
        let strides: Vec<usize> = s.broadcast_strides(&batch).iter().map(|x| x * per_batch).collect();
        pack_dims(&strides)
    };
    let ([batch0, batch1], [a0, a1], [b0, b1]) =
        (pack_dims(batch.dims()), offsets(&a_batch, m * k), offsets(&b_batch, k * n));
    let params = MatMulParams {
        batch0,
        batch1,
        a0,
        a1,
        b0,
        b1,
        m: m as u32,
        n: n as u32,
        k: k as u32,
        batch_rank: batch.rank() as u32,
    };
    (params, batch.numel())
}

/// The dispatch of `act(a x b)` for matmul and the fused matmul + bias: the tiled kernel, or
/// the matrix-vector kernel when every batch has a single row (decoder steps); on CPU
/// adapters their `_cpu` variants; on devices with matrix units the tiled kernel's `_coop`
/// variant (f16 inputs, f32 sums). `epilogue` is
/// the WGSL expression applied to each accumulated value `v` of column `col`, which is stored at
/// output index `at`.
fn matmul_kernel(op: &str, ctx: &KernelCtx, transpose_b: bool, epilogue: &str) -> Result<Lowering> {
    let out = &ctx.output.shape;
    if out.rank() > 10 {
        return Err(Error::Unsupported {
            op: format!("{op} with {} batch dimensions", out.rank() - 2),
            backend: "wgpu (at most 8)".into(),
        });
    }
    let (params, batches) = matmul_params(ctx);
    let (m, n) = (params.m as usize, params.n as usize);
    let gemv = m == 1 || (!ctx.cpu && m <= GEMV_ROWS && params.k as usize >= GEMV_ROWS_MIN_K);
    let cols = if transpose_b { 8 } else { 64 };
    let [x, y, _] = if ctx.cpu {
        // One invocation per 4 columns (gemv) or 4 x 4 block, in workgroups of CPU_GROUP.
        let invocations = if gemv { n.div_ceil(4) } else { n.div_ceil(4) * m.div_ceil(4) };
        grid(invocations.div_ceil(CPU_GROUP))
    } else if gemv {
        grid(n.div_ceil(cols))
    } else {
        [n.div_ceil(TILE) as u32, m.div_ceil(TILE) as u32, 1]
    };
    if [x as usize, y as usize, batches].iter().any(|&g| g > MAX_GROUPS) {
        return Err(Error::Unsupported {
            op: format!("{op} of {} ({batches} batches of {m}x{n})", ctx.output),
            backend: format!("wgpu (at most {MAX_GROUPS} workgroups per dimension)"),
        });
    }
    let spec = if ctx.cpu && gemv {
        KernelSpec::new("gemv_cpu", include_str!("../../kernels/gemv_cpu.wgsl"), &params)
    } else if ctx.cpu {
        KernelSpec::new("matmul_cpu", include_str!("../../kernels/matmul_cpu.wgsl"), &params)
    } else if gemv {
        // A column's lanes are neighbouring threads when b is [N, K], `cols` apart otherwise.
        let lane_stride = if transpose_b { 1 } else { cols };
        let spec = KernelSpec::new("gemv", include_str!("../../kernels/gemv.wgsl"), &params);
        lane_folds(spec, ctx, lane_stride).define("COLS", format!("{cols}u")).define("ROWS", format!("{m}u"))
    } else if ctx.matrix {
        // Rows and columns past the matrix read its last one (never stored); k past K reads
        // zero: no branch, so a step's loads are all in flight.
        let load_b = if transpose_b { "ld1(base + c * p.k + kk)" } else { "ld1(base + kk * p.n + c)" };
        product_coop(&params)
            .define("M", "p.m")
            .define("N", "p.n")
            .define("K", "p.k")
            .define("A_BASE", "broadcast_offset(z, p.batch_rank, p.batch0, p.batch1, p.a0, p.a1)")
            .define("B_BASE", "broadcast_offset(z, p.batch_rank, p.batch0, p.batch1, p.b0, p.b1)")
            .define("LOAD_A", "return select(0.0, ld0(base + min(row, p.m - 1u) * p.k + min(k, p.k - 1u)), k < p.k);")
            .define(
                "LOAD_B",
                format!("let c = min(col, p.n - 1u);\n    let kk = min(k, p.k - 1u);\n    return select(0.0, {load_b}, k < p.k);"),
            )
            .define("OUT_AT", "(z * p.m + row) * p.n + col")
    } else {
        KernelSpec::new("matmul", include_str!("../../kernels/matmul.wgsl"), &params)
    };
    let spec =
        spec.define("TRANSPOSE_B", transpose_b.to_string()).define("EPILOGUE", epilogue).groups(x, y, batches as u32);
    Ok(Lowering::Kernel(spec))
}

/// The matrix-unit product kernel (kernels/product_coop.wgsl), which matmul and conv1d fill
/// with their own loads.
pub fn product_coop(params: &impl crate::KernelParams) -> KernelSpec {
    KernelSpec::new("product_coop", include_str!("../../kernels/product_coop.wgsl"), params)
}

pub fn matmul(op: &MatMul, ctx: &KernelCtx) -> Result<Lowering> {
    matmul_kernel(op.name(), ctx, op.transpose_b, "v")
}

/// The matmul kernels with the bias (input 2), GELU and the residual (input 3, of the output's
/// shape: read at the output index `at`) applied to each accumulated value before it is stored.
pub fn matmul_bias(op: &MatMulBias, ctx: &KernelCtx) -> Result<Lowering> {
    let act = if op.gelu { "gelu_f32(v + ld2(col))" } else { "v + ld2(col)" };
    let epilogue = if op.residual { format!("{act} + ld3(at)") } else { act.to_string() };
    matmul_kernel(op.name(), ctx, op.transpose_b, &epilogue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::testing::{define, kernel_on, params, ty};
    use susurrus_core::ir::{DType, TensorType};

    fn lower(transpose_b: bool, a: &[usize], b: &[usize]) -> Result<KernelSpec> {
        lower_on(false, transpose_b, a, b)
    }

    /// The lowering on a GPU adapter, or on a CPU adapter when `cpu`.
    fn lower_on(cpu: bool, transpose_b: bool, a: &[usize], b: &[usize]) -> Result<KernelSpec> {
        kernel_on(MatMul { transpose_b }, &[ty(DType::F32, a), ty(DType::F16, b)], cpu)
    }

    #[test]
    fn a_shared_weight_folds_the_batches_into_rows() {
        // [2, 3, 1500, 384] x [1536, 384]^T: one 9000 x 1536 product, 24 x 141 tiles of 64.
        let spec = lower(true, &[2, 3, 1500, 384], &[1536, 384]).unwrap();
        assert_eq!(spec.name, "matmul");
        assert_eq!(spec.workgroups, [24, 141, 1]);
        let p = params::<MatMulParams>(&spec);
        assert_eq!((p.m, p.n, p.k, p.batch_rank), (9000, 1536, 384, 0));
        assert_eq!(spec.defines, vec![("TRANSPOSE_B", "true".to_string()), ("EPILOGUE", "v".to_string())]);
    }

    #[test]
    fn broadcast_batches_get_element_offsets() {
        // a [2, 1, 5, 4] x b [3, 4, 7] -> [2, 3, 5, 7]: batch (i, j) reads a at i * 5 * 4 and
        // b at j * 4 * 7.
        let spec = lower(false, &[2, 1, 5, 4], &[3, 4, 7]).unwrap();
        let p = params::<MatMulParams>(&spec);
        assert_eq!((p.m, p.n, p.k, p.batch_rank), (5, 7, 4, 2));
        assert_eq!((p.batch0, p.a0, p.b0), ([2, 3, 0, 0], [20, 0, 0, 0], [0, 28, 0, 0]));
        assert_eq!(spec.workgroups, [1, 1, 6]);
    }

    #[test]
    fn cpu_adapters_get_register_block_kernels() {
        // 9000 x 1536: 2250 x 384 blocks of 4 x 4, 64 per workgroup.
        let spec = lower_on(true, true, &[2, 3, 1500, 384], &[1536, 384]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("matmul_cpu", [13500, 1, 1]));
        assert_eq!(params::<MatMulParams>(&spec).m, 9000);
        // 51864 logits: 12966 invocations of 4 columns.
        let spec = lower_on(true, true, &[1, 1, 384], &[51864, 384]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("gemv_cpu", [203, 1, 1]));
        // Batched matrix-vector products keep one z per batch: 375 invocations of 4 columns.
        let spec = lower_on(true, false, &[6, 1, 64], &[6, 64, 1500]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("gemv_cpu", [6, 1, 6]));
    }

    #[test]
    fn matrix_units_take_the_tiled_products_but_not_single_rows() {
        let lower = |a: &[usize], b: &[usize]| {
            let inputs = [ty(DType::F32, a), ty(DType::F16, b)];
            let refs: Vec<&TensorType> = inputs.iter().collect();
            let output = MatMul { transpose_b: true }.infer(&refs).unwrap();
            let ctx =
                KernelCtx { inputs: &refs, output: &output, f16: true, cpu: false, matrix: true, subgroups: Some(32) };
            super::matmul(&MatMul { transpose_b: true }, &ctx).unwrap().kernels()[0].clone()
        };
        // An encoder layer's fc1: 1500 x 1536, the same 64 x 64 tiles as the f32 kernel.
        let spec = lower(&[1500, 384], &[1536, 384]);
        assert_eq!((spec.name, spec.workgroups), ("product_coop", [24, 24, 1]));
        // A decoder step's product stays a matrix-vector product.
        assert_eq!(lower(&[1, 384], &[1536, 384]).name, "gemv");
    }

    #[test]
    fn single_rows_use_the_matrix_vector_kernel() {
        // Logits of a decoder step: 51864 columns, 8 per workgroup with a transposed weight.
        let spec = lower(true, &[1, 1, 384], &[51864, 384]).unwrap();
        assert_eq!(spec.name, "gemv");
        assert_eq!(spec.workgroups, [6483, 1, 1]);
        assert!(spec.defines.contains(&("COLS", "8u".to_string())));
        // Batched rows against batched matrices stay per batch: [6, 1, 64] x [6, 64, 1500].
        let spec = lower(false, &[6, 1, 64], &[6, 64, 1500]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("gemv", [24, 1, 6]));
        assert_eq!(params::<MatMulParams>(&spec).b0, [64 * 1500, 0, 0, 0]);
        assert_eq!(define(&spec, "ROWS"), "1u");
    }

    #[test]
    fn a_beam_search_step_reads_each_weight_once_for_every_beam() {
        // Five beams' logits: [5, 1, 1280] x [51866, 1280]^T folds to 5 rows, one gemv.
        let spec = lower(true, &[5, 1, 1280], &[51866, 1280]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("gemv", [6484, 1, 1]));
        assert_eq!((define(&spec, "ROWS"), params::<MatMulParams>(&spec).m), ("5u", 5));
        assert_eq!(lower(false, &[8, 1280], &[1280, 1280]).unwrap().name, "gemv");
        // Nine rows are a tiled product, as are five over a K of 64 (five beams' queries
        // against a head's keys), and CPU adapters keep their one-row kernel.
        assert_eq!(lower(true, &[9, 1280], &[1280, 1280]).unwrap().name, "matmul");
        assert_eq!(lower(true, &[20, 5, 64], &[20, 1500, 64]).unwrap().name, "matmul");
        assert_eq!(lower_on(true, true, &[5, 1280], &[1280, 1280]).unwrap().name, "matmul_cpu");
    }

    #[test]
    fn a_column_of_neighbouring_lanes_is_summed_on_subgroups() {
        let with_subgroups = |transpose_b: bool, b: &[usize]| {
            let (a, b) = (ty(DType::F32, &[1, 384]), ty(DType::F16, b));
            let output = MatMul { transpose_b }.infer(&[&a, &b]).unwrap();
            let ctx = KernelCtx {
                inputs: &[&a, &b],
                output: &output,
                f16: true,
                cpu: false,
                matrix: false,
                subgroups: Some(32),
            };
            match matmul_kernel("matmul", &ctx, transpose_b, "v").unwrap() {
                Lowering::Kernel(spec) => spec,
                other => panic!("{other:?}"),
            }
        };
        // b [N, K]: a column's 32 lanes are neighbours, one subgroup of the device's 32.
        let spec = with_subgroups(true, &[1536, 384]);
        assert!(spec.prelude.contains("subgroupShuffleXor"));
        assert_eq!(define(&spec, "SUBGROUP_MIN"), "32u");
        // b [K, N]: neighbouring threads are neighbouring columns; the lanes fold in a tree.
        let spec = with_subgroups(false, &[384, 1536]);
        assert!(spec.prelude.contains("workgroupBarrier") && !spec.prelude.contains("subgroupShuffleXor"));
        // Without subgroups, the tree.
        assert_eq!(lower(true, &[1, 384], &[1536, 384]).unwrap().prelude, spec.prelude);
    }

    #[test]
    fn dispatches_beyond_the_workgroup_limit_are_unsupported() {
        let err = lower(false, &[70000, 1, 2], &[70000, 2, 3]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "matmul of f32[70000,1,3] (70000 batches of 1x3) is not supported by the wgpu \
             (at most 65535 workgroups per dimension) backend"
        );
    }

    #[test]
    fn the_kernel_adds_the_bias_and_gelu_before_storing() {
        let a = ty(DType::F32, &[9, 4]);
        let w = ty(DType::F16, &[2, 4]);
        let bias = ty(DType::F16, &[2]);
        for (gelu, epilogue) in [(false, "v + ld2(col)"), (true, "gelu_f32(v + ld2(col))")] {
            let op = MatMulBias { transpose_b: true, gelu, residual: false };
            let spec = kernel_on(op, &[a.clone(), w.clone(), bias.clone()], false).unwrap();
            assert_eq!(spec.name, "matmul");
            assert!(spec.defines.contains(&("EPILOGUE", epilogue.to_string())), "{:?}", spec.defines);
            assert_eq!(define(&spec, "TRANSPOSE_B"), "true");
        }
    }
}
