// Layer norm over the last axis, and the fused residual add + layer norm
// (crates/core/src/ops/layer_norm.rs, add_layer_norm.rs): one block per row of p.n values.
//
// The reference accumulates the mean and the biased variance (mean of squared deviations from
// the mean, a second pass) in f64, computes the scale 1 / sqrt(var + eps) in f64, rounds
// (x - mean) * scale to f32 and applies gamma and beta in f32. The kernels do the same, so
// they agree with it to rounding whatever the row's offset. For the fused op, x is a + b in
// f32 (not rounded to an f16 dtype).
//
// When p.staged is set the first pass also keeps the row (x, or the sum), gamma and beta in
// dynamic shared memory (3 p.n floats): the weights' loads then overlap the row's instead of
// waiting for the reductions, and each thread rereads only the elements it stored itself.

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `shared` holds 32 doubles.
__device__ __forceinline__ double norm_block_sum(double v, double* shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Element `k` of the row starting at `base`: x, or the residual sum in f32.
template <bool ADD>
__device__ __forceinline__ float norm_load(const LayerNormParams& p, u64 base, unsigned k) {
    float x = ld(p.x, base + k);
    if (ADD) x += ld(p.residual, base + k);
    return x;
}

template <bool ADD>
__device__ __forceinline__ void norm_row(const LayerNormParams& p) {
    extern __shared__ float norm_staged[];
    float* xs = norm_staged;
    float* gs = norm_staged + p.n;
    float* bs = norm_staged + 2 * p.n;
    __shared__ double partial[32];
    u64 base = (u64)blockIdx.x * p.n;
    double sum = 0.0;
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) {
        float x = norm_load<ADD>(p, base, k);
        if (p.staged) {
            xs[k] = x;
            gs[k] = ld(p.gamma, k);
            bs[k] = ld(p.beta, k);
        }
        sum += (double)x;
    }
    double mean = norm_block_sum(sum, partial) / (double)p.n;
    double squares = 0.0;
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) {
        double d = (double)(p.staged ? xs[k] : norm_load<ADD>(p, base, k)) - mean;
        squares += d * d;
    }
    double var = norm_block_sum(squares, partial) / (double)p.n;
    double scale = 1.0 / sqrt(var + (double)p.eps);
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) {
        float x = p.staged ? xs[k] : norm_load<ADD>(p, base, k);
        float g = p.staged ? gs[k] : ld(p.gamma, k);
        float b = p.staged ? bs[k] : ld(p.beta, k);
        float y = (float)(((double)x - mean) * scale);
        // Separate multiply and add (no fused multiply-add), as the reference rounds them.
        st(p.out, base + k, __fadd_rn(__fmul_rn(y, g), b));
    }
}

extern "C" __global__ void layer_norm(const LayerNormParams p) {
    norm_row<false>(p);
}

extern "C" __global__ void add_layer_norm(const LayerNormParams p) {
    norm_row<true>(p);
}
