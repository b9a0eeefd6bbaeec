// Helpers every kernel gets: the generated module is operands.h, this file, the parameter
// structs (derived from Rust), then each kernel file. NVRTC compiles it without any CUDA
// header, so halves are converted with PTX instructions.

typedef unsigned long long u64;

// Threads per block of one-dimensional kernels (the Rust side's `BLOCK`).
#define BLOCK 256

__device__ __forceinline__ float half_to_float(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

__device__ __forceinline__ unsigned short float_to_half(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// `f` rounded to the nearest f16 value, kept as f32.
__device__ __forceinline__ float round_f16(float f) {
    return half_to_float(float_to_half(f));
}

// The global index of this thread in a one-dimensional launch.
__device__ __forceinline__ u64 global_index() {
    return (u64)blockIdx.x * blockDim.x + threadIdx.x;
}

// Element `i` of input `t` as f32.
__device__ __forceinline__ float ld(In t, u64 i) {
    switch (t.kind) {
    case KIND_F32: return ((const float*)t.ptr)[i];
    case KIND_F16: return half_to_float(((const unsigned short*)t.ptr)[i]);
    case KIND_I32: return (float)((const int*)t.ptr)[i];
    default: return (float)((const unsigned*)t.ptr)[i];
    }
}

// Element `i` of input `t` as i32 (floats truncated toward zero).
__device__ __forceinline__ int ldi(In t, u64 i) {
    switch (t.kind) {
    case KIND_I32:
    case KIND_U32: return ((const int*)t.ptr)[i];
    default: return (int)ld(t, i);
    }
}

// Element `i` of input `t` as u32 (floats truncated toward zero).
__device__ __forceinline__ unsigned ldu(In t, u64 i) {
    switch (t.kind) {
    case KIND_I32:
    case KIND_U32: return ((const unsigned*)t.ptr)[i];
    default: return (unsigned)ld(t, i);
    }
}

// The 32-bit word of element `i` (an f16 is widened to its f32 bits): data movement.
__device__ __forceinline__ unsigned ldw(In t, u64 i) {
    if (t.kind == KIND_F16) return __float_as_uint(ld(t, i));
    return ((const unsigned*)t.ptr)[i];
}

// Stores float `v` as element `i` of output `o`, converted to its dtype.
__device__ __forceinline__ void st(Out o, u64 i, float v) {
    switch (o.dtype) {
    case DTYPE_F32: ((float*)o.ptr)[i] = v; break;
    case DTYPE_F16: ((float*)o.ptr)[i] = round_f16(v); break;
    case DTYPE_I32: ((int*)o.ptr)[i] = (int)v; break;
    default: ((unsigned*)o.ptr)[i] = (unsigned)v; break;
    }
}

__device__ __forceinline__ void sti(Out o, u64 i, int v) {
    ((int*)o.ptr)[i] = v;
}

__device__ __forceinline__ void stu(Out o, u64 i, unsigned v) {
    ((unsigned*)o.ptr)[i] = v;
}

// Stores a 32-bit word as is (data movement; the word already holds the dtype's value).
__device__ __forceinline__ void stw(Out o, u64 i, unsigned w) {
    ((unsigned*)o.ptr)[i] = w;
}

// Offset of element `i` of a row-major tensor of `rank` dimensions `dims` read through
// `strides` (0 on broadcast axes). 32-bit arithmetic: lowering refuses tensors of 2^32 or more
// elements, and 64-bit division costs tens of instructions per element.
__device__ __forceinline__ u64 broadcast_offset(u64 i, unsigned rank, const unsigned* dims, const unsigned* strides) {
    unsigned rest = (unsigned)i, offset = 0;
    for (int k = (int)rank - 1; k >= 0; k--) {
        offset += (rest % dims[k]) * strides[k];
        rest /= dims[k];
    }
    return offset;
}

// erf as the reference computes it in f32 (the device's erff, accurate to 2 ulp).
__device__ __forceinline__ float erf_f32(float x) {
    return erff(x);
}

// GELU in its erf form, as Whisper uses.
__device__ __forceinline__ float gelu_f32(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

__device__ __forceinline__ float sigmoid_f32(float x) {
    return 1.0f / (1.0f + expf(-x));
}

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `shared` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Maximum of `v` over the block, like `block_sum`.
__device__ __forceinline__ float block_max(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared[lane] : __int_as_float(0xff800000u);
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
