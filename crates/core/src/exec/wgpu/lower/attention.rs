//! Fused attention: one kernel per (batch, head) and block of queries, keys and values
//! staged in workgroup memory; decoder steps (one query) take a kernel that keeps every
//! key's score in workgroup memory, and CPU adapters one without workgroup memory.

use super::{KernelCtx, Lowering};
use crate::error::{Error, Result};
use crate::exec::wgpu::{KernelSpec, grid, pack_dims};
use crate::ir::Shape;
use crate::ops::{Attention, MaskKind};

/// The most keys the one-query kernel (kernels/attention_decode.wgsl) takes: their scores
/// live in workgroup memory, 12 KiB of WebGPU's default 16 KiB at this many.
const DECODE_MAX_KEYS: usize = 3072;

/// Invocations per workgroup of the CPU-adapter kernel (kernels/attention_cpu.wgsl).
const CPU_GROUP: usize = 16;

/// Loop iterations llvmpipe (Mesa's CPU driver behind lavapipe) allows one invocation in
/// total, across all its loops; past it the loops stop early and the results are wrong.
const LLVMPIPE_LOOP_LIMIT: usize = 65535;

/// Whether the CPU-adapter kernel's loops stay within [`LLVMPIPE_LOOP_LIMIT`]: per key it runs
/// one iteration plus one per four elements of D and of Dv. Longer sequences take the GPU
/// kernel, which spreads the keys over a workgroup.
fn cpu_kernel_fits(sk: usize, d: usize, dv: usize) -> bool {
    let (d4, dv4) = (d.div_ceil(4), dv.div_ceil(4));
    sk.saturating_mul(d4 + dv4 + 1).saturating_add(d4 + 2 * dv4) < LLVMPIPE_LOOP_LIMIT
}

/// Largest head size (D and Dv) of the wgpu kernel: a thread keeps a query row in registers
/// and a key block of this width must fit in WebGPU's default 16 KiB of workgroup memory.
const MAX_HEAD: usize = 128;

crate::kernel_params! {
    /// One attention dispatch (kernels/attention.wgsl): the leading (batch, head) dims, the
    /// mask's strides over them and along Sq and Sk (0 where it broadcasts), the sequence
    /// lengths, the flattened batch count and the query blocks per batch.
    pub struct AttentionParams {
        pub lead0: vec4u,
        pub lead1: vec4u,
        pub mask0: vec4u,
        pub mask1: vec4u,
        pub sq: u32,
        pub sk: u32,
        pub batch: u32,
        pub qblocks: u32,
        pub lead_rank: u32,
        pub mask_sq: u32,
        pub mask_sk: u32,
        pub scale: f32,
    }
}

/// How the attention kernel divides its work (see kernels/attention.wgsl).
#[derive(Clone, Copy, Debug, PartialEq)]
struct KernelConfig {
    /// Queries per workgroup of 256 threads.
    bq: usize,
    /// Keys per block.
    bk: usize,
    /// Threads of a query that split the output columns, in vec4 chunks (the rest of its
    /// threads split the keys).
    cg: usize,
}

impl KernelConfig {
    /// 32 queries per workgroup share key/value blocks staged in workgroup memory, 8 threads
    /// per query; blocks of 16 keys, 8 when a head is wider than 64. Decoder steps run the
    /// same kernel with one live query per workgroup.
    fn new(d: usize, dv: usize) -> KernelConfig {
        KernelConfig { bq: 32, bk: if d.max(dv) <= 64 { 16 } else { 8 }, cg: 8 }
    }

    /// The CPU-adapter kernel (kernels/attention_cpu.wgsl): four queries per invocation,
    /// which share every K and V row they load; no blocks or lanes.
    fn cpu() -> KernelConfig {
        KernelConfig { bq: 4, bk: 1, cg: 1 }
    }

    /// vec4s of the staged key block (rows padded by one vec4).
    fn kt_len(&self, d: usize) -> usize {
        self.bk * (d.div_ceil(4) + 1)
    }

    /// vec4s of the staged value block.
    fn vt_len(&self, dv: usize) -> usize {
        self.bk * dv.div_ceil(4)
    }

    /// Bytes of workgroup memory the kernel declares: the key and value blocks, the weights
    /// (`bq` rows of `bk + 1`) and 256 floats for reductions.
    #[cfg(test)]
    fn workgroup_bytes(&self, d: usize, dv: usize) -> usize {
        16 * (self.kt_len(d) + self.vt_len(dv)) + 4 * self.bq * (self.bk + 1) + 4 * 256
    }
}

/// The fused kernel (kernels/attention.wgsl), its work split chosen by [`KernelConfig`];
/// head sizes past [`MAX_HEAD`] are unsupported.
pub fn attention(op: &Attention, ctx: &KernelCtx) -> Result<Lowering> {
    let (q, k, v) = (&ctx.inputs[0].shape, &ctx.inputs[1].shape, &ctx.inputs[2].shape);
    let r = q.rank();
    let (sq, d, sk, dv) = (q.dims()[r - 2], q.dims()[r - 1], k.dims()[r - 2], v.dims()[r - 1]);
    if !(1..=MAX_HEAD).contains(&d) || !(1..=MAX_HEAD).contains(&dv) || r > 8 {
        return Err(Error::Unsupported {
            op: format!("attention on q {q}, v {v} (D {d}, Dv {dv}, rank {r})"),
            backend: format!("wgpu (head sizes 1 to {MAX_HEAD}, rank at most 8)"),
        });
    }
    let lead = Shape::from(&q.dims()[..r - 2]);
    let mut scores = lead.0.clone();
    scores.extend([sq, sk]);
    let mask_strides = match ctx.inputs.get(3) {
        Some(m) => m.shape.broadcast_strides(&Shape(scores)),
        None => vec![0; r],
    };
    let cpu = ctx.cpu && cpu_kernel_fits(sk, d, dv);
    let cfg = if cpu { KernelConfig::cpu() } else { KernelConfig::new(d, dv) };
    let qblocks = sq.div_ceil(cfg.bq);
    let ([lead0, lead1], [mask0, mask1]) = (pack_dims(lead.dims()), pack_dims(&mask_strides[..r - 2]));
    let params = AttentionParams {
        lead0,
        lead1,
        mask0,
        mask1,
        sq: sq as u32,
        sk: sk as u32,
        batch: lead.numel() as u32,
        qblocks: qblocks as u32,
        lead_rank: (r - 2) as u32,
        mask_sq: mask_strides[r - 2] as u32,
        mask_sk: mask_strides[r - 1] as u32,
        scale: op.scale,
    };
    let mask = match op.mask {
        MaskKind::None => 0,
        MaskKind::Additive => 1,
        MaskKind::Causal => 2,
    };
    // How every kernel variant reads the additive mask: input 3, or no input.
    let mask_load = if op.mask == MaskKind::Additive { "ld3(e)" } else { "0.0" };
    if cpu {
        let [x, y, _] = grid((lead.numel() * qblocks).div_ceil(CPU_GROUP));
        let spec =
            KernelSpec::new("attention_cpu", include_str!("../../../../../../kernels/attention_cpu.wgsl"), &params)
                .define("D", d.to_string())
                .define("DV", dv.to_string())
                .define("MASK", mask.to_string())
                .define("MASK_LOAD", mask_load)
                .groups(x, y, 1);
        return Ok(Lowering::Kernel(spec));
    }
    if sq == 1 && sk <= DECODE_MAX_KEYS {
        let [x, y, _] = grid(lead.numel());
        let spec = KernelSpec::new(
            "attention_decode",
            include_str!("../../../../../../kernels/attention_decode.wgsl"),
            &params,
        )
        .define("D", d.to_string())
        .define("DV", dv.to_string())
        .define("MASK", mask.to_string())
        .define("MASK_LOAD", mask_load)
        .define("MAXK", sk.to_string())
        .groups(x, y, 1);
        return Ok(Lowering::Kernel(spec));
    }
    let [x, y, _] = grid(lead.numel() * qblocks);
    let spec = KernelSpec::new("attention", include_str!("../../../../../../kernels/attention.wgsl"), &params)
        .define("BQ", cfg.bq.to_string())
        .define("BK", cfg.bk.to_string())
        .define("D", d.to_string())
        .define("DV", dv.to_string())
        .define("CG", cfg.cg.to_string())
        .define("MASK", mask.to_string())
        .define("MASK_LOAD", mask_load)
        .define("KT_LEN", cfg.kt_len(d).to_string())
        .define("VT_LEN", cfg.vt_len(dv).to_string())
        .groups(x, y, 1);
    Ok(Lowering::Kernel(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::wgpu::lower::testing::{define, kernel_on};
    use crate::ir::{DType, TensorType};

    fn lower(op: &Attention, inputs: &[TensorType]) -> Result<KernelSpec> {
        kernel_on(op.clone(), inputs, false)
    }

    #[test]
    fn kernel_configs_fit_workgroup_memory() {
        // WebGPU's default limit is 16 KiB; check every head size.
        for d in 1..=MAX_HEAD {
            for dv in 1..=MAX_HEAD {
                let cfg = KernelConfig::new(d, dv);
                assert!(cfg.workgroup_bytes(d, dv) <= 16384, "{cfg:?} d {d} dv {dv}");
                // Every lane scores at least one key and the value slices split the block evenly.
                assert_eq!(cfg.bk % (256 / cfg.bq), 0, "{cfg:?}");
                assert_eq!((256 / cfg.bq) % cfg.cg, 0, "{cfg:?}");
            }
        }
        // D = Dv = 64 with many queries: keys 16 * 17 vec4s, values 16 * 16, weights 32 * 17 floats.
        assert_eq!(KernelConfig::new(64, 64).workgroup_bytes(64, 64), 16 * (272 + 256) + 4 * 32 * 17 + 1024);
    }

    #[test]
    fn the_cpu_kernel_is_chosen_only_within_llvmpipes_loop_limit() {
        // Whisper's longest attention (1500 keys of 64) fits: 1500 * 33 + 48 iterations.
        assert!(cpu_kernel_fits(1500, 64, 64));
        assert!(cpu_kernel_fits(1984, 64, 64));
        assert!(!cpu_kernel_fits(1985, 64, 64));
        assert!(!cpu_kernel_fits(3000, 64, 64));
        assert!(!cpu_kernel_fits(usize::MAX, 64, 64));
    }

    #[test]
    fn cpu_adapters_take_the_cpu_kernel_where_its_loops_fit() {
        let t = |dims: &[usize]| TensorType::new(DType::F32, dims);
        let op = Attention { scale: 0.125, mask: MaskKind::None };
        // Whisper's encoder self-attention: 6 heads of 1500 queries, 4 queries per invocation
        // and 16 invocations per workgroup.
        let spec = kernel_on(op.clone(), &[t(&[6, 1500, 64]), t(&[6, 1500, 64]), t(&[6, 1500, 64])], true).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("attention_cpu", [141, 1, 1]));
        assert_eq!((define(&spec, "D"), define(&spec, "MASK"), define(&spec, "MASK_LOAD")), ("64", "0", "0.0"));
        // 3000 keys would stop llvmpipe's loops early: the GPU kernel, 47 query blocks per head.
        let spec = kernel_on(op, &[t(&[6, 1500, 64]), t(&[6, 3000, 64]), t(&[6, 3000, 64])], true).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("attention", [282, 1, 1]));
    }

    #[test]
    fn kernel_parameters_follow_the_shapes() {
        // Two batches of 3 heads, Sq = 33, Sk = 65, D = 64, Dv = 33, a key-padding mask
        // [2, 1, 1, 65]: its strides over the scores [2, 3, 33, 65] are [65, 0, 0, 1].
        let t = |dims: &[usize]| TensorType::new(DType::F32, dims);
        let op = Attention { scale: 0.125, mask: MaskKind::Additive };
        let spec =
            lower(&op, &[t(&[2, 3, 33, 64]), t(&[2, 3, 65, 64]), t(&[2, 3, 65, 33]), t(&[2, 1, 1, 65])]).unwrap();
        let words: &[u32] = bytemuck::cast_slice(&spec.params);
        // lead dims [2, 3], mask lead strides [65, 0], then sq, sk, batch, qblocks (33 / 32
        // rounded up), lead rank, mask strides along Sq and Sk, scale.
        assert_eq!(&words[..4], &[2, 3, 0, 0]);
        assert_eq!(&words[8..12], &[65, 0, 0, 0]);
        assert_eq!(&words[16..23], &[33, 65, 6, 2, 2, 0, 1]);
        assert_eq!(f32::from_bits(words[23]), 0.125);
        // 6 heads of 2 query blocks.
        assert_eq!(spec.workgroups, [12, 1, 1]);
        assert_eq!((define(&spec, "BQ"), define(&spec, "MASK_LOAD")), ("32", "ld3(e)"));

        // A decoder step: the one-query kernel, a workgroup per head, the keys' scores in
        // workgroup memory.
        let op = Attention { scale: 0.125, mask: MaskKind::Causal };
        let spec = lower(&op, &[t(&[6, 1, 64]), t(&[6, 448, 64]), t(&[6, 448, 33])]).unwrap();
        assert_eq!(spec.workgroups, [6, 1, 1]);
        assert_eq!((define(&spec, "MAXK"), define(&spec, "DV")), ("448", "33"));
        assert_eq!((define(&spec, "MASK"), define(&spec, "MASK_LOAD")), ("2", "0.0"));
        // More keys than its workgroup memory holds: the general kernel, one (partly used)
        // query block per head.
        let spec = lower(&op, &[t(&[6, 1, 64]), t(&[6, 3073, 64]), t(&[6, 3073, 33])]).unwrap();
        assert_eq!(spec.workgroups, [6, 1, 1]);
        assert_eq!((define(&spec, "BQ"), define(&spec, "CG")), ("32", "8"));
    }

    #[test]
    fn heads_beyond_the_kernel_are_unsupported() {
        let t = |dims: &[usize]| TensorType::new(DType::F32, dims);
        let op = Attention { scale: 1.0, mask: MaskKind::None };
        let err = lower(&op, &[t(&[2, 3, 129]), t(&[2, 5, 129]), t(&[2, 5, 8])]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "attention on q [2,3,129], v [2,5,8] (D 129, Dv 8, rank 3) is not supported by the wgpu \
             (head sizes 1 to 128, rank at most 8) backend"
        );
        assert!(lower(&op, &[t(&[2, 3, 128]), t(&[2, 5, 128]), t(&[2, 5, 128])]).is_ok());
    }
}
