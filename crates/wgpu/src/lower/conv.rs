//! conv1d: a tiled implicit matrix product on GPUs (on matrix units where the device has
//! them), a register-tiled direct loop on CPU adapters.

use super::matmul::product_coop;
use super::{KernelCtx, Lowering};
use crate::{KernelSpec, grid};
use susurrus_core::error::{Error, Result};
use susurrus_core::ops::Conv1d;

/// Invocations per workgroup of the CPU-adapter kernel (kernels/conv1d_cpu.wgsl).
const CPU_GROUP: usize = 64;

/// Output channels and positions of one workgroup's tile (`TILE` in the kernel).
const CONV_TILE: usize = 64;

/// Most workgroups along one dispatch dimension (WebGPU's default limit).
const MAX_GROUPS: usize = 65535;

crate::kernel_params! {
    /// Sizes and settings of one convolution; `red` is the reduction length `c_in * k`.
    pub struct Conv1dParams {
        pub c_in: u32,
        pub len: u32,
        pub c_out: u32,
        pub out_len: u32,
        pub k: u32,
        pub red: u32,
        pub stride: u32,
        pub padding: u32,
        pub dilation: u32,
    }
}

/// A tiled implicit matrix product (see `kernels/conv1d.wgsl`): one workgroup per
/// 64 output channels x 64 positions of one batch item; on CPU adapters a direct loop
/// with an 8 x 8 register tile per invocation (`kernels/conv1d_cpu.wgsl`).
pub fn conv1d(op: &Conv1d, ctx: &KernelCtx) -> Result<Lowering> {
    let (xs, ws, out) = (ctx.inputs[0].shape.dims(), ctx.inputs[1].shape.dims(), ctx.output.shape.dims());
    let r = xs.len();
    let (c_in, len, c_out, k) = (xs[r - 2], xs[r - 1], ws[0], ws[2]);
    let out_len = out[out.len() - 1];
    let batch = xs[..r - 2].iter().product::<usize>();
    let groups = if ctx.cpu {
        // One invocation per 8 channels x 8 positions, in workgroups of CPU_GROUP.
        let [x, y, _] = grid((out_len.div_ceil(8) * c_out.div_ceil(8)).div_ceil(CPU_GROUP));
        [x as usize, y as usize, batch]
    } else {
        [out_len.div_ceil(CONV_TILE), c_out.div_ceil(CONV_TILE), batch]
    };
    if groups.iter().any(|&g| g > MAX_GROUPS) {
        return Err(Error::Unsupported {
            op: format!("conv1d of {} into {}", ctx.inputs[0], ctx.output),
            backend: format!("wgpu (at most {MAX_GROUPS} tiles of {CONV_TILE} positions or channels, or batch items)"),
        });
    }
    let params = Conv1dParams {
        c_in: c_in as u32,
        len: len as u32,
        c_out: c_out as u32,
        out_len: out_len as u32,
        k: k as u32,
        red: (c_in * k) as u32,
        stride: op.stride as u32,
        padding: op.padding as u32,
        dilation: op.dilation as u32,
    };
    let bias = if ctx.inputs.len() == 3 { "ld2(co)" } else { "0.0" };
    if ctx.matrix && !ctx.cpu {
        // The matrix-unit product: A = the weight [C_out, C_in * taps], B = the input gathered
        // by tap (zero in the padding and past the reduction); rows and columns past the
        // output read the last ones (never stored).
        let spec = product_coop(&params)
            .define("TRANSPOSE_B", "false")
            .define("M", "p.c_out")
            .define("N", "p.out_len")
            .define("K", "p.red")
            .define("A_BASE", "0u")
            .define("B_BASE", "z * p.c_in * p.len")
            .define(
                "LOAD_A",
                "return select(0.0, ld1(min(row, p.c_out - 1u) * p.red + min(k, p.red - 1u)), k < p.red);",
            )
            .define(
                "LOAD_B",
                "let ci = k / p.k;\n    \
                 let pos = i32(min(col, p.out_len - 1u) * p.stride + (k - ci * p.k) * p.dilation) - i32(p.padding);\n    \
                 let inside = k < p.red && pos >= 0 && pos < i32(p.len);\n    \
                 return select(0.0, ld0(base + min(ci, p.c_in - 1u) * p.len + u32(clamp(pos, 0, i32(p.len) - 1))), inside);",
            )
            .define("OUT_AT", "(z * p.c_out + row) * p.out_len + col")
            .define("EPILOGUE", if ctx.inputs.len() == 3 { "v + ld2(row)" } else { "v" })
            .groups(groups[0] as u32, groups[1] as u32, groups[2] as u32);
        return Ok(Lowering::Kernel(spec));
    }
    let spec = if ctx.cpu {
        KernelSpec::new("conv1d_cpu", include_str!("../../kernels/conv1d_cpu.wgsl"), &params)
    } else {
        KernelSpec::new("conv1d", include_str!("../../kernels/conv1d.wgsl"), &params)
    };
    let spec = spec.define("BIAS", bias).groups(groups[0] as u32, groups[1] as u32, groups[2] as u32);
    Ok(Lowering::Kernel(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KernelSpec;
    use crate::lower::testing::{define, kernel_on, params, ty};
    use susurrus_core::ir::DType;

    /// The conv1d kernel (stride `stride`, padding 1) of `x` and `w`, for a CPU adapter when `cpu`.
    fn lower(x: &[usize], w: &[usize], stride: usize, cpu: bool) -> Result<KernelSpec> {
        let conv = Conv1d { stride, padding: 1, dilation: 1 };
        kernel_on(conv, &[ty(DType::F32, x), ty(DType::F32, w)], cpu)
    }

    fn groups(x: &[usize], w: &[usize], stride: usize) -> Result<[u32; 3]> {
        lower(x, w, stride, false).map(|spec| spec.workgroups)
    }

    #[test]
    fn kernel_tiles_64_positions_by_64_channels_per_batch_item() {
        // Whisper's conv2: 1500 positions -> 24 tiles, 384 channels -> 6 tiles.
        assert_eq!(groups(&[384, 3000], &[384, 384, 3], 2).unwrap(), [24, 6, 1]);
        assert_eq!(groups(&[3, 80, 3000], &[65, 80, 3], 1).unwrap(), [47, 2, 3]);
        // 64 * 65535 + 1 positions need one tile more than a dispatch dimension holds.
        let err = groups(&[1, 64 * 65535 + 1], &[1, 1, 3], 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "conv1d of f32[1,4194241] into f32[1,4194241] is not supported by the wgpu (at most 65535 tiles of 64 \
             positions or channels, or batch items) backend"
        );
    }

    #[test]
    fn matrix_units_take_the_product_kernel_with_the_gathered_input() {
        let conv = Conv1d { stride: 2, padding: 1, dilation: 1 };
        let inputs = [ty(DType::F32, &[384, 3000]), ty(DType::F16, &[384, 384, 3]), ty(DType::F16, &[384])];
        let refs: Vec<&susurrus_core::ir::TensorType> = inputs.iter().collect();
        let output = susurrus_core::ops::OpKind::infer(&conv, &refs).unwrap();
        let ctx =
            KernelCtx { inputs: &refs, output: &output, f16: true, cpu: false, matrix: true, subgroups: Some(32) };
        let spec = conv1d(&conv, &ctx).unwrap().kernels()[0].clone();
        // 1500 positions (24 tiles) x 384 channels (6 tiles); A is the weight, B the input.
        assert_eq!((spec.name, spec.workgroups), ("product_coop", [24, 6, 1]));
        assert_eq!(
            ["M", "N", "K", "TRANSPOSE_B", "EPILOGUE"].map(|k| define(&spec, k)),
            ["p.c_out", "p.out_len", "p.red", "false", "v + ld2(row)"]
        );
        assert!(define(&spec, "LOAD_A").contains("ld1("), "{}", define(&spec, "LOAD_A"));
        assert!(define(&spec, "LOAD_B").contains("ld0("), "{}", define(&spec, "LOAD_B"));
    }

    #[test]
    fn parameters_and_the_cpu_adapter_kernel() {
        let spec = lower(&[384, 3000], &[384, 384, 3], 2, false).unwrap();
        let want = Conv1dParams {
            c_in: 384,
            len: 3000,
            c_out: 384,
            out_len: 1500,
            k: 3,
            red: 1152,
            stride: 2,
            padding: 1,
            dilation: 1,
        };
        assert_eq!((spec.name, params::<Conv1dParams>(&spec)), ("conv1d", want));
        assert_eq!(define(&spec, "BIAS"), "0.0");
        // On a CPU adapter: 188 x 48 blocks of 8 x 8, 64 per workgroup.
        let spec = lower(&[384, 3000], &[384, 384, 3], 2, true).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("conv1d_cpu", [141, 1, 1]));
        // A bias is input 2, read per output channel.
        let conv = Conv1d { stride: 1, padding: 1, dilation: 1 };
        let inputs = [ty(DType::F32, &[80, 30]), ty(DType::F16, &[8, 80, 3]), ty(DType::F16, &[8])];
        assert_eq!(define(&kernel_on(conv, &inputs, false).unwrap(), "BIAS"), "ld2(co)");
    }
}
