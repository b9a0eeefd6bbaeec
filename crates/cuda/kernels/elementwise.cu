// Elementwise kernels: unary, binary and compare with broadcasting, where, fused programs,
// casts and runtime scalar reads (crates/cuda/src/lower/elementwise.rs lowers them).
// One thread per output element. Inputs are read through broadcast strides after the lowering
// has merged the axes every operand walks alike, so same-shape operands read at `i` itself.
//
// The op codes below are the Rust side's (`code` there); a unit test compares the two lists.

#define EW_MAX_RANK 8
#define EW_MAX_INPUTS 8
#define EW_MAX_INSTRS 64

// UnaryKind
#define EW_NEG 0u
#define EW_EXP 1u
#define EW_LOG 2u
#define EW_SQRT 3u
#define EW_RSQRT 4u
#define EW_TANH 5u
#define EW_ERF 6u
#define EW_GELU 7u
#define EW_RELU 8u
#define EW_SIGMOID 9u
#define EW_SILU 10u

// BinaryKind
#define EW_ADD 0u
#define EW_SUB 1u
#define EW_MUL 2u
#define EW_DIV 3u
#define EW_MAX 4u
#define EW_MIN 5u

// CmpKind
#define EW_EQ 0u
#define EW_NE 1u
#define EW_LT 2u
#define EW_LE 3u
#define EW_GT 4u
#define EW_GE 5u

// How binary and compare operands are computed with.
#define EW_FLOAT 0u
#define EW_INT 1u
#define EW_UINT 2u

// Fused instruction classes (the top nibble of an instruction's low byte).
#define EW_INSTR_INPUT 0u
#define EW_INSTR_UNARY 1u
#define EW_INSTR_BINARY 2u
#define EW_INSTR_SELECT 3u
#define EW_INSTR_COMPARE 4u
#define EW_INSTR_CONST 5u

// Splits element `i` of the output (dimensions `dims`, outermost first) into coordinates.
// The loops run over constant bounds so every array index is static (the parameters stay in
// the parameter bank); the outermost coordinate needs no modulo since i < n.
__device__ __forceinline__ void ew_coords(unsigned i, unsigned rank, const unsigned* dims, unsigned* x) {
#pragma unroll
    for (int k = EW_MAX_RANK - 1; k >= 0; k--) {
        x[k] = 0;
        if (k == 0 && rank > 0) {
            x[0] = i;
        } else if ((unsigned)k < rank) {
            x[k] = i % dims[k];
            i /= dims[k];
        }
    }
}

// The offset at coordinates `x` of an operand read with `strides` (0 on broadcast axes).
__device__ __forceinline__ unsigned ew_dot(const unsigned* x, unsigned rank, const unsigned* strides) {
    unsigned offset = 0;
#pragma unroll
    for (int k = 0; k < EW_MAX_RANK; k++) {
        if ((unsigned)k < rank) offset += x[k] * strides[k];
    }
    return offset;
}

// The reference's `UnaryKind::apply`. rsqrt is 1 / sqrt (both correctly rounded), as the
// reference computes it, rather than the approximate rsqrtf.
__device__ __forceinline__ float ew_unary(unsigned op, float x) {
    switch (op) {
    case EW_NEG: return -x;
    case EW_EXP: return expf(x);
    case EW_LOG: return logf(x);
    case EW_SQRT: return sqrtf(x);
    case EW_RSQRT: return 1.0f / sqrtf(x);
    case EW_TANH: return tanhf(x);
    case EW_ERF: return erf_f32(x);
    case EW_GELU: return gelu_f32(x);
    case EW_RELU: return fmaxf(x, 0.0f);  // NaN gives 0, as Rust's max does
    case EW_SIGMOID: return sigmoid_f32(x);
    default: return x / (1.0f + expf(-x));  // silu, written as the reference writes it
    }
}

// The reference's `BinaryKind::apply`. The _rn intrinsics are never contracted into an FMA
// with a neighbouring product, so every step rounds as the reference's does. fmaxf/fminf
// return the other operand when one is NaN, as Rust's max/min do.
__device__ __forceinline__ float ew_binary_f32(unsigned op, float a, float b) {
    switch (op) {
    case EW_ADD: return __fadd_rn(a, b);
    case EW_SUB: return __fsub_rn(a, b);
    case EW_MUL: return __fmul_rn(a, b);
    case EW_DIV: return __fdiv_rn(a, b);
    case EW_MAX: return fmaxf(a, b);
    default: return fminf(a, b);
    }
}

// i32 arithmetic that wraps (done on the unsigned bits) and divides truncating toward zero.
// The reference fails on a zero divisor; a kernel cannot, and returns `a` there (as WGSL
// does). i32::MIN / -1 wraps to i32::MIN.
__device__ __forceinline__ int ew_binary_i32(unsigned op, int a, int b) {
    unsigned ua = (unsigned)a, ub = (unsigned)b;
    switch (op) {
    case EW_ADD: return (int)(ua + ub);
    case EW_SUB: return (int)(ua - ub);
    case EW_MUL: return (int)(ua * ub);
    case EW_DIV:
        if (b == 0) return a;
        if (b == -1) return (int)(0u - ua);
        return a / b;
    case EW_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
    }
}

__device__ __forceinline__ unsigned ew_binary_u32(unsigned op, unsigned a, unsigned b) {
    switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return b == 0 ? a : a / b;
    case EW_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
    }
}

// The comparison as C's operators make it on floats: a NaN operand makes every comparison
// false except `ne`, written !(a == b) so it holds for NaN whatever the compiler picks.
template <typename T>
__device__ __forceinline__ unsigned ew_holds(unsigned op, T a, T b) {
    switch (op) {
    case EW_EQ: return a == b;
    case EW_NE: return !(a == b);
    case EW_LT: return a < b;
    case EW_LE: return a <= b;
    case EW_GT: return a > b;
    default: return a >= b;
    }
}

extern "C" __global__ void unary_map(const UnaryParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    st(p.out, i, ew_unary(p.op, ld(p.x, i)));
}

extern "C" __global__ void binary_broadcast(const BinaryParams p) {
    u64 gi = global_index();
    if (gi >= p.n) return;
    unsigned i = (unsigned)gi, x[EW_MAX_RANK];
    ew_coords(i, p.rank, p.dims, x);
    unsigned oa = ew_dot(x, p.rank, p.sa), ob = ew_dot(x, p.rank, p.sb);
    switch (p.ty) {
    case EW_FLOAT: st(p.out, i, ew_binary_f32(p.op, ld(p.a, oa), ld(p.b, ob))); break;
    case EW_INT: sti(p.out, i, ew_binary_i32(p.op, ldi(p.a, oa), ldi(p.b, ob))); break;
    default: stu(p.out, i, ew_binary_u32(p.op, ldu(p.a, oa), ldu(p.b, ob))); break;
    }
}

// Integers compare exactly in their own type (u32 above 2^24 would collide as f32).
extern "C" __global__ void compare_broadcast(const BinaryParams p) {
    u64 gi = global_index();
    if (gi >= p.n) return;
    unsigned i = (unsigned)gi, x[EW_MAX_RANK];
    ew_coords(i, p.rank, p.dims, x);
    unsigned oa = ew_dot(x, p.rank, p.sa), ob = ew_dot(x, p.rank, p.sb);
    unsigned holds;
    switch (p.ty) {
    case EW_FLOAT: holds = ew_holds(p.op, ld(p.a, oa), ld(p.b, ob)); break;
    case EW_INT: holds = ew_holds(p.op, ldi(p.a, oa), ldi(p.b, ob)); break;
    default: holds = ew_holds(p.op, ldu(p.a, oa), ldu(p.b, ob)); break;
    }
    stu(p.out, i, holds);
}

// Values move as 32-bit words, so every dtype is copied exactly; the condition is an integer.
extern "C" __global__ void select_broadcast(const SelectParams p) {
    u64 gi = global_index();
    if (gi >= p.n) return;
    unsigned i = (unsigned)gi, x[EW_MAX_RANK];
    ew_coords(i, p.rank, p.dims, x);
    bool pick = ldw(p.cond, ew_dot(x, p.rank, p.sc)) != 0u;
    stw(p.out, i, pick ? ldw(p.a, ew_dot(x, p.rank, p.sa)) : ldw(p.b, ew_dot(x, p.rank, p.sb)));
}

// Input `k` of a fused program at coordinates `x`. A switch keeps the operand and stride
// indices static.
__device__ __forceinline__ float ew_fused_load(const FusedElementwiseParams& p, unsigned k, const unsigned* x) {
#define EW_LOAD(K) \
    case K: return ld(p.ins[K], ew_dot(x, p.rank, ((K) < 4 ? p.strides_lo : p.strides_hi) + (K) % 4 * EW_MAX_RANK));
    switch (k) {
    EW_LOAD(0)
    EW_LOAD(1)
    EW_LOAD(2)
    EW_LOAD(3)
    EW_LOAD(4)
    EW_LOAD(5)
    EW_LOAD(6)
    default: return ld(p.ins[7], ew_dot(x, p.rank, p.strides_hi + 3 * EW_MAX_RANK));
    }
#undef EW_LOAD
}

// Word `at` of a fused program (split over two tables of 32).
__device__ __forceinline__ unsigned ew_program_word(const FusedElementwiseParams& p, unsigned at) {
    return at < 32u ? p.program_lo[at] : p.program_hi[at - 32u];
}

// A fused program, interpreted: instruction j (low byte: class << 4 | kind; then operand
// bytes a, b, c; a constant's bits in the next word) defines the f32 value r[j], as
// `FusedElementwise::run` does. The last value is the result, rounded to the output dtype by
// `st`.
extern "C" __global__ void fused_elementwise(const FusedElementwiseParams p) {
    u64 gi = global_index();
    if (gi >= p.n) return;
    unsigned i = (unsigned)gi, x[EW_MAX_RANK];
    ew_coords(i, p.rank, p.dims, x);
    float r[EW_MAX_INSTRS];
    for (unsigned j = 0, at = 0; j < p.len; j++, at++) {
        unsigned w = ew_program_word(p, at);
        unsigned kind = w & 15u, a = (w >> 8) & 255u, b = (w >> 16) & 255u, c = w >> 24;
        float v;
        switch ((w >> 4) & 15u) {
        case EW_INSTR_INPUT: v = ew_fused_load(p, a, x); break;
        case EW_INSTR_UNARY: v = ew_unary(kind, r[a]); break;
        case EW_INSTR_BINARY: v = ew_binary_f32(kind, r[a], r[b]); break;
        case EW_INSTR_COMPARE: v = ew_holds(kind, r[a], r[b]) ? 1.0f : 0.0f; break;
        case EW_INSTR_CONST: v = __uint_as_float(ew_program_word(p, ++at)); break;
        default: v = r[a] != 0.0f ? r[b] : r[c]; break;  // NaN is non-zero, as in the reference
        }
        r[j] = v;
    }
    st(p.out, i, r[p.len - 1]);
}

// f32 to i32 as Rust's `as`: truncation toward zero, saturation, NaN to 0.
__device__ __forceinline__ int ew_f32_to_i32(float x) {
    if (x != x) return 0;
    if (x >= 2147483648.0f) return 2147483647;
    if (x <= -2147483648.0f) return (int)0x80000000u;
    return (int)x;
}

__device__ __forceinline__ unsigned ew_f32_to_u32(float x) {
    if (x != x || x <= 0.0f) return 0u;
    if (x >= 4294967296.0f) return 0xffffffffu;
    return (unsigned)x;
}

// The f32 word of `x` rounded to f16 (to nearest even; from 65520 up to infinity). A NaN keeps
// its sign and top 10 payload bits and becomes quiet, as the reference's conversion leaves it
// (the hardware conversion would make it the canonical NaN).
__device__ __forceinline__ unsigned ew_f16_word(float x) {
    unsigned bits = __float_as_uint(x);
    if (x != x) return (bits & 0xffffe000u) | 0x00400000u;
    return __float_as_uint(round_f16(x));
}

// A q8 weight widened for the op that reads it: byte i times the scale of its row.
extern "C" __global__ void dequantize_q8(const DequantizeQ8Params p) {
    u64 i = global_index();
    if (i >= p.n) return;
    float v = (float)((const signed char*)p.x)[i] * ((const float*)p.x)[p.scales_at + i / p.row_len];
    if (p.half) ((unsigned short*)p.out)[i] = float_to_half(v);
    else ((float*)p.out)[i] = v;
}

// Rust `as` between dtypes: floats (and integers) to floats round to nearest, floats to
// integers truncate and saturate, integers to integers keep their bits.
extern "C" __global__ void cast_convert(const CastParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    bool from_float = p.x.kind == KIND_F32 || p.x.kind == KIND_F16;
    switch (p.out.dtype) {
    case DTYPE_F32: st(p.out, i, ld(p.x, i)); break;
    case DTYPE_F16: stw(p.out, i, ew_f16_word(ld(p.x, i))); break;
    case DTYPE_I32:
        if (from_float) sti(p.out, i, ew_f32_to_i32(ld(p.x, i)));
        else stw(p.out, i, ldw(p.x, i));
        break;
    default:
        if (from_float) stu(p.out, i, ew_f32_to_u32(ld(p.x, i)));
        else stw(p.out, i, ldw(p.x, i));
        break;
    }
}

// Runtime scalar `index`, read on the device when the launch runs (a replayed graph sees the
// run's value), as the one element of a u32 tensor.
extern "C" __global__ void scalar_read(const ScalarReadParams p) {
    if (global_index() != 0) return;
    stu(p.out, 0, ((const unsigned*)p.scalars)[p.index]);
}
