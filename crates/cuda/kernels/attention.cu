// Fused attention: out = softmax(q k^T * scale + mask) v per flattened batch (head) b, with
// q [Sq, D], k [Sk, D], v [Sk, Dv] (crates/cuda/src/lower/attention.rs lowers it).
// Softmax is f32 and follows the reference: the row maximum is subtracted (fmaxf skips NaN
// like f32::max), masked keys are -inf and weigh exp(-inf) = 0, and a row with no visible
// key has max -inf, so exp(-inf - -inf) = NaN everywhere, as in PyTorch. Index arithmetic is
// 32-bit: the lowering checks that every element count fits.
//
// `mode` is 0 (no mask), 1 (additive: the mask is read through its broadcast strides over
// the scores [..., Sq, Sk]) or 2 (causal: query i sees keys j <= i + Sk - Sq).

#define ATTENTION_NEG_INF __int_as_float(0xff800000u)

// The mask's offset of score `linear` of the scores [..., Sq, Sk] (`rank` dims).
__device__ __forceinline__ unsigned attention_mask_offset(unsigned linear, unsigned rank, const unsigned* dims,
                                                          const unsigned* strides) {
    unsigned offset = 0;
    for (int k = (int)rank - 1; k >= 0; k--) {
        offset += (linear % dims[k]) * strides[k];
        linear /= dims[k];
    }
    return offset;
}

// Score `s` (already scaled) of query `i` and key `j` after masking; `mrow` is the mask's
// offset of the row's first key and `msk` its stride along keys.
__device__ __forceinline__ float attention_masked(float s, unsigned mode, In mask, unsigned mrow, unsigned msk,
                                                  unsigned i, unsigned j, unsigned sq, unsigned sk) {
    if (mode == 1u) s += ld(mask, mrow + j * msk);
    if (mode == 2u && j > i + (sk - sq)) s = ATTENTION_NEG_INF;
    return s;
}

// V consecutive elements from element `i` (a multiple of V) of a float operand: V = 4 reads
// f32 words as one float4 (16-byte aligned), V = 1 one f32 word or f16 half (HALF).
template <int V, bool HALF>
__device__ __forceinline__ void attention_load(const void* ptr, unsigned i, float* x) {
    if constexpr (V == 4) {
        const float4 f = ((const float4*)ptr)[i >> 2];
        x[0] = f.x;
        x[1] = f.y;
        x[2] = f.z;
        x[3] = f.w;
    } else if constexpr (HALF) {
        x[0] = half_to_float(((const unsigned short*)ptr)[i]);
    } else {
        x[0] = ((const float*)ptr)[i];
    }
}

// Whether an operand of rows of `len` elements can be read as float4s.
__device__ __forceinline__ bool attention_vec4(In x, unsigned len) {
    return x.kind == KIND_F32 && (len & 3u) == 0u && ((u64)x.ptr & 15u) == 0u;
}

// Keys a lane group of `attention_split` scores at once, for loads in flight.
#define ATTENTION_UNROLL 4

// The masked scores of keys j0 + jj (jj < n) of query row `row` (query `i` of batch `b`)
// into `w[jj]`; returns this thread's maximum of them. Groups of g lanes (the least power of
// two covering a key row's loads, at most a warp) take a key each, loading V elements at a
// time, and sum their lanes with shuffles. The loop bound is the same for every thread, so
// whole warps shuffle.
template <int V, bool HALF>
__device__ __forceinline__ float attention_split_scores(const AttentionSplitParams& p, unsigned row, unsigned i,
                                                        unsigned b, unsigned j0, unsigned n, float* w) {
    const unsigned vecs = p.d / V;
    unsigned g = 1;
    while (g < vecs && g < 32u) g <<= 1;
    const unsigned sub = threadIdx.x & (g - 1u), group = threadIdx.x / g, groups = blockDim.x / g;
    const unsigned qbase = row * p.d, kbase = b * p.sk * p.d;
    const unsigned mrow = p.mode == 1u ? attention_mask_offset(row * p.sk, p.rank, p.dims, p.mask_strides) : 0u;
    const unsigned msk = p.mask_strides[p.rank - 1u];
    float top = ATTENTION_NEG_INF;
    for (unsigned base = 0; base < n; base += groups * ATTENTION_UNROLL) {
        unsigned key[ATTENTION_UNROLL];
        float s[ATTENTION_UNROLL], add[ATTENTION_UNROLL];
#pragma unroll
        for (int u = 0; u < ATTENTION_UNROLL; u++) {
            // Keys past the chunk read its last one again; their scores are dropped.
            key[u] = j0 + min(base + u * groups + group, n - 1u);
            s[u] = 0.0f;
            add[u] = p.mode == 1u ? ld(p.mask, mrow + key[u] * msk) : 0.0f;
        }
        for (unsigned c = sub; c < vecs; c += g) {
            float qv[V];
#pragma unroll
            for (int e = 0; e < V; e++) qv[e] = ld(p.q, qbase + c * V + e);
#pragma unroll
            for (int u = 0; u < ATTENTION_UNROLL; u++) {
                float kv[V];
                attention_load<V, HALF>(p.k.ptr, kbase + key[u] * p.d + c * V, kv);
#pragma unroll
                for (int e = 0; e < V; e++) s[u] += qv[e] * kv[e];
            }
        }
#pragma unroll
        for (int u = 0; u < ATTENTION_UNROLL; u++) {
            for (unsigned o = g >> 1; o > 0u; o >>= 1) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
        }
        if (sub == 0u) {
#pragma unroll
            for (int u = 0; u < ATTENTION_UNROLL; u++) {
                const unsigned jj = base + u * groups + group;
                if (jj < n) {
                    // The reference scales, then adds the mask: no fused multiply-add.
                    float x = __fmul_rn(s[u], p.scale) + add[u];
                    if (p.mode == 2u && key[u] > i + (p.sk - p.sq)) x = ATTENTION_NEG_INF;
                    w[jj] = x;
                    top = fmaxf(top, x);
                }
            }
        }
    }
    return top;
}

// The chunk's weights `w` (n of them) times its value rows into `dst` (Dv floats). Threads
// split the Dv / V column groups and, when there are fewer than threads, the keys; the key
// slices are summed through `part` (V floats per thread).
template <int V, bool HALF>
__device__ __forceinline__ void attention_split_values(const AttentionSplitParams& p, const float* w, unsigned vbase,
                                                       unsigned n, float* part, float* dst) {
    const unsigned t = threadIdx.x, nt = blockDim.x, cols = p.dv / V;
    if (cols >= nt) {
        for (unsigned c = t; c < cols; c += nt) {
            float acc[V] = {};
            for (unsigned jj = 0; jj < n; jj++) {
                float x[V];
                attention_load<V, HALF>(p.v.ptr, vbase + jj * p.dv + c * V, x);
#pragma unroll
                for (int e = 0; e < V; e++) acc[e] += w[jj] * x[e];
            }
#pragma unroll
            for (int e = 0; e < V; e++) dst[c * V + e] = acc[e];
        }
        return;
    }
    const unsigned slices = nt / cols, c = t % cols, slice = t / cols;
    float acc[V] = {};
    if (slice < slices) {
#pragma unroll 4
        for (unsigned jj = slice; jj < n; jj += slices) {
            float x[V];
            attention_load<V, HALF>(p.v.ptr, vbase + jj * p.dv + c * V, x);
#pragma unroll
            for (int e = 0; e < V; e++) acc[e] += w[jj] * x[e];
        }
    }
#pragma unroll
    for (int e = 0; e < V; e++) part[t * V + e] = acc[e];
    __syncthreads();
    if (slice == 0u) {
#pragma unroll
        for (int e = 0; e < V; e++) {
            float sum = 0.0f;
            for (unsigned s = 0; s < slices; s++) sum += part[(s * cols + c) * V + e];
            dst[c * V + e] = sum;
        }
    }
}

// Few queries (decoder steps), split over the keys ("flash decoding"): block (row, split)
// takes keys [split * chunk, + chunk) of query row `row` and writes the chunk's maximum m and
// sum of exp(score - m) to `stats` [rows, splits, 2] and its unnormalised weighted sum of
// values to `part` [rows, splits, Dv]; `attention_combine` rescales and adds the splits.
// Dynamic shared memory: blockDim.x float4s for the value slices, then `chunk` weights.
extern "C" __global__ void attention_split(const AttentionSplitParams p) {
    extern __shared__ float4 attention_split_smem[];
    __shared__ float red[32];
    float* part = (float*)attention_split_smem;
    float* w = part + 4u * blockDim.x;
    const unsigned t = threadIdx.x, nt = blockDim.x, row = blockIdx.x, split = blockIdx.y;
    const unsigned i = row % p.sq, b = row / p.sq;
    const unsigned j0 = split * p.chunk, n = min(p.chunk, p.sk - j0);

    float top;
    if (attention_vec4(p.k, p.d)) {
        top = attention_split_scores<4, false>(p, row, i, b, j0, n, w);
    } else if (p.k.kind == KIND_F16) {
        top = attention_split_scores<1, true>(p, row, i, b, j0, n, w);
    } else {
        top = attention_split_scores<1, false>(p, row, i, b, j0, n, w);
    }
    // Its barriers also make every score visible to every thread.
    const float m = block_max(top, red);
    // A chunk with no visible key (m = -inf) weighs exp(-inf - 0) = 0 and stays finite: only
    // the combine, seeing no visible key in any chunk, makes the row NaN.
    const float shift = m == ATTENTION_NEG_INF ? 0.0f : m;
    float l = 0.0f;
    for (unsigned jj = t; jj < n; jj += nt) {
        const float e = expf(w[jj] - shift);
        w[jj] = e;
        l += e;
    }
    const float sum = block_sum(l, red);

    const unsigned slot = row * p.splits + split;
    float* dst = (float*)p.part + slot * p.dv;
    const unsigned vbase = (b * p.sk + j0) * p.dv;
    if (attention_vec4(p.v, p.dv)) {
        attention_split_values<4, false>(p, w, vbase, n, part, dst);
    } else if (p.v.kind == KIND_F16) {
        attention_split_values<1, true>(p, w, vbase, n, part, dst);
    } else {
        attention_split_values<1, false>(p, w, vbase, n, part, dst);
    }
    if (t == 0u) {
        ((float*)p.stats)[2u * slot] = m;
        ((float*)p.stats)[2u * slot + 1u] = sum;
    }
}

// The output row `row` from the splits of `attention_split`: with M the largest chunk
// maximum, out = sum_s part_s exp(m_s - M) / sum_s l_s exp(m_s - M). A row with no visible
// key has M = -inf and comes out NaN. Dynamic shared memory: a float per split.
extern "C" __global__ void attention_combine(const AttentionCombineParams p) {
    extern __shared__ float attention_combine_factor[];
    __shared__ float red[32];
    const unsigned t = threadIdx.x, nt = blockDim.x, row = blockIdx.x;
    const float* stats = (const float*)p.stats + row * p.splits * 2u;
    float top = ATTENTION_NEG_INF;
    for (unsigned s = t; s < p.splits; s += nt) top = fmaxf(top, stats[2u * s]);
    const float m = block_max(top, red);
    float l = 0.0f;
    for (unsigned s = t; s < p.splits; s += nt) {
        const float f = expf(stats[2u * s] - m);
        attention_combine_factor[s] = f;
        l += stats[2u * s + 1u] * f;
    }
    // Its barriers also make every factor visible to every thread.
    const float total = block_sum(l, red);
    const float* part = (const float*)p.part + row * p.splits * p.dv;
    for (unsigned c = t; c < p.dv; c += nt) {
        float acc = 0.0f;
#pragma unroll 4
        for (unsigned s = 0; s < p.splits; s++) acc += part[s * p.dv + c] * attention_combine_factor[s];
        st(p.out, row * p.dv + c, acc / total);
    }
}

// V weights from element `i` (a multiple of V) of `probs`: f16 halves (`half`, V = 4 as one
// 8-byte word) or f32 words (V = 4 as one float4).
template <int V>
__device__ __forceinline__ void attention_store_weights(void* probs, bool half, unsigned i, const float* x) {
    if constexpr (V == 4) {
        if (half) {
            uint2 h;
            h.x = (unsigned)float_to_half(x[0]) | ((unsigned)float_to_half(x[1]) << 16);
            h.y = (unsigned)float_to_half(x[2]) | ((unsigned)float_to_half(x[3]) << 16);
            ((uint2*)probs)[i >> 2] = h;
        } else {
            ((float4*)probs)[i >> 2] = make_float4(x[0], x[1], x[2], x[3]);
        }
    } else if (half) {
        ((unsigned short*)probs)[i] = float_to_half(x[0]);
    } else {
        ((float*)probs)[i] = x[0];
    }
}

// Stores V weights from element `i` (a multiple of V) of the softmax's `probs`: f16 halves
// (`half`) or f32 words.
template <int V>
__device__ __forceinline__ void attention_store_probs(const AttentionSoftmaxParams& p, unsigned i, const float* x) {
    attention_store_weights<V>((void*)p.probs, p.half != 0u, i, x);
}

// One softmax row, V scores at a time (V = 4: Sk a multiple of 4). With `staged` the masked
// scores, then their exponentials, stay in `staged` (the row, in shared memory) and the f32
// scores are read once; without (rows too long for it) they are read again for each pass.
// Each thread touches only its own elements of `staged`, so the passes need no barrier of
// their own.
template <int V>
__device__ __forceinline__ void attention_softmax_row(const AttentionSoftmaxParams& p, float* staged, float* red) {
    const unsigned t = threadIdx.x, nt = blockDim.x, row = blockIdx.x, i = row % p.sq, groups = p.sk / V;
    const unsigned first = row * p.sk;
    const float* s = (const float*)p.scores;
    const unsigned mrow = p.mode == 1u ? attention_mask_offset(first, p.rank, p.dims, p.mask_strides) : 0u;
    const unsigned msk = p.mask_strides[p.rank - 1u];
    // The masked scores of group `g` into `x`.
    auto masked = [&](unsigned g, float* x) {
        attention_load<V, false>(s, first + g * V, x);
#pragma unroll
        for (int e = 0; e < V; e++) x[e] = attention_masked(x[e], p.mode, p.mask, mrow, msk, i, g * V + e, p.sq, p.sk);
    };

    float top = ATTENTION_NEG_INF;
    for (unsigned g = t; g < groups; g += nt) {
        float x[V];
        masked(g, x);
#pragma unroll
        for (int e = 0; e < V; e++) {
            top = fmaxf(top, x[e]);
            if (p.staged) staged[g * V + e] = x[e];
        }
    }
    const float m = block_max(top, red);
    float l = 0.0f;
    for (unsigned g = t; g < groups; g += nt) {
        float x[V];
        if (p.staged) {
#pragma unroll
            for (int e = 0; e < V; e++) x[e] = staged[g * V + e];
        } else {
            masked(g, x);
        }
#pragma unroll
        for (int e = 0; e < V; e++) {
            x[e] = expf(x[e] - m);
            l += x[e];
            if (p.staged) staged[g * V + e] = x[e];
        }
    }
    const float total = block_sum(l, red);
    for (unsigned g = t; g < groups; g += nt) {
        float x[V];
        if (p.staged) {
#pragma unroll
            for (int e = 0; e < V; e++) x[e] = staged[g * V + e] / total;
        } else {
            masked(g, x);
#pragma unroll
            for (int e = 0; e < V; e++) x[e] = expf(x[e] - m) / total;
        }
        attention_store_probs<V>(p, first + g * V, x);
    }
}

// One softmax row per warp (`row`), no block barrier: lane `lane` holds groups lane + 32 k
// (k < K) of V scores in registers, so the f32 scores are read once, all of them in flight
// at once, and the weights are written V at a time. The same numerics as the block path:
// masked scores, their maximum, exp(x - max), their sum, each divided by the sum. The fields
// are read once into registers: the stores through generic pointers would otherwise make the
// compiler reload them from the parameters' local copy.
template <int V, int K>
__device__ __forceinline__ void attention_softmax_warp(const AttentionSoftmaxParams& p, unsigned row) {
    const unsigned sq = p.sq, sk = p.sk, mode = p.mode;
    const In mask = p.mask;
    const bool half = p.half != 0u;
    void* const probs = (void*)p.probs;
    const unsigned lane = threadIdx.x & 31u, i = row % sq, groups = sk / V, first = row * sk;
    const float* s = (const float*)p.scores;
    const unsigned mrow = mode == 1u ? attention_mask_offset(first, p.rank, p.dims, p.mask_strides) : 0u;
    const unsigned msk = p.mask_strides[p.rank - 1u];
    float x[K][V];
    float top = ATTENTION_NEG_INF;
#pragma unroll
    for (int k = 0; k < K; k++) {
        const unsigned g = lane + 32u * k;
        if (g < groups) {
            attention_load<V, false>(s, first + g * V, x[k]);
#pragma unroll
            for (int e = 0; e < V; e++) {
                x[k][e] = attention_masked(x[k][e], mode, mask, mrow, msk, i, g * V + e, sq, sk);
                top = fmaxf(top, x[k][e]);
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
    float l = 0.0f;
#pragma unroll
    for (int k = 0; k < K; k++) {
        if (lane + 32u * k < groups) {
#pragma unroll
            for (int e = 0; e < V; e++) {
                x[k][e] = expf(x[k][e] - top);
                l += x[k][e];
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
#pragma unroll
    for (int k = 0; k < K; k++) {
        const unsigned g = lane + 32u * k;
        if (g < groups) {
#pragma unroll
            for (int e = 0; e < V; e++) x[k][e] = x[k][e] / l;
            attention_store_weights<V>(probs, half, first + g * V, x[k]);
        }
    }
}

// The warp path for V scores per group and `per_lane` (a power of two) groups per lane.
template <int V>
__device__ __forceinline__ void attention_softmax_warp_any(const AttentionSoftmaxParams& p, unsigned row) {
    switch (p.per_lane) {
        case 1u: attention_softmax_warp<V, 1>(p, row); break;
        case 2u: attention_softmax_warp<V, 2>(p, row); break;
        case 4u: attention_softmax_warp<V, 4>(p, row); break;
        case 8u: attention_softmax_warp<V, 8>(p, row); break;
        case 16u: attention_softmax_warp<V, 16>(p, row); break;
        case 32u: if constexpr (V == 1) attention_softmax_warp<1, 32>(p, row); break;
        case 64u: if constexpr (V == 1) attention_softmax_warp<1, 64>(p, row); break;
        default: break;
    }
}

// Many queries: the softmax of each row of the scores (f32, already scaled) that the first
// product wrote, masked on the way. Rows of up to 64 scores per lane (`per_lane` groups of
// 4, or of 1 when Sk is not a multiple of 4) take a warp each, blockDim.x / 32 rows per
// block; longer ones (`per_lane` 0) a block each. The weights go to `probs` as f16 halves
// (`half`: the second product's tensor-core operand) or f32 (possibly the scores themselves:
// each element is read and then written by the same thread). Dynamic shared memory: the
// row (Sk floats) when `staged` (block path only).
extern "C" __global__ void attention_softmax(const AttentionSoftmaxParams p) {
    extern __shared__ float4 attention_softmax_row_smem[];
    __shared__ float red[32];
    if (p.per_lane != 0u) {
        // Whole warps leave together: nothing below waits on the block.
        const unsigned row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        if (row >= p.rows) return;
        if ((p.sk & 3u) == 0u) {
            attention_softmax_warp_any<4>(p, row);
        } else {
            attention_softmax_warp_any<1>(p, row);
        }
        return;
    }
    float* staged = (float*)attention_softmax_row_smem;
    if ((p.sk & 3u) == 0u) {
        attention_softmax_row<4>(p, staged, red);
    } else {
        attention_softmax_row<1>(p, staged, red);
    }
}

// f32 operands of the product path as f16 halves for the tensor cores: blockIdx.y picks
// operand y (`src[y]`, `n[y]` elements, to `dst[y]`); each thread converts four elements,
// reading them as one float4 where it can and writing them as one 8-byte word.
extern "C" __global__ void attention_convert(const AttentionConvertParams p) {
    const unsigned y = blockIdx.y;
    const In x = y == 0u ? p.src[0] : (y == 1u ? p.src[1] : p.src[2]);
    unsigned short* out = (unsigned short*)(y == 0u ? p.dst[0] : (y == 1u ? p.dst[1] : p.dst[2]));
    const unsigned n = y == 0u ? p.n[0] : (y == 1u ? p.n[1] : p.n[2]);
    const unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * 4u;
    if (i >= n) return;
    if (i + 4u <= n && x.kind == KIND_F32 && ((u64)x.ptr & 15u) == 0u) {
        const float4 f = ((const float4*)x.ptr)[i >> 2];
        uint2 h;
        h.x = (unsigned)float_to_half(f.x) | ((unsigned)float_to_half(f.y) << 16);
        h.y = (unsigned)float_to_half(f.z) | ((unsigned)float_to_half(f.w) << 16);
        ((uint2*)out)[i >> 2] = h;
        return;
    }
    for (unsigned e = i; e < min(i + 4u, n); e++) out[e] = float_to_half(ld(x, e));
}
