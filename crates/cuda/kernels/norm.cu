// Layer norm over the last axis, and the fused residual add + layer norm
// (crates/core/src/ops/layer_norm.rs, add_layer_norm.rs), over rows of p.n values.
//
// The reference accumulates the mean and the biased variance (mean of squared deviations from
// the mean, a second pass) in f64, computes the scale 1 / sqrt(var + eps) in f64, rounds
// (x - mean) * scale to f32 and applies gamma and beta in f32. The kernels do the same, so
// they agree with it to rounding whatever the row's offset. For the fused op, x is a + b in
// f32 (not rounded to an f16 dtype).
//
// Two paths, chosen by the lowering through p.row_warps (one kernel per op, so that the
// harness's short rows and the lowering's long ones launch the same kernels):
// - p.row_warps > 0, rows of at most 32 * 16 * p.row_warps values, held in registers: each of
//   a row's T threads holds elements t, t + T, ... and the matching gamma and beta, loaded
//   once with all loads in flight together. With p.row_warps == 1 a row is one warp, several
//   rows per block, and the sums are warp shuffles only: no barrier, no shared memory used (a
//   decoder step's single row costs a few load latencies). With more, a row is one block.
// - p.row_warps == 0, longer rows: one block per row looping over it, three passes over
//   global memory, with block reductions.
//
// Registers are counted per kernel, so every path gets the register path's count (about 115;
// 32 values per thread would take 160 and cost the launches occupancy): the lowering keeps
// blocks to 256 threads.

// Sum of `v` over the warp; every lane gets the same value (each step adds the same two
// numbers in either order).
__device__ __forceinline__ double norm_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum of `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `shared` holds 32 doubles.
__device__ __forceinline__ double norm_block_sum(double v, double* shared) {
    v = norm_warp_sum(v);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared[lane] : 0.0;
    return norm_warp_sum(v);
}

// The squared deviation `d * d` rounded before it is added (the reference squares, then
// sums; a fused multiply-add would skip that rounding).
__device__ __forceinline__ double norm_square(double d) {
    return __dmul_rn(d, d);
}

// The normalised value of `x` with gamma `g` and beta `b`: the deviation scaled in f64 and
// rounded to f32, then a separate multiply and add (no fused multiply-add), as the reference
// rounds them.
__device__ __forceinline__ float norm_apply(float x, double mean, double scale, float g, float b) {
    float y = (float)(((double)x - mean) * scale);
    return __fadd_rn(__fmul_rn(y, g), b);
}

// 1 / sqrt(var + eps) in f64, as the reference computes it.
__device__ __forceinline__ double norm_scale(double var, float eps) {
    return 1.0 / sqrt(var + (double)eps);
}

// ---- rows held in registers

// Elements t + stride j (j < V) of the row of `n` values at `base` of `in` into v[j]; 0 past
// the row. Layer norm operands are floats (the op checks them): f16 weights are native
// halves, everything else 32-bit f32 words. The kind is tested once, so the V loads go out
// back to back.
template <int V>
__device__ __forceinline__ void norm_thread_load(In in, u64 base, unsigned t, unsigned stride, unsigned n,
                                                 float (&v)[V]) {
    if (in.kind == KIND_F16) {
        const unsigned short* row = (const unsigned short*)in.ptr + base;
#pragma unroll
        for (int j = 0; j < V; j++) {
            unsigned k = t + stride * j;
            v[j] = k < n ? half_to_float(row[k]) : 0.0f;
        }
    } else {
        const float* row = (const float*)in.ptr + base;
#pragma unroll
        for (int j = 0; j < V; j++) {
            unsigned k = t + stride * j;
            v[j] = k < n ? row[k] : 0.0f;
        }
    }
}

// Stores v[j] as element t + stride j of the row of `n` values at `base` of the output, f32
// or f16 (rounded, kept widened to an f32 word).
template <int V>
__device__ __forceinline__ void norm_thread_store(Out o, u64 base, unsigned t, unsigned stride, unsigned n,
                                                  const float (&v)[V]) {
    float* row = (float*)o.ptr + base;
    bool half = o.dtype == DTYPE_F16;
#pragma unroll
    for (int j = 0; j < V; j++) {
        unsigned k = t + stride * j;
        if (k < n) row[k] = half ? round_f16(v[j]) : v[j];
    }
}

// One row of at most V values per thread, by a warp (row blockIdx.x * warps per block + warp)
// or BY_BLOCK (row blockIdx.x). `shared` holds 32 doubles. The warp's stride is a constant, so
// its loads are offsets from one address (the block's runtime stride takes about 20 more
// registers).
template <bool ADD, int V, bool BY_BLOCK>
__device__ __forceinline__ void norm_register_row(const LayerNormParams& p, double* shared) {
    unsigned t = BY_BLOCK ? threadIdx.x : threadIdx.x & 31u;
    unsigned stride = BY_BLOCK ? blockDim.x : 32u;
    unsigned row = BY_BLOCK ? blockIdx.x : blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    // Only a warp of the last block of warp rows can be past the rows: no barrier follows.
    if (row >= p.rows) return;
    u64 base = (u64)row * p.n;
    float x[V], g[V], b[V];
    norm_thread_load(p.x, base, t, stride, p.n, x);
    if (ADD) {
        float r[V];
        norm_thread_load(p.residual, base, t, stride, p.n, r);
#pragma unroll
        for (int j = 0; j < V; j++) x[j] += r[j];
    }
    norm_thread_load(p.gamma, 0, t, stride, p.n, g);
    norm_thread_load(p.beta, 0, t, stride, p.n, b);
    // Past the row x is 0: nothing is added to the sum.
    double sum = 0.0;
#pragma unroll
    for (int j = 0; j < V; j++) sum += (double)x[j];
    sum = BY_BLOCK ? norm_block_sum(sum, shared) : norm_warp_sum(sum);
    double mean = sum / (double)p.n;
    double squares = 0.0;
#pragma unroll
    for (int j = 0; j < V; j++) {
        if (t + stride * j < p.n) squares += norm_square((double)x[j] - mean);
    }
    squares = BY_BLOCK ? norm_block_sum(squares, shared) : norm_warp_sum(squares);
    double scale = norm_scale(squares / (double)p.n, p.eps);
#pragma unroll
    for (int j = 0; j < V; j++) x[j] = norm_apply(x[j], mean, scale, g[j], b[j]);
    norm_thread_store(p.out, base, t, stride, p.n, x);
}

// ---- longer rows: one block per row, looping over it

// Element `k` of the row starting at `base`: x, or the residual sum in f32.
template <bool ADD>
__device__ __forceinline__ float norm_load(const LayerNormParams& p, u64 base, unsigned k) {
    float x = ld(p.x, base + k);
    if (ADD) x += ld(p.residual, base + k);
    return x;
}

// Row blockIdx.x, reread from global memory in each of the three passes. `partial` holds 32
// doubles.
template <bool ADD>
__device__ __forceinline__ void norm_block_row(const LayerNormParams& p, double* partial) {
    u64 base = (u64)blockIdx.x * p.n;
    double sum = 0.0;
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) sum += (double)norm_load<ADD>(p, base, k);
    double mean = norm_block_sum(sum, partial) / (double)p.n;
    double squares = 0.0;
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) {
        squares += norm_square((double)norm_load<ADD>(p, base, k) - mean);
    }
    double scale = norm_scale(norm_block_sum(squares, partial) / (double)p.n, p.eps);
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) {
        float y = norm_apply(norm_load<ADD>(p, base, k), mean, scale, ld(p.gamma, k), ld(p.beta, k));
        st(p.out, base + k, y);
    }
}

// The path the lowering chose (p.row_warps): 0 loops over the row; else the row is held in
// registers, by a block of p.row_warps > 1 warps (16 values per thread) or by one warp (4, 8
// or 16 values per lane, p.thread_values; the lowering gives no other count).
template <bool ADD>
__device__ __forceinline__ void norm_rows(const LayerNormParams& p) {
    __shared__ double partial[32];
    if (p.row_warps == 0) {
        norm_block_row<ADD>(p, partial);
    } else if (p.row_warps > 1) {
        norm_register_row<ADD, 16, true>(p, partial);
    } else if (p.thread_values == 4) {
        norm_register_row<ADD, 4, false>(p, partial);
    } else if (p.thread_values == 8) {
        norm_register_row<ADD, 8, false>(p, partial);
    } else {
        norm_register_row<ADD, 16, false>(p, partial);
    }
}

extern "C" __global__ void layer_norm(const LayerNormParams p) {
    norm_rows<false>(p);
}

extern "C" __global__ void add_layer_norm(const LayerNormParams p) {
    norm_rows<true>(p);
}
