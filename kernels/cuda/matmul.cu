// Products: the matrix-vector kernel of decoder steps, the operand conversion in front of
// cuBLAS, and the epilogue behind it (crates/native/src/cuda/lower/matmul.rs).

// out[r, c] = act(sum_k a[r, k] * b[c, k] + bias[c]) for r < m (at most 8 rows): a warp per
// output column reads the weight row `b[c, :]` once for all rows; lanes stride over k so
// loads are coalesced, then the warp sums its lanes.
extern "C" __global__ void matmul_gemv(const GemvParams p) {
    unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    unsigned c = blockIdx.x * (blockDim.x >> 5) + warp;
    if (c >= p.n) return;
    float acc[8];
    for (int r = 0; r < 8; r++) acc[r] = 0.0f;
    u64 row = (u64)c * p.k;
    for (unsigned k = lane; k < p.k; k += 32) {
        float w = ld(p.b, row + k);
        #pragma unroll
        for (int r = 0; r < 8; r++) {
            if (r < (int)p.m) acc[r] += ld(p.a, (u64)r * p.k + k) * w;
        }
    }
    #pragma unroll
    for (int r = 0; r < 8; r++) {
        float v = acc[r];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        acc[r] = v;
    }
    if (lane != 0) return;
    for (int r = 0; r < (int)p.m; r++) {
        float v = acc[r];
        if (p.has_bias) v += ld(p.bias, c);
        if (p.gelu) v = gelu_f32(v);
        st(p.out, (u64)r * p.n + c, v);
    }
}

// `n` elements of `x` as f16 halves (`to_f16`) or f32 words at `out`: cuBLAS's operands.
extern "C" __global__ void matmul_convert(const ConvertParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    float v = ld(p.x, i);
    if (p.to_f16) {
        ((unsigned short*)p.out)[i] = float_to_half(v);
    } else {
        ((float*)p.out)[i] = v;
    }
}

// After cuBLAS wrote f32 results: bias over columns, GELU, rounding to the output dtype.
extern "C" __global__ void matmul_epilogue(const EpilogueParams p) {
    u64 i = global_index();
    if (i >= p.total) return;
    float v = ((const float*)p.out.ptr)[i];
    if (p.has_bias) v += ld(p.bias, i % p.n);
    if (p.gelu) v = gelu_f32(v);
    st(p.out, i, v);
}
