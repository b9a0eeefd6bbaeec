//! Plan lowering: each scheduled op becomes device work — kernel launches (the CUDA C of
//! `kernels/`) and cuBLAS products — with every address resolved. Lowering is pure
//! arithmetic on addresses, so it runs (and is tested) without a GPU; the executor records
//! what it returns once and replays it.
//!
//! One file per op family, beside its kernel file: `elementwise` (unary, binary, compare,
//! where, fused programs, cast, scalar reads), `layout` (permute, slice, concat, gather, KV
//! writes), `reduce` (reductions, argmax, top_k, softmax), `norm` (layer norms), `conv`
//! (conv1d), `matmul` (matmul, matmul + bias, and the product helper the others use),
//! `attention`.

pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod layout;
pub mod matmul;
pub mod norm;
pub mod reduce;

use std::cell::Cell;

use susurrus_core::ir::TensorType;
use susurrus_core::ops::Op;
use susurrus_core::{DType, Result};

use super::params::{In, KernelParams, Out, ParamsInfo, dtype_code, kind};

/// Threads per block of one-dimensional kernels (`BLOCK` in kernels/common.cuh).
pub const BLOCK: u32 = 256;

/// How products run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// f16 operands on the tensor cores with f32 accumulation: f32 activations are rounded to
    /// f16 on their way into a product (as PyTorch's fp16 inference does), f16 weights are
    /// used as stored. Everything outside products stays f32.
    #[default]
    F16,
    /// Every product in f32 arithmetic (f16 weights are widened once, when uploaded): the
    /// results the reference interpreter gives, to f32 rounding.
    F32,
}

/// A tensor on the device as lowering sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// Device address of element 0.
    pub ptr: u64,
    /// How elements are stored ([`kind`]): arena values are 32-bit words, f16 ones widened;
    /// weights and constants keep their dtype.
    pub kind: u32,
    pub ty: TensorType,
}

impl Operand {
    /// The operand as a kernel input.
    pub fn input(&self) -> In {
        In { ptr: self.ptr, kind: self.kind, pad: 0 }
    }

    /// The operand as a kernel output (a 32-bit word per element, of its dtype).
    pub fn output(&self) -> Out {
        Out { ptr: self.ptr, dtype: dtype_code(self.ty.dtype), pad: 0 }
    }

    /// An operand of the arena: 32-bit words of `ty`'s dtype.
    pub fn arena(ptr: u64, ty: TensorType) -> Self {
        let kind = match ty.dtype {
            DType::F32 | DType::F16 => kind::F32,
            DType::I32 => kind::I32,
            DType::U32 => kind::U32,
            DType::Q8 => unreachable!("the arena holds no q8 value (the graph refuses it)"),
        };
        Operand { ptr, kind, ty }
    }
}

/// Device memory an op may use while it runs (attention scores, operands converted for
/// the tensor cores). Every op's scratch starts at the same base: ops run one after another.
#[derive(Debug)]
pub struct Scratch {
    base: u64,
    used: Cell<u64>,
}

impl Scratch {
    pub fn new(base: u64) -> Self {
        Scratch { base, used: Cell::new(0) }
    }

    /// `bytes` of scratch, 256-byte aligned.
    pub fn take(&self, bytes: usize) -> u64 {
        let at = self.used.get().next_multiple_of(256);
        self.used.set(at + bytes as u64);
        self.base + at
    }

    /// Bytes taken so far.
    pub fn used(&self) -> u64 {
        self.used.get()
    }
}

/// What lowering one op sees.
pub struct LowerCtx<'a> {
    /// The op's inputs, in order.
    pub inputs: &'a [Operand],
    /// Where the result goes.
    pub output: &'a Operand,
    /// Device address of the run's runtime scalars (u32 each, in `ScalarId` order): kernels
    /// read them there, so replaying recorded work with new scalar values needs no new launch.
    pub scalars: u64,
    pub precision: Precision,
    pub scratch: &'a Scratch,
}

impl LowerCtx<'_> {
    /// Input `k` as a kernel input.
    pub fn input(&self, k: usize) -> In {
        self.inputs[k].input()
    }

    /// The result as a kernel output.
    pub fn out(&self) -> Out {
        self.output.output()
    }
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelLaunch {
    /// The kernel's name (`extern "C" __global__` in kernels/).
    pub name: &'static str,
    /// Its parameter struct's C name, which the kernel takes by value.
    pub params_name: &'static str,
    pub params: Vec<u8>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic shared memory bytes.
    pub shared_bytes: u32,
}

impl KernelLaunch {
    /// A launch of `name` with `params`, one block of [`BLOCK`] threads until sized.
    pub fn new<P: KernelParams>(name: &'static str, params: &P) -> Self {
        KernelLaunch {
            name,
            params_name: P::NAME,
            params: params.to_bytes(),
            grid: [1, 1, 1],
            block: [BLOCK, 1, 1],
            shared_bytes: 0,
        }
    }

    /// Enough blocks of [`BLOCK`] threads for one thread per element of `n` (kernels find
    /// their element with `global_index()` and return past `n`).
    pub fn threads(mut self, n: usize) -> Self {
        self.block = [BLOCK, 1, 1];
        self.grid = [n.div_ceil(BLOCK as usize).max(1) as u32, 1, 1];
        self
    }

    /// Exactly this grid of blocks.
    pub fn grid(mut self, x: u32, y: u32, z: u32) -> Self {
        self.grid = [x.max(1), y.max(1), z.max(1)];
        self
    }

    /// Threads per block.
    pub fn block(mut self, x: u32, y: u32, z: u32) -> Self {
        self.block = [x, y, z];
        self
    }

    /// Dynamic shared memory.
    pub fn shared(mut self, bytes: u32) -> Self {
        self.shared_bytes = bytes;
        self
    }
}

/// One cuBLAS product, in cuBLAS's column-major terms: `C = alpha * op(A) op(B) + beta * C`
/// for `batch` matrices `stride_*` elements apart. C is f32.
#[derive(Clone, Debug, PartialEq)]
pub struct CublasGemm {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub alpha: f32,
    pub beta: f32,
    pub a: u64,
    pub lda: i32,
    pub stride_a: i64,
    pub b: u64,
    pub ldb: i32,
    pub stride_b: i64,
    pub c: u64,
    pub ldc: i32,
    pub stride_c: i64,
    pub batch: i32,
    /// A and B are f16 (tensor cores, f32 accumulation); otherwise f32 with f32 arithmetic.
    pub f16_inputs: bool,
}

/// Device work, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Launch {
    Kernel(KernelLaunch),
    Gemm(CublasGemm),
}

/// The device work of `op`; nothing for leaves (uploaded or copied in) and views. A q8
/// weight is read as stored by a gather and by a decoder step's product (`matmul_gemv`);
/// for every other op it is first dequantized into scratch (`elementwise::dequantize_q8`).
pub fn lower(op: &Op, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    if !ctx.inputs.iter().any(|o| o.ty.dtype == DType::Q8) {
        return lower_op(op, ctx);
    }
    let reads_q8 = |k: usize| match op {
        Op::Gather(_) => k == 0,
        Op::MatMul(m) => k == 1 && matmul::gemv_reads_q8(ctx, m.transpose_b),
        Op::MatMulBias(m) => k == 1 && matmul::gemv_reads_q8(ctx, m.transpose_b),
        _ => false,
    };
    let mut launches = Vec::new();
    let mut inputs = Vec::with_capacity(ctx.inputs.len());
    for (k, operand) in ctx.inputs.iter().enumerate() {
        if operand.ty.dtype == DType::Q8 && !reads_q8(k) {
            let (widened, launch) = elementwise::dequantize_q8(operand, ctx, op.name())?;
            launches.push(launch);
            inputs.push(widened);
        } else {
            inputs.push(operand.clone());
        }
    }
    launches.extend(lower_op(op, &LowerCtx { inputs: &inputs, ..*ctx })?);
    Ok(launches)
}

fn lower_op(op: &Op, ctx: &LowerCtx) -> Result<Vec<Launch>> {
    match op {
        Op::Input(_) | Op::Param(_) | Op::Const(_) | Op::State(_) | Op::Reshape(_) => Ok(Vec::new()),
        Op::Unary(o) => elementwise::unary(o, ctx),
        Op::Binary(o) => elementwise::binary(o, ctx),
        Op::Compare(o) => elementwise::compare(o, ctx),
        Op::Select(o) => elementwise::select(o, ctx),
        Op::FusedElementwise(o) => elementwise::fused(o, ctx),
        Op::Cast(o) => elementwise::cast(o, ctx),
        Op::ScalarRead(o) => elementwise::scalar(o, ctx),
        Op::Permute(o) => layout::permute(o, ctx),
        Op::Slice(o) => layout::slice(o, ctx),
        Op::Concat(o) => layout::concat(o, ctx),
        Op::Gather(o) => layout::gather(o, ctx),
        Op::KvWrite(o) => layout::kv_write(o, ctx),
        Op::Reduce(o) => reduce::reduce(o, ctx),
        Op::Argmax(o) => reduce::argmax(o, ctx),
        Op::TopK(o) => reduce::top_k(o, ctx),
        Op::Softmax(o) => reduce::softmax(o, ctx),
        Op::LayerNorm(o) => norm::layer_norm(o, ctx),
        Op::AddLayerNorm(o) => norm::add_layer_norm(o, ctx),
        Op::Conv1d(o) => conv::conv1d(o, ctx),
        Op::MatMul(o) => matmul::matmul(o, ctx),
        Op::MatMulBias(o) => matmul::matmul_bias(o, ctx),
        Op::Attention(o) => attention::attention(o, ctx),
    }
}

/// The kernel files, in the order the module holds them.
pub const SOURCES: [(&str, &str); 8] = [
    ("elementwise.cu", include_str!("../../kernels/elementwise.cu")),
    ("layout.cu", include_str!("../../kernels/layout.cu")),
    ("reduce.cu", include_str!("../../kernels/reduce.cu")),
    ("norm.cu", include_str!("../../kernels/norm.cu")),
    ("conv.cu", include_str!("../../kernels/conv.cu")),
    ("matmul.cu", include_str!("../../kernels/matmul.cu")),
    ("attention.cu", include_str!("../../kernels/attention.cu")),
    ("device.cu", include_str!("../../kernels/device.cu")),
];

/// Every parameter struct the kernels take.
pub fn all_params() -> Vec<ParamsInfo> {
    let mut all = Vec::new();
    all.extend(elementwise::params());
    all.extend(layout::params());
    all.extend(reduce::params());
    all.extend(norm::params());
    all.extend(conv::params());
    all.extend(matmul::params());
    all.extend(attention::params());
    all
}

/// What the lowering tests share: types and a context with made-up addresses.
#[cfg(test)]
pub(crate) mod testing {
    use susurrus_core::ir::TensorType;
    use susurrus_core::{DType, Result};

    use super::{Launch, LowerCtx, Operand, Precision, Scratch};

    pub fn ty(dtype: DType, dims: &[usize]) -> TensorType {
        TensorType::new(dtype, dims.to_vec())
    }

    /// Runs `f` on a context with `inputs`, the output of type `out` at `out_ptr`, runtime
    /// scalars at 0x9000 and scratch at `scratch` (f32 products).
    pub fn lower_at(
        inputs: &[Operand],
        out_ptr: u64,
        out: TensorType,
        scratch: u64,
        f: impl Fn(&LowerCtx) -> Result<Vec<Launch>>,
    ) -> Result<Vec<Launch>> {
        let output = Operand::arena(out_ptr, out);
        let scratch = Scratch::new(scratch);
        f(&LowerCtx { inputs, output: &output, scalars: 0x9000, precision: Precision::F32, scratch: &scratch })
    }
}
