// Products: the matrix-vector kernel of decoder steps, the operand conversion in front of
// cuBLAS, and the epilogue behind it (crates/cuda/src/lower/matmul.rs).

// out[r, c] = act(sum_k a[r, k] * b[c, k] + bias[c]) (+ residual[r, c]) for r < m (at most 8 rows): a warp per
// output column reads the weight row `b[c, :]` once for all rows. `mode` 1 (f16 weights, f32
// rows, k a multiple of 8) and 2 (f32 weights and rows, k a multiple of 4) move 16 bytes of
// weights per lane and load, mode 3 (q8 weights as stored, k a multiple of 8) 8 bytes, its
// sums scaled by the row's scale at the end; mode 0 reads element by element (any kinds).
// Lanes stride over k, so loads are coalesced; the warp then sums its lanes.
__device__ __forceinline__ void gemv_half8(uint4 w, float* out) {
    unsigned words[4] = {w.x, w.y, w.z, w.w};
    #pragma unroll
    for (int j = 0; j < 4; j++) {
        out[2 * j] = half_to_float((unsigned short)(words[j] & 0xffffu));
        out[2 * j + 1] = half_to_float((unsigned short)(words[j] >> 16));
    }
}

// acc[r] += a[r, k .. k + 8] . w for the m rows (a row-major with rows of kn).
__device__ __forceinline__ void gemv_rows8(float* acc, const float* a, unsigned m, unsigned kn, unsigned k, const float* w) {
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        if (r < (int)m) {
            float4 x0 = *(const float4*)(a + r * kn + k);
            float4 x1 = *(const float4*)(a + r * kn + k + 4);
            acc[r] += x0.x * w[0] + x0.y * w[1] + x0.z * w[2] + x0.w * w[3]
                    + x1.x * w[4] + x1.y * w[5] + x1.z * w[6] + x1.w * w[7];
        }
    }
}

extern "C" __global__ void matmul_gemv(const GemvParams p) {
    unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned c = blockIdx.x * (blockDim.x >> 5) + warp;
    if (c >= p.n) return;
    float acc[8];
    #pragma unroll
    for (int r = 0; r < 8; r++) acc[r] = 0.0f;
    const float* a = (const float*)p.a.ptr;
    if (p.mode == 1) {
        const uint4* row = (const uint4*)((const unsigned short*)p.b.ptr + (u64)c * p.k);
        for (unsigned k = lane * 8; k < p.k; k += 256) {
            float w[8];
            gemv_half8(row[k / 8], w);
            gemv_rows8(acc, a, p.m, p.k, k, w);
        }
    } else if (p.mode == 3) {
        const uint2* row = (const uint2*)((const signed char*)p.b.ptr + (u64)c * p.k);
        for (unsigned k = lane * 8; k < p.k; k += 256) {
            uint2 q = row[k / 8];
            float w[8];
            #pragma unroll
            for (int j = 0; j < 4; j++) {
                w[j] = (float)(signed char)(q.x >> (8 * j));
                w[4 + j] = (float)(signed char)(q.y >> (8 * j));
            }
            gemv_rows8(acc, a, p.m, p.k, k, w);
        }
    } else if (p.mode == 2) {
        const float4* row = (const float4*)((const float*)p.b.ptr + (u64)c * p.k);
        for (unsigned k = lane * 4; k < p.k; k += 128) {
            float4 w = row[k / 4];
            #pragma unroll
            for (int r = 0; r < 8; r++) {
                if (r < (int)p.m) {
                    float4 x = *(const float4*)(a + r * p.k + k);
                    acc[r] += x.x * w.x + x.y * w.y + x.z * w.z + x.w * w.w;
                }
            }
        }
    } else {
        u64 row = (u64)c * p.k;
        for (unsigned k = lane; k < p.k; k += 32) {
            float w = ld(p.b, row + k);
            #pragma unroll
            for (int r = 0; r < 8; r++) {
                if (r < (int)p.m) acc[r] += ld(p.a, (u64)r * p.k + k) * w;
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        float v = acc[r];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        acc[r] = v;
    }
    if (lane != 0) return;
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        if (r < (int)p.m) {
            float v = acc[r];
            if (p.mode == 3) v *= ((const float*)p.scales)[c];
            if (p.has_bias) v += ld(p.bias, c);
            if (p.gelu) v = gelu_f32(v);
            if (p.has_residual) v += ld(p.residual, (u64)r * p.n + c);
            st(p.out, (u64)r * p.n + c, v);
        }
    }
}

// `n` elements of `x` as f16 halves (`to_f16`) or f32 words at `out`: cuBLAS's operands.
// With `vec4` (f32 words, `x` and `out` 16-byte aligned) a thread converts four elements
// with one 16-byte load; the last thread takes the tail one by one.
extern "C" __global__ void matmul_convert(const ConvertParams p) {
    unsigned i = (unsigned)global_index();
    if (p.vec4) {
        unsigned at = i * 4;
        if (at >= p.n) return;
        const float* x = (const float*)p.x.ptr;
        if (at + 4 <= p.n) {
            float4 v = *(const float4*)(x + at);
            if (p.to_f16) {
                uint2 h;
                h.x = (unsigned)float_to_half(v.x) | ((unsigned)float_to_half(v.y) << 16);
                h.y = (unsigned)float_to_half(v.z) | ((unsigned)float_to_half(v.w) << 16);
                *(uint2*)((unsigned short*)p.out + at) = h;
            } else {
                *(float4*)((float*)p.out + at) = v;
            }
            return;
        }
        for (unsigned j = at; j < p.n; j++) {
            if (p.to_f16) ((unsigned short*)p.out)[j] = float_to_half(x[j]);
            else ((float*)p.out)[j] = x[j];
        }
        return;
    }
    if (i >= p.n) return;
    float v = ld(p.x, i);
    if (p.to_f16) {
        ((unsigned short*)p.out)[i] = float_to_half(v);
    } else {
        ((float*)p.out)[i] = v;
    }
}

// After cuBLAS wrote f32 results: bias (over columns or rows), GELU, the residual (an input of
// the output's shape), rounding to the output dtype. A thread takes four consecutive results (16-byte load and store when the output
// is 16-byte aligned, as arena values are).
__device__ __forceinline__ float epilogue_one(const EpilogueParams& p, unsigned i, float v) {
    if (p.has_bias) v += ld(p.bias, (i / p.bias_div) % p.bias_len);
    if (p.gelu) v = gelu_f32(v);
    if (p.has_residual) v += ld(p.residual, i);
    return p.out.dtype == DTYPE_F16 ? round_f16(v) : v;
}

extern "C" __global__ void matmul_epilogue(const EpilogueParams p) {
    unsigned at = (unsigned)global_index() * 4;
    if (at >= p.total) return;
    float* out = (float*)p.out.ptr;
    if (at + 4 <= p.total && ((u64)p.out.ptr & 15) == 0) {
        float4 v = *(const float4*)(out + at);
        v.x = epilogue_one(p, at, v.x);
        v.y = epilogue_one(p, at + 1, v.y);
        v.z = epilogue_one(p, at + 2, v.z);
        v.w = epilogue_one(p, at + 3, v.w);
        *(float4*)(out + at) = v;
        return;
    }
    for (unsigned j = at; j < p.total && j < at + 4; j++) out[j] = epilogue_one(p, j, out[j]);
}
