//! What an op asks of the GPU (a [`KernelSpec`]) and how the executor turns it into a WGSL
//! module: a generated preamble (bindings, typed load/store helpers, parameters, runtime
//! scalars) followed by the op's kernel file from `kernels/`, with `$NAME` placeholders filled.
//!
//! Binding layout of every dispatch (group 0):
//! - 0: the dispatch's parameters (`p`), a 256-byte slot of one uniform buffer, dynamic offset;
//! - 1: the runtime scalars of the run (`runtime_scalar(i)`);
//! - 2..: storage bindings, one per distinct tensor range: inputs in order, then the output.
//!
//! Kernels never name bindings. They read input `k` with `ld{k}(i) -> f32`, `ldi{k}(i) -> i32`,
//! `ldu{k}(i) -> u32` or `ldw{k}(i) -> u32` (the value's 32-bit word, f16 widened), and write the
//! output with `st(i, f32)`, `sti(i, i32)`, `stu(i, u32)` or `stw(i, u32)`. Arena and state
//! tensors are 32-bit words (f16 values kept as f32, rounded to f16 precision on store); f16
//! weights are read natively with `shader-f16` or unpacked from pairs without it.

use std::fmt::Write;

use super::params::KernelParams;
use susurrus_core::exec::link::MAX_RUNTIME_SCALARS;
use susurrus_core::ir::{DType, TensorType};

/// Workgroup size of one-dimensional kernels (SwiftShader allows at most 256 invocations).
pub const WORKGROUP: u32 = 256;

/// A kernel invocation an op asks for.
#[derive(Clone, Debug)]
pub struct KernelSpec {
    /// The kernel's name (its file is `kernels/<name>.wgsl`).
    pub name: &'static str,
    /// The kernel file's text.
    pub source: &'static str,
    /// A helper file the kernel builds on, placed before it (the axis kernels' lane folds,
    /// `kernels/lanes*.wgsl`), or "".
    pub prelude: &'static str,
    /// `$KEY` placeholders of the source and their values; part of the pipeline key.
    pub defines: Vec<(&'static str, String)>,
    /// The parameter block's bytes and WGSL declaration.
    pub params: Vec<u8>,
    pub params_wgsl: &'static str,
    /// Workgroups to dispatch.
    pub workgroups: [u32; 3],
    /// How the kernel uses the executable's scratch buffer (one pass of a [`Lowering::Passes`]).
    ///
    /// [`Lowering::Passes`]: super::lower::Lowering::Passes
    pub scratch: ScratchUse,
}

/// How a pass of a multi-pass op uses the scratch buffer (f32 words shared by every op of an
/// executable: ops run one after another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScratchUse {
    /// Not at all.
    None,
    /// The kernel writes the scratch with `st`/`stw` instead of the op's output.
    Writes,
    /// The kernel reads the scratch as one more input, after the op's (`ld{n}` for an op of `n`
    /// inputs), and writes the op's output.
    Reads,
}

impl KernelSpec {
    pub fn new(name: &'static str, source: &'static str, params: &impl KernelParams) -> Self {
        fn wgsl_of<P: KernelParams>(_: &P) -> &'static str {
            P::WGSL
        }
        KernelSpec {
            name,
            source,
            prelude: "",
            defines: Vec::new(),
            params: bytemuck::bytes_of(params).to_vec(),
            params_wgsl: wgsl_of(params),
            workgroups: [1, 1, 1],
            scratch: ScratchUse::None,
        }
    }

    /// This pass uses the scratch buffer as `scratch` says.
    pub fn scratch(mut self, scratch: ScratchUse) -> Self {
        self.scratch = scratch;
        self
    }

    /// Places `prelude` before the kernel (its placeholders are filled too).
    pub fn prelude(mut self, prelude: &'static str) -> Self {
        self.prelude = prelude;
        self
    }

    /// Fills `$key` in the source with `value`.
    pub fn define(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.defines.push((key, value.into()));
        self
    }

    /// Enough workgroups of [`WORKGROUP`] threads for `n` invocations, spread over x and y
    /// (each dimension holds at most 65535 workgroups). Kernels recover the index with
    /// `linear_index(wid, nwg, lid)`.
    pub fn threads(mut self, n: usize) -> Self {
        self.workgroups = grid(n.div_ceil(WORKGROUP as usize));
        self
    }

    /// Exactly these workgroups.
    pub fn groups(mut self, x: u32, y: u32, z: u32) -> Self {
        self.workgroups = [x, y, z];
        self
    }
}

/// `groups` workgroups laid out as x * y with x <= 65535.
pub fn grid(groups: usize) -> [u32; 3] {
    const MAX: usize = 65535;
    let groups = groups.max(1);
    let x = groups.min(MAX);
    [x as u32, groups.div_ceil(x) as u32, 1]
}

/// How a storage binding's elements are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    /// One 32-bit word per element holding a value of this dtype (`F16` means an f16 value
    /// kept widened to f32).
    Word(DType),
    /// f16 pairs packed in `u32`s, read with `unpack2x16float` (no `shader-f16`).
    F16Packed,
    /// Native `f16` (the device has `shader-f16`).
    F16Native,
    /// A q8 weight: int8 values packed four to a word, then one f32 scale per row of
    /// `row_len` values from word `scales_at` on; loads dequantize.
    Q8 { row_len: u32, scales_at: u32 },
}

impl Elem {
    /// How a leaf of type `ty` is stored: f16 natively with `shader-f16` (`f16`), else as
    /// packed pairs, unless the link keeps it as f32 words (`f16_words`); q8 as itself;
    /// everything else as 32-bit words.
    pub fn of(ty: &TensorType, f16_words: bool, f16: bool) -> Elem {
        match ty.dtype {
            DType::F16 if !f16_words && f16 => Elem::F16Native,
            DType::F16 if !f16_words => Elem::F16Packed,
            DType::Q8 => Elem::Q8 {
                row_len: (ty.numel().checked_div(ty.q8_rows()).unwrap_or(0)) as u32,
                scales_at: ty.numel().div_ceil(4) as u32,
            },
            dtype => Elem::Word(dtype),
        }
    }
}

/// One storage binding of a dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BindingKind {
    pub elem: Elem,
    /// Arena and state tensors are bound read-write (WebGPU forbids mixing read-only and
    /// writable bindings of one buffer in a dispatch); weights and constants read-only.
    pub writable: bool,
}

/// Where a dispatch reads one of its op's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputAt {
    /// Storage binding `j`.
    Binding(usize),
    /// Runtime scalar `n`, from the run's scalar table: the value of a `scalar` read, which
    /// then needs no kernel of its own (a decoder step reads nine).
    Scalar(u32),
}

/// Everything that decides a pipeline: the kernel, its prelude, its placeholders, its
/// bindings, where each input is read and the output's dtype.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    pub kernel: &'static str,
    pub prelude: &'static str,
    pub defines: Vec<(&'static str, String)>,
    pub bindings: Vec<BindingKind>,
    /// For each op input, where it is read.
    pub inputs: Vec<InputAt>,
    pub output_dtype: DType,
    pub params_wgsl: &'static str,
}

/// Helpers every module gets (broadcast indexing, erf, GELU, ...).
const COMMON: &str = include_str!("../kernels/common.wgsl");

// The runtime scalars are read as whole `vec4<u32>`s.
const _: () = assert!(MAX_RUNTIME_SCALARS.is_multiple_of(4));

/// The WGSL module for `key` with the kernel `source` (after the key's prelude).
pub fn module_source(key: &PipelineKey, source: &str) -> String {
    let mut s = String::new();
    // Directives must open the module: a kernel's own `enable` lines (f16 arithmetic,
    // cooperative matrices) go first, with `enable f16` once when a binding is native f16.
    let (enables, source) = split_enables(source);
    let mut directives: Vec<&str> = enables;
    if key.bindings.iter().any(|b| b.elem == Elem::F16Native) && !directives.contains(&"enable f16;") {
        directives.insert(0, "enable f16;");
    }
    for d in directives {
        s.push_str(d);
        s.push('\n');
    }
    s.push_str(key.params_wgsl);
    s.push_str("@group(0) @binding(0) var<uniform> p: Params;\n");
    let _ = writeln!(s, "@group(0) @binding(1) var<uniform> runtime: array<vec4<u32>, {}>;", MAX_RUNTIME_SCALARS / 4);
    s.push_str("fn runtime_scalar(i: u32) -> u32 { return runtime[i / 4u][i % 4u]; }\n");
    s.push_str(
        "fn linear_index(wid: vec3<u32>, nwg: vec3<u32>, lid: vec3<u32>) -> u32 {\n    \
         return (wid.x + wid.y * nwg.x) * 256u + lid.x;\n}\n",
    );
    for (j, b) in key.bindings.iter().enumerate() {
        let access = if b.writable { "read_write" } else { "read" };
        let ty = if b.elem == Elem::F16Native { "f16" } else { "u32" };
        let _ = writeln!(s, "@group(0) @binding({}) var<storage, {access}> b{j}: array<{ty}>;", j + 2);
    }
    for (k, &at) in key.inputs.iter().enumerate() {
        let [f, i, u, w] = match at {
            InputAt::Binding(j) => loads(key.bindings[j].elem, j),
            InputAt::Scalar(n) => {
                let word = format!("runtime_scalar({n}u)");
                [format!("f32({word})"), format!("bitcast<i32>({word})"), word.clone(), word]
            }
        };
        let _ = writeln!(
            s,
            "fn ld{k}(i: u32) -> f32 {{ return {f}; }}\nfn ldi{k}(i: u32) -> i32 {{ return {i}; }}\n\
             fn ldu{k}(i: u32) -> u32 {{ return {u}; }}\nfn ldw{k}(i: u32) -> u32 {{ return {w}; }}"
        );
    }
    // Four-element loads, for the CPU-adapter kernels (emitted only where a kernel uses them,
    // so the other modules are unchanged).
    if source.contains("ld4_") {
        for (k, &at) in key.inputs.iter().enumerate() {
            let body = match at {
                InputAt::Binding(j) => load4(Some((key.bindings[j].elem, j)), k),
                InputAt::Scalar(_) => load4(None, k),
            };
            let _ = writeln!(s, "fn ld4_{k}(i: u32) -> vec4<f32> {{ {body} }}");
        }
    }
    let out = key.bindings.len() - 1;
    let store = match key.output_dtype {
        DType::F32 => "bitcast<u32>(v)".to_string(),
        DType::F16 => "bitcast<u32>(unpack2x16float(pack2x16float(vec2<f32>(v, 0.0))).x)".to_string(),
        DType::I32 => "bitcast<u32>(i32(v))".to_string(),
        DType::U32 => "u32(v)".to_string(),
        DType::Q8 => unreachable!("no op computes a q8 value (the graph refuses it)"),
    };
    let _ = writeln!(
        s,
        "fn st(i: u32, v: f32) {{ b{out}[i] = {store}; }}\nfn sti(i: u32, v: i32) {{ b{out}[i] = bitcast<u32>(v); }}\n\
         fn stu(i: u32, v: u32) {{ b{out}[i] = v; }}\nfn stw(i: u32, v: u32) {{ b{out}[i] = v; }}"
    );
    s.push_str(COMMON);
    // Longest names first, so `$LOAD0` is not taken for `$LOAD` followed by `0`.
    let mut defines: Vec<_> = key.defines.iter().collect();
    defines.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    let mut body = format!("{}{source}", key.prelude);
    for (k, v) in defines {
        body = body.replace(&format!("${k}"), v);
    }
    s.push_str(&body);
    s
}

/// A kernel file's `enable ...;` lines and the rest of its text.
fn split_enables(source: &str) -> (Vec<&str>, String) {
    let mut enables = Vec::new();
    let mut rest = String::with_capacity(source.len());
    for line in source.lines() {
        if line.trim_start().starts_with("enable ") {
            enables.push(line.trim());
        } else {
            rest.push_str(line);
            rest.push('\n');
        }
    }
    (enables, rest)
}

/// The body of `ld4_{k}(i)`: elements `i..i + 4` of input `k` (stored as `elem` in binding `j`,
/// or a runtime scalar when `None`) as f32. Packed f16 pairs are read as two words when `i` is
/// even (the CPU drivers load storage lane by lane, so every word saved counts).
fn load4(binding: Option<(Elem, usize)>, k: usize) -> String {
    let each = format!("vec4<f32>(ld{k}(i), ld{k}(i + 1u), ld{k}(i + 2u), ld{k}(i + 3u))");
    match binding {
        Some((Elem::F16Packed, j)) => format!(
            "if ((i & 1u) == 0u) {{ return vec4<f32>(unpack2x16float(b{j}[i >> 1u]), \
             unpack2x16float(b{j}[(i >> 1u) + 1u])); }} return {each};"
        ),
        _ => format!("return {each};"),
    }
}

/// Expressions for `ld`, `ldi`, `ldu` and `ldw` of binding `j` at index `i`.
fn loads(elem: Elem, j: usize) -> [String; 4] {
    let word = format!("b{j}[i]");
    let from_float = |v: String| [v.clone(), format!("i32({v})"), format!("u32({v})"), format!("bitcast<u32>({v})")];
    match elem {
        Elem::Word(DType::F32 | DType::F16) => {
            let v = format!("bitcast<f32>({word})");
            [v.clone(), format!("i32({v})"), format!("u32({v})"), word]
        }
        Elem::Word(DType::I32) => {
            [format!("f32(bitcast<i32>({word}))"), format!("bitcast<i32>({word})"), word.clone(), word]
        }
        Elem::Word(DType::U32) => [format!("f32({word})"), format!("bitcast<i32>({word})"), word.clone(), word],
        Elem::F16Packed => from_float(format!("unpack2x16float(b{j}[i >> 1u])[i & 1u]")),
        Elem::F16Native => from_float(format!("f32({word})")),
        // The byte of element i, sign-extended by an arithmetic shift, times its row's scale.
        Elem::Q8 { row_len, scales_at } => from_float(format!(
            "f32(bitcast<i32>(b{j}[i >> 2u] << (24u - 8u * (i & 3u))) >> 24u) * \
             bitcast<f32>(b{j}[{scales_at}u + i / {row_len}u])",
            row_len = row_len.max(1)
        )),
        Elem::Word(DType::Q8) => unreachable!("q8 values are stored as Elem::Q8"),
    }
}
