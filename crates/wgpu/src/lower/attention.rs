//! Fused attention: one kernel per (batch, head) and block of queries, keys and values
//! staged in workgroup memory (on matrix units where the device has them and heads are 64
//! wide); a few queries (decoder steps, short prompts) take two passes, a workgroup per query
//! and split of keys and then the merge of the splits; CPU adapters a kernel without
//! workgroup memory.

use super::{KernelCtx, Lowering};
use crate::{KernelSpec, ScratchUse, grid, pack_dims};
use susurrus_core::error::{Error, Result};
use susurrus_core::ir::Shape;
use susurrus_core::ops::{Attention, MaskKind};

/// The most queries that take the split kernels (kernels/attention_split.wgsl and
/// attention_combine.wgsl: a workgroup per query and 64 keys): decoder steps and short
/// prompts, where the general kernels' blocks of 32 or 64 queries would leave most lanes idle.
const SPLIT_MAX_QUERIES: usize = 16;

/// Keys per split of the split kernel (its workgroup size).
const SPLIT_KEYS: usize = 64;

/// The head size of the matrix-unit kernel (kernels/attention_coop.wgsl), every Whisper's; other
/// heads take the f32 kernel.
const COOP_HEAD: usize = 64;

/// Queries per workgroup of the matrix-unit kernel: 16 per subgroup, four subgroups.
const COOP_QUERIES: usize = 64;

/// Keys per block of the matrix-unit kernel; its splits are whole blocks.
const COOP_KEYS: usize = 64;

/// About how many workgroups the matrix-unit kernel is given by splitting the keys: with a
/// workgroup per head and block of queries (144 for Whisper's encoder: 6 heads, 24 blocks of
/// 64 of its 1500 positions), each walked all 1500 keys while most multiprocessors' warps
/// sat idle.
const COOP_WORKGROUPS: usize = 1024;

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
        pub splits: u32,
        pub chunk: u32,
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
    let split = !cpu && sq <= SPLIT_MAX_QUERIES;
    let coop = !cpu && !split && ctx.matrix && d == COOP_HEAD && dv == COOP_HEAD;
    let cfg = if cpu { KernelConfig::cpu() } else { KernelConfig::new(d, dv) };
    let qblocks = sq.div_ceil(if coop { COOP_QUERIES } else { cfg.bq });
    let batch = lead.numel();
    // The split kernels cut the keys into splits of `chunk`: 64 for a few queries; for the
    // matrix kernel, blocks of 64 shared out so that about COOP_WORKGROUPS workgroups run.
    let chunk = if split {
        SPLIT_KEYS
    } else if coop {
        let splits = COOP_WORKGROUPS.div_ceil(batch * qblocks).clamp(1, sk.div_ceil(COOP_KEYS));
        sk.div_ceil(splits).next_multiple_of(COOP_KEYS)
    } else {
        sk
    };
    let splits = sk.div_ceil(chunk).max(1);
    let ([lead0, lead1], [mask0, mask1]) = (pack_dims(lead.dims()), pack_dims(&mask_strides[..r - 2]));
    let params = AttentionParams {
        lead0,
        lead1,
        mask0,
        mask1,
        sq: sq as u32,
        sk: sk as u32,
        batch: batch as u32,
        qblocks: qblocks as u32,
        lead_rank: (r - 2) as u32,
        mask_sq: mask_strides[r - 2] as u32,
        mask_sk: mask_strides[r - 1] as u32,
        scale: op.scale,
        splits: splits as u32,
        chunk: chunk as u32,
    };
    let mask = match op.mask {
        MaskKind::None => 0,
        MaskKind::Additive => 1,
        MaskKind::Causal => 2,
    };
    // How every kernel variant reads the additive mask: input 3, or no input.
    let mask_load = if op.mask == MaskKind::Additive { "ld3(e)" } else { "0.0" };
    // What every kernel that scores keys is told: the head sizes and the mask.
    let scoring = |spec: KernelSpec| {
        spec.define("D", d.to_string())
            .define("DV", dv.to_string())
            .define("MASK", mask.to_string())
            .define("MASK_LOAD", mask_load)
    };
    if cpu {
        let [x, y, _] = grid((batch * qblocks).div_ceil(CPU_GROUP));
        let spec = KernelSpec::new("attention_cpu", include_str!("../../kernels/attention_cpu.wgsl"), &params);
        return Ok(Lowering::Kernel(scoring(spec).groups(x, y, 1)));
    }
    // The second pass of the split kernels: the splits' partial softmaxes merged.
    let combine = || {
        KernelSpec::new("attention_combine", include_str!("../../kernels/attention_combine.wgsl"), &params)
            .define("DV", dv.to_string())
            .define("SCRATCH_INPUT", ctx.inputs.len().to_string())
            .threads(batch * sq * dv)
            .scratch(ScratchUse::Reads)
    };
    // The split kernels: `name` writes each split's partial softmax to the scratch from
    // `workgroups` workgroups, then the combine pass merges them.
    let passes = |name: &'static str, source: &'static str, workgroups: usize| {
        let [x, y, _] = grid(workgroups);
        let first = scoring(KernelSpec::new(name, source, &params)).groups(x, y, 1).scratch(ScratchUse::Writes);
        Lowering::Passes { scratch_bytes: 4 * batch * sq * splits * (dv + 2), kernels: vec![first, combine()] }
    };
    if split {
        let source = include_str!("../../kernels/attention_split.wgsl");
        return Ok(passes("attention_split", source, batch * sq * splits));
    }
    if coop {
        let source = include_str!("../../kernels/attention_coop.wgsl");
        return Ok(passes("attention_coop", source, batch * qblocks * splits));
    }
    let [x, y, _] = grid(batch * qblocks);
    let spec = scoring(KernelSpec::new("attention", include_str!("../../kernels/attention.wgsl"), &params))
        .define("BQ", cfg.bq.to_string())
        .define("BK", cfg.bk.to_string())
        .define("CG", cfg.cg.to_string())
        .define("KT_LEN", cfg.kt_len(d).to_string())
        .define("VT_LEN", cfg.vt_len(dv).to_string())
        .groups(x, y, 1);
    Ok(Lowering::Kernel(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::testing::{define, kernel_on, kernels_on, lower_on};
    use susurrus_core::ir::{DType, TensorType};
    use susurrus_core::ops::OpKind;

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
    fn matrix_units_take_heads_of_64_but_not_a_few_queries() {
        let lower = |sq: usize, d: usize| {
            let f32 = |dims: &[usize]| TensorType::new(DType::F32, dims.to_vec());
            let inputs = [f32(&[6, sq, d]), f32(&[6, 1500, d]), f32(&[6, 1500, d])];
            let refs: Vec<&TensorType> = inputs.iter().collect();
            let op = Attention { scale: 0.125, mask: MaskKind::None };
            let output = op.infer(&refs).unwrap();
            let ctx =
                KernelCtx { inputs: &refs, output: &output, f16: true, cpu: false, matrix: true, subgroups: Some(32) };
            attention(&op, &ctx).unwrap().kernels()[0].clone()
        };
        // The encoder's self-attention: 6 heads x 24 blocks of 64 queries x 8 splits of the
        // keys (1024 / 144 workgroups rounded up; 1500 / 8 keys rounded up to whole blocks of
        // 64: 192), then the splits merged.
        let spec = lower(1500, 64);
        assert_eq!((spec.name, spec.workgroups, spec.scratch), ("attention_coop", [1152, 1, 1], ScratchUse::Writes));
        let p = bytemuck::pod_read_unaligned::<AttentionParams>(&spec.params);
        assert_eq!((p.qblocks, p.splits, p.chunk), (24, 8, 192));
        assert_eq!(lower(1, 64).name, "attention_split");
        assert_eq!(lower(16, 64).name, "attention_split");
        assert_eq!(lower(17, 64).name, "attention_coop");
        assert_eq!(lower(1500, 32).name, "attention");
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

        // A decoder step: two passes, a workgroup per head and split of 64 keys (448 keys:
        // 7 splits), partial softmaxes of 33 + 2 words each in the scratch; then one thread
        // per output element merges them.
        let op = Attention { scale: 0.125, mask: MaskKind::Causal };
        let inputs = [t(&[6, 1, 64]), t(&[6, 448, 64]), t(&[6, 448, 33])];
        let lowering = lower_on(&op.clone().into(), &inputs, false).unwrap();
        let Lowering::Passes { scratch_bytes, kernels } = &lowering else { panic!("{lowering:?}") };
        assert_eq!(*scratch_bytes, 4 * 6 * 7 * 35);
        let (split, combine) = (&kernels[0], &kernels[1]);
        assert_eq!((split.name, split.scratch, split.workgroups), ("attention_split", ScratchUse::Writes, [42, 1, 1]));
        assert_eq!((define(split, "MASK"), define(split, "MASK_LOAD"), define(split, "DV")), ("2", "0.0", "33"));
        assert_eq!(bytemuck::pod_read_unaligned::<AttentionParams>(&split.params).splits, 7);
        assert_eq!(
            (combine.name, combine.scratch, combine.workgroups),
            ("attention_combine", ScratchUse::Reads, [1, 1, 1])
        );
        // The scratch is read as the input after q, k and v.
        assert_eq!(define(combine, "SCRATCH_INPUT"), "3");
        // Sixteen queries still split; seventeen take the general kernel.
        let split_16 = kernels_on(op.clone(), &[t(&[6, 16, 64]), t(&[6, 448, 64]), t(&[6, 448, 33])], false).unwrap();
        assert_eq!(split_16[0].workgroups, [6 * 16 * 7, 1, 1]);
        let spec = lower(&op, &[t(&[6, 17, 64]), t(&[6, 448, 64]), t(&[6, 448, 33])]).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("attention", [6, 1, 1]));
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
        assert!(kernels_on(op, &[t(&[2, 3, 128]), t(&[2, 5, 128]), t(&[2, 5, 128])], false).is_ok());
    }
}
