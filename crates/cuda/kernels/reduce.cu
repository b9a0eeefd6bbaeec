// Reductions, argmax, top_k and softmax (crates/cuda/src/lower/reduce.rs). The input is
// viewed as [outer, n, inner] around the axis; result m = o * inner + i folds the run of n
// values at (o * n + k) * inner + i. Indices are 32-bit: the lowering keeps element counts
// below 2^32. (top_k, below, has a layout of its own.)
//
// Along the last axis (inner == 1) `*_rows` kernels run on a grid (rows, parts): block (r, y)
// folds values [y * chunk, (y + 1) * chunk) of row r with block reductions. With one part it
// writes the result; with several (a few long rows, like the decoder's 51864 logits, spread
// over the device) it writes a partial result to scratch (`partials`, row-major [rows, parts])
// and `*_combine` folds each row's partials with one warp. `*_runs` kernels take a thread per
// result and fold its run in index order. Arithmetic is f32.

#define REDUCE_SUM 0u
#define REDUCE_MEAN 1u
#define REDUCE_MAX 2u

#define REDUCE_NEG_INF __int_as_float(0xff800000u)

// NaN by its bits: no comparison the compiler might fold.
__device__ __forceinline__ bool reduce_is_nan(float x) {
    return (__float_as_uint(x) & 0x7fffffffu) > 0x7f800000u;
}

// The larger of a and b, NaN if either is (the reference's max propagates NaN; fmaxf drops it).
__device__ __forceinline__ float reduce_max_nan(float a, float b) {
    return reduce_is_nan(a) ? a : reduce_is_nan(b) ? b : fmaxf(a, b);
}

// Calls f(k, word) once for every k in [lo, hi) of the row starting at element `base`, the
// block's threads sharing the values: `word` is the 32-bit word of element base + k (ldw: an
// f16 is widened to its f32 bits). 32-bit words are read 16 bytes at a time from the first
// 16-byte aligned one on (up to three values before it and after the last whole 16 bytes are
// read one by one), so a thread sees its values in no particular order.
template <typename F>
__device__ __forceinline__ void reduce_visit(In x, u64 base, unsigned lo, unsigned hi, F f) {
    if (hi <= lo) return;
    if (x.kind == KIND_F16) {
        for (unsigned k = lo + threadIdx.x; k < hi; k += blockDim.x) f(k, ldw(x, base + k));
        return;
    }
    const unsigned* w = (const unsigned*)x.ptr + base;
    unsigned skew = (unsigned)(((u64)(w + lo) >> 2) & 3u);
    unsigned a = min(hi, lo + ((4u - skew) & 3u));
    unsigned vecs = (hi - a) >> 2;
    unsigned b = a + 4u * vecs;
    if (threadIdx.x < a - lo) f(lo + threadIdx.x, w[lo + threadIdx.x]);
    if (threadIdx.x < hi - b) f(b + threadIdx.x, w[b + threadIdx.x]);
    const uint4* v = (const uint4*)(w + a);
#pragma unroll 4
    for (unsigned j = threadIdx.x; j < vecs; j += blockDim.x) {
        uint4 q = v[j];
        unsigned k = a + 4u * j;
        f(k, q.x);
        f(k + 1u, q.y);
        f(k + 2u, q.z);
        f(k + 3u, q.w);
    }
}

// A value word of a float reduction as f32 (integer kinds cannot reach a reduction, whose
// input is a float tensor, but convert as `ld` would).
__device__ __forceinline__ float reduce_value(unsigned kind, unsigned w) {
    if (kind == KIND_I32) return (float)(int)w;
    if (kind == KIND_U32) return (float)w;
    return __uint_as_float(w);
}

// `v` folded over a warp (max with NaN propagating, or sum): every lane gets the same value.
__device__ __forceinline__ float reduce_warp(float v, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? reduce_max_nan(v, u) : v + u;
    }
    return v;
}

// `block_max` with NaN propagating: every thread gets it. `shared` holds 32 floats.
__device__ __forceinline__ float reduce_block_max_nan(float v, float* shared) {
    v = reduce_warp(v, true);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared[lane] : REDUCE_NEG_INF;
    return reduce_warp(v, true);
}

// The reduction of `v`, the fold of a run of `n` values, finished (a mean divides the sum).
__device__ __forceinline__ float reduce_finish(float v, unsigned op, unsigned n) {
    return op == REDUCE_MEAN ? v / (float)n : v;
}

extern "C" __global__ void reduce_rows(const ReduceParams p) {
    __shared__ float shared[32];
    unsigned row = blockIdx.x, part = blockIdx.y;
    unsigned lo = part * p.chunk, hi = min(p.n, lo + p.chunk);
    u64 base = (u64)row * p.n;
    unsigned kind = p.x.kind;
    float v;
    if (p.op == REDUCE_MAX) {
        v = REDUCE_NEG_INF;
        reduce_visit(p.x, base, lo, hi, [&](unsigned, unsigned w) { v = reduce_max_nan(v, reduce_value(kind, w)); });
        v = reduce_block_max_nan(v, shared);
    } else {
        v = 0.0f;
        reduce_visit(p.x, base, lo, hi, [&](unsigned, unsigned w) { v += reduce_value(kind, w); });
        v = block_sum(v, shared);
    }
    if (threadIdx.x != 0) return;
    if (p.parts == 1) st(p.out, row, reduce_finish(v, p.op, p.n));
    else ((float*)p.partials)[row * p.parts + part] = v;
}

// One warp per row (grid rows, block 32): the row's partial results folded and finished.
extern "C" __global__ void reduce_combine(const ReduceParams p) {
    unsigned row = blockIdx.x, lane = threadIdx.x;
    const float* part = (const float*)p.partials + row * p.parts;
    bool is_max = p.op == REDUCE_MAX;
    float v = is_max ? REDUCE_NEG_INF : 0.0f;
    for (unsigned k = lane; k < p.parts; k += 32u) v = is_max ? reduce_max_nan(v, part[k]) : v + part[k];
    v = reduce_warp(v, is_max);
    if (lane == 0) st(p.out, row, reduce_finish(v, p.op, p.n));
}

extern "C" __global__ void reduce_runs(const ReduceParams p) {
    u64 g = global_index();
    if (g >= p.outputs) return;
    unsigned m = (unsigned)g;
    unsigned o = m / p.inner;
    unsigned at = o * p.n * p.inner + (m - o * p.inner);
    float v;
    if (p.op == REDUCE_MAX) {
        v = REDUCE_NEG_INF;
        for (unsigned k = 0; k < p.n; k++, at += p.inner) v = reduce_max_nan(v, ld(p.x, at));
    } else {
        v = 0.0f;
        for (unsigned k = 0; k < p.n; k++, at += p.inner) v += ld(p.x, at);
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
// index, so combining candidates in any order finds the first largest value.
__device__ __forceinline__ bool argmax_beats(unsigned kind, unsigned av, unsigned ak, unsigned bv, unsigned bk) {
    return argmax_greater(kind, bv, av) || (!argmax_greater(kind, av, bv) && bk < ak);
}

// The value word of "no candidate yet": the lowest value of the kind (-inf for floats), at
// index 0xffffffff, so every genuine candidate beats it (a greater value, or an equal one at a
// smaller index) and it never wins over a value of the run.
__device__ __forceinline__ unsigned argmax_lowest(unsigned kind) {
    if (kind == KIND_I32) return 0x80000000u;
    if (kind == KIND_U32) return 0u;
    return 0xff800000u;
}

// The best candidate of the warp's lanes, in every lane.
__device__ __forceinline__ void argmax_warp(unsigned kind, unsigned& v, unsigned& best) {
    for (int o = 16; o > 0; o >>= 1) {
        unsigned ov = __shfl_xor_sync(0xffffffffu, v, o), ok = __shfl_xor_sync(0xffffffffu, best, o);
        if (argmax_beats(kind, v, best, ov, ok)) {
            v = ov;
            best = ok;
        }
    }
}

// Each thread keeps the best of its values, warps then the block combine the candidates; the
// result (one part) is the index, a partial result the pair (value word, index).
extern "C" __global__ void argmax_rows(const ArgmaxParams p) {
    __shared__ unsigned shared_v[32];
    __shared__ unsigned shared_k[32];
    unsigned row = blockIdx.x, part = blockIdx.y;
    unsigned lo = part * p.chunk, hi = min(p.n, lo + p.chunk);
    u64 base = (u64)row * p.n;
    unsigned kind = p.x.kind;
    unsigned v = argmax_lowest(kind), best = 0xffffffffu;
    reduce_visit(p.x, base, lo, hi, [&](unsigned k, unsigned w) {
        if (argmax_beats(kind, v, best, w, k)) {
            v = w;
            best = k;
        }
    });
    argmax_warp(kind, v, best);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        shared_v[warp] = v;
        shared_k[warp] = best;
    }
    __syncthreads();
    if (warp != 0) return;
    int warps = blockDim.x >> 5;
    v = lane < warps ? shared_v[lane] : argmax_lowest(kind);
    best = lane < warps ? shared_k[lane] : 0xffffffffu;
    argmax_warp(kind, v, best);
    if (lane != 0) return;
    if (p.parts == 1) {
        stu(p.out, row, best);
    } else {
        unsigned* pair = (unsigned*)p.partials + 2u * (row * p.parts + part);
        pair[0] = v;
        pair[1] = best;
    }
}

// One warp per row (grid rows, block 32): the row's partial (value, index) pairs combined.
extern "C" __global__ void argmax_combine(const ArgmaxParams p) {
    unsigned row = blockIdx.x, lane = threadIdx.x;
    const unsigned* pairs = (const unsigned*)p.partials + 2u * row * p.parts;
    unsigned kind = p.x.kind;
    unsigned v = argmax_lowest(kind), best = 0xffffffffu;
    for (unsigned k = lane; k < p.parts; k += 32u) {
        unsigned w = pairs[2u * k], i = pairs[2u * k + 1u];
        if (argmax_beats(kind, v, best, w, i)) {
            v = w;
            best = i;
        }
    }
    argmax_warp(kind, v, best);
    if (lane == 0) stu(p.out, row, best);
}

extern "C" __global__ void argmax_runs(const ArgmaxParams p) {
    u64 g = global_index();
    if (g >= p.outputs) return;
    unsigned m = (unsigned)g;
    unsigned o = m / p.inner;
    unsigned at = o * p.n * p.inner + (m - o * p.inner);
    unsigned kind = p.x.kind;
    unsigned v = ldw(p.x, at), best = 0;
    for (unsigned k = 1; k < p.n; k++) {
        at += p.inner;
        unsigned w = ldw(p.x, at);
        if (argmax_greater(kind, w, v)) {
            v = w;
            best = k;
        }
    }
    stu(p.out, m, best);
}

// top_k: the indices of the first k values of a row in the reference's order (larger values
// first, equal values by lower index, NaN above every number), as u32s [rows, k]. Values are
// compared by u32 keys whose order is theirs, and candidates as pairs (key, index): the first
// of two has the larger key, or the same key at the lower index. NONE (key 0, index
// 0xffffffff) comes after every genuine candidate (indices stay below 2^32 - 1).
//
// A warp selects the first k of the candidates its lanes hold (c = from, from + stride, ...)
// in k rounds: each lane keeps the first of its candidates not yet picked, a butterfly of
// shuffles finds the first of the lanes' pairs, and only the lane that held it moves on, to
// its first candidate after the pick (every other lane's pair still comes after it). Nothing
// is marked or changed, so ties and repeated values need no care. A lane keeps its first
// TOP_K_HELD candidates in registers, so that search reads no memory unless it holds more
// (the lowering sizes blocks for at most TOP_K_HELD). A block runs that in every warp, then
// warp 0 selects among the warps' picks (in shared memory) the same way.
//
// `top_k_rows` takes a block per part of a row (blocks row * parts + part); with one part it
// writes the row's indices, with several its k pairs go to `partials` ([rows, parts, k]
// pairs, NONE after a part's last value when it has fewer than k), which `top_k_combine`
// merges with a block per row. k is at most TOP_K_MAX, blocks at most TOP_K_WARPS warps.

#define TOP_K_MAX 64u
#define TOP_K_WARPS 16u
#define TOP_K_HELD 16u
#define TOP_K_NONE 0xffffffffu

// The key of value word `w` of an input of `kind`: f32 words (f16 widened) with negative
// values' bits reversed below the positive ones, -0 as +0 and every NaN the largest key; i32
// with the sign bit flipped; u32 as they are.
__device__ __forceinline__ unsigned top_k_key(unsigned kind, unsigned w) {
    if (kind == KIND_I32) return w ^ 0x80000000u;
    if (kind == KIND_U32) return w;
    unsigned a = w & 0x7fffffffu;
    if (a > 0x7f800000u) return 0xffffffffu;
    if (a == 0u) return 0x80000000u;
    return (w & 0x80000000u) ? ~w : (w | 0x80000000u);
}

// Whether pair (ak, ai) comes before (bk, bi).
__device__ __forceinline__ bool top_k_before(unsigned ak, unsigned ai, unsigned bk, unsigned bi) {
    return ak > bk || (ak == bk && ai < bi);
}

// A lane's candidates: c = from, from + stride, ... below `count`, read with `cand(c, key,
// index)`; the first TOP_K_HELD of them kept in registers (NONE where there are fewer).
template <typename C>
struct TopKLane {
    C cand;
    unsigned from, stride, count;
    unsigned keys[TOP_K_HELD], indices[TOP_K_HELD];

    __device__ __forceinline__ TopKLane(C cand, unsigned from, unsigned stride, unsigned count)
        : cand(cand), from(from), stride(stride), count(count) {
#pragma unroll
        for (unsigned j = 0; j < TOP_K_HELD; j++) {
            unsigned c = from + j * stride;
            keys[j] = 0u;
            indices[j] = TOP_K_NONE;
            if (c < count) cand(c, keys[j], indices[j]);
        }
    }

    // (bk, bi) becomes (ck, ci) if that comes after (ak, ai) (or `all`) and before (bk, bi).
    __device__ __forceinline__ static void consider(bool all, unsigned ak, unsigned ai, unsigned ck, unsigned ci,
                                                    unsigned& bk, unsigned& bi) {
        if ((all || top_k_before(ak, ai, ck, ci)) && top_k_before(ck, ci, bk, bi)) {
            bk = ck;
            bi = ci;
        }
    }

    // The first of the lane's candidates after (ak, ai), or the first of all when `all`; NONE
    // if there is none.
    __device__ __forceinline__ void first_after(bool all, unsigned ak, unsigned ai, unsigned& key, unsigned& index) {
        unsigned bk = 0u, bi = TOP_K_NONE;
#pragma unroll
        for (unsigned j = 0; j < TOP_K_HELD; j++) consider(all, ak, ai, keys[j], indices[j], bk, bi);
        for (unsigned c = from + TOP_K_HELD * stride; c < count; c += stride) {
            unsigned ck, ci;
            cand(c, ck, ci);
            consider(all, ak, ai, ck, ci, bk, bi);
        }
        key = bk;
        index = bi;
    }
};

// The first k of the warp's candidates (the lane's: from, from + stride, ... below `count`),
// in order: `emit(r, key, index)` in every lane for r = 0 .. k-1.
template <typename C, typename E>
__device__ __forceinline__ void top_k_warp(C cand, unsigned from, unsigned stride, unsigned count, unsigned k, E emit) {
    TopKLane<C> lane(cand, from, stride, count);
    unsigned key, index;
    lane.first_after(true, 0u, 0u, key, index);
    for (unsigned r = 0; r < k; r++) {
        unsigned bk = key, bi = index;
        for (int o = 16; o > 0; o >>= 1) {
            unsigned ok = __shfl_xor_sync(0xffffffffu, bk, o), oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (top_k_before(ok, oi, bk, bi)) {
                bk = ok;
                bi = oi;
            }
        }
        emit(r, bk, bi);
        if (key == bk && index == bi) lane.first_after(false, bk, bi, key, index);
    }
}

// The first k of the block's `count` candidates (thread t holds t, t + blockDim.x, ...), in
// order: `emit(r, key, index)` in lane 0 of warp 0. `keys` and `indices` hold TOP_K_WARPS * k
// words each.
template <typename C, typename E>
__device__ __forceinline__ void top_k_block(C cand, unsigned count, unsigned k, unsigned* keys, unsigned* indices,
                                            E emit) {
    unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    top_k_warp(cand, threadIdx.x, blockDim.x, count, k, [&](unsigned r, unsigned key, unsigned index) {
        if (lane == 0u) {
            keys[warp * k + r] = key;
            indices[warp * k + r] = index;
        }
    });
    __syncthreads();
    if (warp != 0u) return;
    auto picked = [&](unsigned c, unsigned& key, unsigned& index) {
        key = keys[c];
        index = indices[c];
    };
    top_k_warp(picked, lane, 32u, (blockDim.x >> 5) * k, k, [&](unsigned r, unsigned key, unsigned index) {
        if (lane == 0u) emit(r, key, index);
    });
}

extern "C" __global__ void top_k_rows(const TopKParams p) {
    __shared__ unsigned keys[TOP_K_WARPS * TOP_K_MAX];
    __shared__ unsigned indices[TOP_K_WARPS * TOP_K_MAX];
    unsigned row = blockIdx.x / p.parts, part = blockIdx.x % p.parts;
    unsigned lo = part * p.chunk, count = min(p.chunk, p.n - lo);
    u64 base = (u64)row * p.n + lo;
    In x = p.x;
    auto value = [=](unsigned c, unsigned& key, unsigned& index) {
        key = top_k_key(x.kind, ldw(x, base + c));
        index = lo + c;
    };
    top_k_block(value, count, p.k, keys, indices, [&](unsigned r, unsigned key, unsigned index) {
        if (p.parts == 1u) {
            stu(p.out, (u64)row * p.k + r, index);
        } else {
            unsigned* pair = (unsigned*)p.partials + 2u * ((u64)blockIdx.x * p.k + r);
            pair[0] = key;
            pair[1] = index;
        }
    });
}

extern "C" __global__ void top_k_combine(const TopKParams p) {
    __shared__ unsigned keys[TOP_K_WARPS * TOP_K_MAX];
    __shared__ unsigned indices[TOP_K_WARPS * TOP_K_MAX];
    unsigned row = blockIdx.x;
    const unsigned* pairs = (const unsigned*)p.partials + 2u * (u64)row * p.parts * p.k;
    auto pair = [=](unsigned c, unsigned& key, unsigned& index) {
        key = pairs[2u * c];
        index = pairs[2u * c + 1u];
    };
    top_k_block(pair, p.parts * p.k, p.k, keys, indices, [&](unsigned r, unsigned, unsigned index) {
        stu(p.out, (u64)row * p.k + r, index);
    });
}

// Softmax of a row, stably: the row maximum (fmaxf skips NaN, like the reference's f32::max),
// the sum of exp(x - max), then exp(x - max) / sum. A row of -inf gives NaN, as the reference.
// One block per row.
extern "C" __global__ void softmax_rows(const SoftmaxParams p) {
    __shared__ float shared[32];
    unsigned row = blockIdx.x;
    u64 base = (u64)row * p.n;
    Out out = p.out;
    float mx = REDUCE_NEG_INF;
    reduce_visit(p.x, base, 0u, p.n, [&](unsigned, unsigned w) { mx = fmaxf(mx, __uint_as_float(w)); });
    mx = block_max(mx, shared);
    float sum = 0.0f;
    reduce_visit(p.x, base, 0u, p.n, [&](unsigned, unsigned w) { sum += expf(__uint_as_float(w) - mx); });
    sum = block_sum(sum, shared);
    reduce_visit(p.x, base, 0u, p.n, [&](unsigned k, unsigned w) { st(out, base + k, expf(__uint_as_float(w) - mx) / sum); });
}

// A row split into parts, first pass: part y's maximum m and sum s of exp(x - m), as the pair
// (m, s). A part without a number above -inf (only -inf and NaN values) sums exp(x - 0)
// instead: 0 for each -inf, NaN for a NaN, so the combined sum stays right (the part adds
// nothing, or NaN as the reference's sum would be).
extern "C" __global__ void softmax_parts(const SoftmaxParams p) {
    __shared__ float shared[32];
    unsigned row = blockIdx.x, part = blockIdx.y;
    unsigned lo = part * p.chunk, hi = min(p.n, lo + p.chunk);
    u64 base = (u64)row * p.n;
    float mx = REDUCE_NEG_INF;
    reduce_visit(p.x, base, lo, hi, [&](unsigned, unsigned w) { mx = fmaxf(mx, __uint_as_float(w)); });
    mx = block_max(mx, shared);
    float shift = mx == REDUCE_NEG_INF ? 0.0f : mx;
    float sum = 0.0f;
    reduce_visit(p.x, base, lo, hi, [&](unsigned, unsigned w) { sum += expf(__uint_as_float(w) - shift); });
    sum = block_sum(sum, shared);
    if (threadIdx.x != 0) return;
    float* pair = (float*)p.partials + 2u * (row * p.parts + part);
    pair[0] = mx;
    pair[1] = sum;
}

// Second pass, on the same grid: every warp folds the row's pairs into the row maximum M and
// sum S = sum of s * exp(m - M) (the same operations in the same order in every warp, so all
// blocks of a row divide by the same S), then the block writes exp(x - M) / S over its part.
// If M is -inf (no number above -inf in the row), x - M is NaN for every value: a NaN row, as
// the reference gives.
extern "C" __global__ void softmax_finish(const SoftmaxParams p) {
    unsigned row = blockIdx.x, part = blockIdx.y, lane = threadIdx.x & 31u;
    const float* pairs = (const float*)p.partials + 2u * row * p.parts;
    float mx = REDUCE_NEG_INF;
    for (unsigned k = lane; k < p.parts; k += 32u) mx = fmaxf(mx, pairs[2u * k]);
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    float sum = 0.0f;
    for (unsigned k = lane; k < p.parts; k += 32u) {
        float m = pairs[2u * k], s = pairs[2u * k + 1u];
        sum += m == REDUCE_NEG_INF ? s : s * expf(m - mx);
    }
    sum = reduce_warp(sum, false);
    unsigned lo = part * p.chunk, hi = min(p.n, lo + p.chunk);
    u64 base = (u64)row * p.n;
    Out out = p.out;
    reduce_visit(p.x, base, lo, hi, [&](unsigned k, unsigned w) { st(out, base + k, expf(__uint_as_float(w) - mx) / sum); });
}
