//! Data movement: permute, slice, concat, gather and KV-cache writes copy 32-bit words, one
//! thread per element written. Leaves and reshapes run nothing (see [`super::lower`]).

use super::{KernelCtx, Lowering};
use crate::{KernelSpec, pack_dims};
use susurrus_core::error::{Error, Result};
use susurrus_core::exec::index::collapse;
use susurrus_core::ir::DType;
use susurrus_core::ops::{Concat, Gather, KvWrite, Permute, Slice};

crate::kernel_params! {
    /// The output's dimensions and, for each output axis, the input stride it walks.
    pub struct PermuteParams {
        pub dims0: vec4u,
        pub dims1: vec4u,
        pub strides0: vec4u,
        pub strides1: vec4u,
        pub n: u32,
        pub rank: u32,
    }
}

/// The input's axes merged where the permutation keeps them contiguous (see [`collapse`]);
/// more than the kernel's 8 axes after merging are unsupported.
pub fn permute(op: &Permute, ctx: &KernelCtx) -> Result<Lowering> {
    let x = &ctx.inputs[0].shape;
    let in_strides = x.strides();
    let dims: Vec<usize> = op.perm.iter().map(|&p| x.dims()[p]).collect();
    let strides: Vec<usize> = op.perm.iter().map(|&p| in_strides[p]).collect();
    let (dims, strides) = collapse(&dims, &strides);
    if dims.len() > 8 {
        return Err(Error::Unsupported {
            op: format!("permute of {} axes that cannot be merged", dims.len()),
            backend: "wgpu (at most 8)".into(),
        });
    }
    let n = ctx.output.numel();
    let ([dims0, dims1], [strides0, strides1]) = (pack_dims(&dims), pack_dims(&strides));
    let params = PermuteParams { dims0, dims1, strides0, strides1, n: n as u32, rank: dims.len() as u32 };
    let spec = KernelSpec::new("permute", include_str!("../../kernels/permute.wgsl"), &params).threads(n);
    Ok(Lowering::Kernel(spec))
}

crate::kernel_params! {
    /// A slice as words of `[outer, dim, inner]` blocks: `block` words kept out of every
    /// `in_block`, from word `start` on.
    pub struct SliceParams {
        pub n: u32,
        pub block: u32,
        pub in_block: u32,
        pub start: u32,
    }
}

pub fn slice(op: &Slice, ctx: &KernelCtx) -> Result<Lowering> {
    let dims = ctx.inputs[0].shape.dims();
    let inner = dims[op.axis + 1..].iter().product::<usize>();
    let n = ctx.output.numel();
    let params = SliceParams {
        n: n as u32,
        block: ((op.end - op.start) * inner) as u32,
        in_block: (dims[op.axis] * inner) as u32,
        start: (op.start * inner) as u32,
    };
    let spec = KernelSpec::new("slice", include_str!("../../kernels/slice.wgsl"), &params).threads(n);
    Ok(Lowering::Kernel(spec))
}

/// Most inputs of one concat dispatch: eight storage bindings, one of them the output.
const MAX_PARTS: usize = 7;

crate::kernel_params! {
    /// Concat as words of `[outer, total, inner]` blocks of `block` words: input k's part of a
    /// block is `blocks[k]` words ending at word `ends[k]`.
    pub struct ConcatParams {
        pub ends0: vec4u,
        pub ends1: vec4u,
        pub blocks0: vec4u,
        pub blocks1: vec4u,
        pub n: u32,
        pub block: u32,
    }
}

/// WGSL that sets `v` to the word at position `r` of output block `o`, read from the one of
/// `parts` inputs whose part of the block holds `r`.
fn pick_chain(parts: usize) -> String {
    let field = |name: &str, k: usize| format!("p.{name}{}[{}]", k / 4, k % 4);
    let mut chain = String::new();
    for k in 0..parts {
        let start = if k == 0 { String::new() } else { format!(" - {}", field("ends", k - 1)) };
        let read = format!("v = ldw{k}(o * {} + r{start});", field("blocks", k));
        if k + 1 == parts {
            chain += &format!("{{ {read} }}");
        } else {
            chain += &format!("if (r < {}) {{ {read} }} else ", field("ends", k));
        }
    }
    chain
}

pub fn concat(op: &Concat, ctx: &KernelCtx) -> Result<Lowering> {
    let parts = ctx.inputs.len();
    if parts > MAX_PARTS {
        return Err(Error::Unsupported {
            op: format!("concat of {parts} inputs"),
            backend: format!("wgpu (one dispatch binds at most {MAX_PARTS} inputs)"),
        });
    }
    let dims = ctx.output.shape.dims();
    let inner = dims[op.axis + 1..].iter().product::<usize>();
    let blocks: Vec<usize> = ctx.inputs.iter().map(|t| t.shape.dims()[op.axis] * inner).collect();
    let ends: Vec<usize> = blocks
        .iter()
        .scan(0, |end, b| {
            *end += b;
            Some(*end)
        })
        .collect();
    let n = ctx.output.numel();
    let ([ends0, ends1], [blocks0, blocks1]) = (pack_dims(&ends), pack_dims(&blocks));
    let params = ConcatParams { ends0, ends1, blocks0, blocks1, n: n as u32, block: (dims[op.axis] * inner) as u32 };
    let spec = KernelSpec::new("concat", include_str!("../../kernels/concat.wgsl"), &params)
        .define("PICK", pick_chain(parts))
        .threads(n);
    Ok(Lowering::Kernel(spec))
}

crate::kernel_params! {
    /// Output elements, table rows and words per row.
    pub struct GatherParams {
        pub n: u32,
        pub rows: u32,
        pub row_len: u32,
    }
}

/// Ids are clamped into `0..V`: a GPU kernel cannot raise the reference's out-of-range error,
/// so an id outside the table reads the nearest row (`0` or `V - 1`). A table with no rows has
/// nothing to clamp to: every lookup in it would fail, so the plan is rejected here.
pub fn gather(_op: &Gather, ctx: &KernelCtx) -> Result<Lowering> {
    let (table, ids) = (ctx.inputs[0], ctx.inputs[1]);
    let rows = table.shape.dims()[0];
    let n = ctx.output.numel();
    if rows == 0 && n > 0 {
        return Err(Error::Unsupported { op: format!("gather from the empty table {table}"), backend: "wgpu".into() });
    }
    let id = match ids.dtype {
        DType::I32 => "u32(clamp(ldi1(k), 0, i32(p.rows) - 1))",
        _ => "min(ldu1(k), p.rows - 1u)",
    };
    let params = GatherParams {
        n: n as u32,
        rows: rows as u32,
        row_len: table.shape.dims()[1..].iter().product::<usize>() as u32,
    };
    let spec =
        KernelSpec::new("gather", include_str!("../../kernels/gather.wgsl"), &params).define("ID", id).threads(n);
    Ok(Lowering::Kernel(spec))
}

crate::kernel_params! {
    /// The value's element count, its extent `len` along the axis, the buffer's extent `cap`
    /// there, the product `inner` of the dimensions after the axis, and the offset's scalar.
    pub struct KvWriteParams {
        pub n: u32,
        pub len: u32,
        pub cap: u32,
        pub inner: u32,
        pub scalar: u32,
    }
}

/// The `scalar` parameter of a write without an offset scalar (kernels/kv_write.wgsl).
const NO_OFFSET: u32 = u32::MAX;

/// One thread per element of `value`. The buffer (input 0) shares the output's storage,
/// so the executor binds it once, as the output, and only the value's rows are written.
/// Unlike the CPU reference, a write past the capacity cannot fail on the GPU: it writes
/// nothing and leaves the buffer unchanged (see kernels/kv_write.wgsl).
pub fn kv_write(op: &KvWrite, ctx: &KernelCtx) -> Result<Lowering> {
    let value = ctx.inputs[1];
    let dims = ctx.output.shape.dims();
    let params = KvWriteParams {
        n: value.numel() as u32,
        len: value.shape.dims()[op.axis] as u32,
        cap: dims[op.axis] as u32,
        inner: dims[op.axis + 1..].iter().product::<usize>() as u32,
        scalar: op.offset.map_or(NO_OFFSET, |s| s.0),
    };
    let spec = KernelSpec::new("kv_write", include_str!("../../kernels/kv_write.wgsl"), &params).threads(value.numel());
    Ok(Lowering::Kernel(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::testing::{define, kernel, params, ty};
    use susurrus_core::ir::ScalarId;

    #[test]
    fn permute_walks_the_merged_axes() {
        // [2,3,4] -> perm [2,0,1]: the transpose of a [6, 4] matrix (see `collapse`).
        let spec = kernel(Permute { perm: vec![2, 0, 1] }, &[ty(DType::F32, &[2, 3, 4])]).unwrap();
        let p = params::<PermuteParams>(&spec);
        assert_eq!((spec.name, spec.workgroups), ("permute", [1, 1, 1]));
        assert_eq!((p.dims0, p.strides0, p.n, p.rank), ([4, 6, 0, 0], [1, 4, 0, 0], 24, 2));
    }

    #[test]
    fn wgpu_takes_eight_axes_after_merging() {
        let kernel = |dims: &[usize], perm: &[usize]| {
            kernel(Permute { perm: perm.to_vec() }, &[ty(DType::F32, dims)]).map(|_| ())
        };
        // Reversing nine axes of 2 leaves no neighbours contiguous; moving only the last of
        // nine axes to the front is a 2-D transpose.
        let err = kernel(&[2; 9], &[8, 7, 6, 5, 4, 3, 2, 1, 0]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "permute of 9 axes that cannot be merged is not supported by the wgpu (at most 8) backend"
        );
        assert!(kernel(&[2; 9], &[8, 0, 1, 2, 3, 4, 5, 6, 7]).is_ok());
    }

    #[test]
    fn slice_and_concat_copy_blocks_of_words() {
        // Rows 1..3 of axis 1 of [2,4,3]: blocks of 6 words out of every 12, from word 3.
        let spec = kernel(Slice { axis: 1, start: 1, end: 3 }, &[ty(DType::F16, &[2, 4, 3])]).unwrap();
        assert_eq!(spec.name, "slice");
        assert_eq!(params::<SliceParams>(&spec), SliceParams { n: 12, block: 6, in_block: 12, start: 3 });
        // [2,1] ++ [2,3] ++ [2,2] along axis 1: blocks of 6 words, the parts 1, 3 and 2 long.
        let parts = [ty(DType::I32, &[2, 1]), ty(DType::I32, &[2, 3]), ty(DType::I32, &[2, 2])];
        let spec = kernel(Concat { axis: 1 }, &parts).unwrap();
        let p = params::<ConcatParams>(&spec);
        assert_eq!((spec.name, p.ends0, p.blocks0, p.n, p.block), ("concat", [1, 4, 6, 0], [1, 3, 2, 0], 12, 6));
        assert_eq!(define(&spec, "PICK"), pick_chain(3));
    }

    #[test]
    fn pick_chain_reads_each_part_from_its_own_input() {
        assert_eq!(pick_chain(1), "{ v = ldw0(o * p.blocks0[0] + r); }");
        assert_eq!(
            pick_chain(6),
            "if (r < p.ends0[0]) { v = ldw0(o * p.blocks0[0] + r); } \
             else if (r < p.ends0[1]) { v = ldw1(o * p.blocks0[1] + r - p.ends0[0]); } \
             else if (r < p.ends0[2]) { v = ldw2(o * p.blocks0[2] + r - p.ends0[1]); } \
             else if (r < p.ends0[3]) { v = ldw3(o * p.blocks0[3] + r - p.ends0[2]); } \
             else if (r < p.ends1[0]) { v = ldw4(o * p.blocks1[0] + r - p.ends0[3]); } \
             else { v = ldw5(o * p.blocks1[1] + r - p.ends1[0]); }"
        );
    }

    #[test]
    fn more_inputs_than_bindings_is_unsupported_on_wgpu() {
        let part = ty(DType::F32, &[2, 1]);
        let err = kernel(Concat { axis: 1 }, &vec![part.clone(); 8]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "concat of 8 inputs is not supported by the wgpu (one dispatch binds at most 7 inputs) backend"
        );
        assert!(kernel(Concat { axis: 1 }, &vec![part; 7]).is_ok());
    }

    #[test]
    fn gather_clamps_ids_in_their_own_type() {
        let spec = kernel(Gather, &[ty(DType::F16, &[10, 4]), ty(DType::I32, &[3])]).unwrap();
        assert_eq!(params::<GatherParams>(&spec), GatherParams { n: 12, rows: 10, row_len: 4 });
        assert_eq!(define(&spec, "ID"), "u32(clamp(ldi1(k), 0, i32(p.rows) - 1))");
        let spec = kernel(Gather, &[ty(DType::F32, &[10, 4, 2]), ty(DType::U32, &[2, 3])]).unwrap();
        assert_eq!(params::<GatherParams>(&spec), GatherParams { n: 48, rows: 10, row_len: 8 });
        assert_eq!(define(&spec, "ID"), "min(ldu1(k), p.rows - 1u)");
    }

    #[test]
    fn wgpu_rejects_an_empty_table() {
        let err = kernel(Gather, &[ty(DType::F32, &[0, 4]), ty(DType::I32, &[2])]).unwrap_err();
        assert_eq!(err.to_string(), "gather from the empty table f32[0,4] is not supported by the wgpu backend");
    }

    #[test]
    fn kv_writes_take_the_offset_scalar_or_none() {
        // A [2,1,4] value into a [2,8,4] cache along axis 1: one thread per value element.
        let inputs = [ty(DType::F32, &[2, 8, 4]), ty(DType::F32, &[2, 1, 4])];
        let spec = kernel(KvWrite { axis: 1, offset: Some(ScalarId(5)) }, &inputs).unwrap();
        assert_eq!((spec.name, spec.workgroups), ("kv_write", [1, 1, 1]));
        assert_eq!(params::<KvWriteParams>(&spec), KvWriteParams { n: 8, len: 1, cap: 8, inner: 4, scalar: 5 });
        let spec = kernel(KvWrite { axis: 1, offset: None }, &inputs).unwrap();
        assert_eq!(params::<KvWriteParams>(&spec).scalar, NO_OFFSET);
    }
}
