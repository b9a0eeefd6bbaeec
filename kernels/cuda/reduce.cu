// Reductions, argmax and softmax (crates/native/src/cuda/lower/reduce.rs). The input is viewed
// as [outer, n, inner] around the axis; result m = o * inner + i folds the run of n values
// at (o * n + k) * inner + i. `*_rows` kernels take a block per run of the last axis (inner
// == 1) and combine their threads with block reductions; `*_runs` kernels take a thread per
// result and fold its run in index order. Arithmetic is f32.

#define REDUCE_SUM 0u
#define REDUCE_MEAN 1u
#define REDUCE_MAX 2u

// NaN by its bits: no comparison the compiler might fold.
__device__ __forceinline__ bool reduce_is_nan(float x) {
    return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u;
}

// The larger of a and b, NaN if either is (the reference's max propagates NaN; fmaxf drops it).
__device__ __forceinline__ float reduce_max_nan(float a, float b) {
    return reduce_is_nan(a) ? a : reduce_is_nan(b) ? b : fmaxf(a, b);
}

// `block_max` with NaN propagating: every thread gets it. `shared` holds 32 floats.
__device__ __forceinline__ float reduce_block_max_nan(float v, float* shared) {
    for (int o = 16; o > 0; o >>= 1) v = reduce_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared[lane] : __int_as_float(0xff800000u);
    for (int o = 16; o > 0; o >>= 1) v = reduce_max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The reduction of `v`, the fold of a run of `n` values, finished (a mean divides the sum).
__device__ __forceinline__ float reduce_finish(float v, unsigned op, unsigned n) {
    return op == REDUCE_MEAN ? v / (float)n : v;
}

extern "C" __global__ void reduce_rows(const ReduceParams p) {
    __shared__ float shared[32];
    u64 base = (u64)blockIdx.x * p.n;
    float v;
    if (p.op == REDUCE_MAX) {
        v = __int_as_float(0xff800000u);
        for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) v = reduce_max_nan(v, ld(p.x, base + k));
        v = reduce_block_max_nan(v, shared);
    } else {
        v = 0.0f;
        for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) v += ld(p.x, base + k);
        v = block_sum(v, shared);
    }
    if (threadIdx.x == 0) st(p.out, blockIdx.x, reduce_finish(v, p.op, p.n));
}

extern "C" __global__ void reduce_runs(const ReduceParams p) {
    u64 m = global_index();
    if (m >= p.outputs) return;
    u64 base = (m / p.inner) * p.n * p.inner + m % p.inner;
    float v;
    if (p.op == REDUCE_MAX) {
        v = __int_as_float(0xff800000u);
        for (unsigned k = 0; k < p.n; k++) v = reduce_max_nan(v, ld(p.x, base + (u64)k * p.inner));
    } else {
        v = 0.0f;
        for (unsigned k = 0; k < p.n; k++) v += ld(p.x, base + (u64)k * p.inner);
    }
    st(p.out, m, reduce_finish(v, p.op, p.n));
}

// Whether value word `a` beats word `b` in an input of `kind`: floats (f32 words, f16 widened)
// with NaN above every number but not another NaN; integers in their own type (u32 and i32
// values past 2^24 collide in f32).
__device__ __forceinline__ bool argmax_greater(unsigned kind, unsigned a, unsigned b) {
    if (kind == KIND_I32) return (int)a > (int)b;
    if (kind == KIND_U32) return a > b;
    float fa = __uint_as_float(a), fb = __uint_as_float(b);
    return (reduce_is_nan(fa) && !reduce_is_nan(fb)) || fa > fb;
}

// Whether candidate (bv, bk) beats (av, ak): a greater value, or an equal one at a smaller
// index, so combining in any order finds the first largest value.
__device__ __forceinline__ bool argmax_beats(unsigned kind, unsigned av, unsigned ak, unsigned bv, unsigned bk) {
    return argmax_greater(kind, bv, av) || (!argmax_greater(kind, av, bv) && bk < ak);
}

// Each thread keeps the first best of the run's value 0 (a genuine candidate, so threads
// without values of their own cannot win with a made-up one) and its values k = thread,
// thread + blockDim.x, ..., seen in order; warps then the block combine the candidates.
extern "C" __global__ void argmax_rows(const ArgmaxParams p) {
    __shared__ unsigned shared_v[32];
    __shared__ unsigned shared_k[32];
    u64 base = (u64)blockIdx.x * p.n;
    unsigned kind = p.x.kind;
    unsigned v = ldw(p.x, base), best = 0;
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) {
        unsigned w = ldw(p.x, base + k);
        if (argmax_greater(kind, w, v)) {
            v = w;
            best = k;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        unsigned ov = __shfl_xor_sync(0xffffffffu, v, o), ok = __shfl_xor_sync(0xffffffffu, best, o);
        if (argmax_beats(kind, v, best, ov, ok)) {
            v = ov;
            best = ok;
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        shared_v[warp] = v;
        shared_k[warp] = best;
    }
    __syncthreads();
    if (warp != 0) return;
    int warps = blockDim.x >> 5;
    // Lanes past the block's warps repeat warp 0's candidate: it cannot beat itself.
    v = shared_v[lane < warps ? lane : 0];
    best = shared_k[lane < warps ? lane : 0];
    for (int o = 16; o > 0; o >>= 1) {
        unsigned ov = __shfl_xor_sync(0xffffffffu, v, o), ok = __shfl_xor_sync(0xffffffffu, best, o);
        if (argmax_beats(kind, v, best, ov, ok)) {
            v = ov;
            best = ok;
        }
    }
    if (lane == 0) stu(p.out, blockIdx.x, best);
}

extern "C" __global__ void argmax_runs(const ArgmaxParams p) {
    u64 m = global_index();
    if (m >= p.outputs) return;
    u64 base = (m / p.inner) * p.n * p.inner + m % p.inner;
    unsigned kind = p.x.kind;
    unsigned v = ldw(p.x, base), best = 0;
    for (unsigned k = 1; k < p.n; k++) {
        unsigned w = ldw(p.x, base + (u64)k * p.inner);
        if (argmax_greater(kind, w, v)) {
            v = w;
            best = k;
        }
    }
    stu(p.out, m, best);
}

// Softmax of a row, stably: the row maximum (fmaxf skips NaN, like the reference's f32::max),
// the sum of exp(x - max), then exp(x - max) / sum. A row of -inf gives NaN, as the reference.
extern "C" __global__ void softmax_rows(const SoftmaxParams p) {
    __shared__ float shared[32];
    u64 base = (u64)blockIdx.x * p.n;
    float mx = __int_as_float(0xff800000u);
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) mx = fmaxf(mx, ld(p.x, base + k));
    mx = block_max(mx, shared);
    float sum = 0.0f;
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) sum += expf(ld(p.x, base + k) - mx);
    sum = block_sum(sum, shared);
    for (unsigned k = threadIdx.x; k < p.n; k += blockDim.x) st(p.out, base + k, expf(ld(p.x, base + k) - mx) / sum);
}
