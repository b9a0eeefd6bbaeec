// Fused attention: out = softmax(q k^T * scale + mask) v per flattened batch (head) b, with
// q [Sq, D], k [Sk, D], v [Sk, Dv] (crates/native/src/cuda/lower/attention.rs lowers it).
// Softmax is f32 and follows the reference exactly: the row maximum is subtracted (fmaxf
// skips NaN like f32::max), masked keys are -inf and weigh exp(-inf) = 0, and a row with no
// visible key has max -inf, so exp(-inf - -inf) = NaN everywhere, as in PyTorch.
//
// `mode` is 0 (no mask), 1 (additive: the mask is read through its broadcast strides over
// the scores [..., Sq, Sk]) or 2 (causal: query i sees keys j <= i + Sk - Sq).

#define ATTENTION_NEG_INF __int_as_float(0xff800000u)

// Score `s` of query `i` and key `j` after masking; `mrow` is the mask's offset of the row's
// first key and `msk` its stride along keys.
__device__ __forceinline__ float attention_masked(float s, unsigned mode, In mask, u64 mrow, unsigned msk, unsigned i,
                                                  unsigned j, unsigned sq, unsigned sk) {
    if (mode == 1u) s += ld(mask, mrow + (u64)j * msk);
    if (mode == 2u && j > i + (sk - sq)) s = ATTENTION_NEG_INF;
    return s;
}

// Element `i` of a float operand stored as f16 halves (`HALF`) or f32 words: the kind is
// chosen once per loop, so unrolled loops batch their loads.
template <bool HALF>
__device__ __forceinline__ float attention_ld(const void* ptr, u64 i) {
    if (HALF) return half_to_float(((const unsigned short*)ptr)[i]);
    return ((const float*)ptr)[i];
}

// Keys a warp scores at once in `attention_rows`, for loads in flight.
#define ATTENTION_KEYS 8

// The scores of keys j (before masking) into `scores`: a warp takes ATTENTION_KEYS keys at a
// time, its lanes splitting D so that K rows are read coalesced.
template <bool HALF>
__device__ __forceinline__ void attention_row_scores(const AttentionRowsParams& p, const float* qs, u64 kbase,
                                                     float* scores) {
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (unsigned j0 = warp * ATTENTION_KEYS; j0 < p.sk; j0 += warps * ATTENTION_KEYS) {
        float s[ATTENTION_KEYS];
#pragma unroll
        for (int u = 0; u < ATTENTION_KEYS; u++) s[u] = 0.0f;
        for (unsigned d = lane; d < p.d; d += 32u) {
            const float qd = qs[d];
#pragma unroll
            for (int u = 0; u < ATTENTION_KEYS; u++) {
                // Keys past the end read the last one again; their scores are dropped.
                const unsigned j = min(j0 + u, p.sk - 1u);
                s[u] += qd * attention_ld<HALF>(p.k.ptr, kbase + (u64)j * p.d + d);
            }
        }
#pragma unroll
        for (int u = 0; u < ATTENTION_KEYS; u++) {
            for (int o = 16; o > 0; o >>= 1) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
        }
        if (lane == 0) {
#pragma unroll
            for (int u = 0; u < ATTENTION_KEYS; u++) {
                if (j0 + u < p.sk) scores[j0 + u] = s[u];
            }
        }
    }
}

// Output column `c` summed over keys j = first, first + step, ... < Sk: weights times values.
template <bool HALF>
__device__ __forceinline__ float attention_row_values(const AttentionRowsParams& p, const float* w, u64 vbase,
                                                      unsigned c, unsigned first, unsigned step) {
    float acc = 0.0f;
#pragma unroll 8
    for (unsigned j = first; j < p.sk; j += step) acc += w[j] * attention_ld<HALF>(p.v.ptr, vbase + (u64)j * p.dv + c);
    return acc;
}

// Few queries (decoder steps): a block per (batch, query row). Warps score keys into dynamic
// shared memory, the block reduces the maximum and the sum, then threads split the Dv output
// columns and, when Dv is below the block size, the keys (slices added at the end). Dynamic
// shared memory: Sk scores, the query row (D), blockDim.x partial sums and 32 floats for the
// block reductions. q, k and v are f32 words or f16 halves (float dtypes only).
extern "C" __global__ void attention_rows(const AttentionRowsParams p) {
    extern __shared__ float smem[];
    float* scores = smem;
    float* qs = scores + p.sk;
    float* part = qs + p.d;
    float* red = part + blockDim.x;
    const unsigned t = threadIdx.x, nt = blockDim.x;
    const u64 row = blockIdx.x;
    const unsigned i = (unsigned)(row % p.sq);
    const u64 b = row / p.sq;
    const u64 kbase = b * p.sk * p.d, vbase = b * p.sk * p.dv;
    const u64 mrow = p.mode == 1u ? broadcast_offset(row * p.sk, p.rank, p.dims, p.mask_strides) : 0;
    const unsigned msk = p.mask_strides[p.rank - 1];

    for (unsigned d = t; d < p.d; d += nt) qs[d] = ld(p.q, row * p.d + d);
    __syncthreads();
    if (p.k.kind == KIND_F16) {
        attention_row_scores<true>(p, qs, kbase, scores);
    } else {
        attention_row_scores<false>(p, qs, kbase, scores);
    }
    __syncthreads();

    float top = ATTENTION_NEG_INF;
    for (unsigned j = t; j < p.sk; j += nt) {
        const float s = attention_masked(scores[j] * p.scale, p.mode, p.mask, mrow, msk, i, j, p.sq, p.sk);
        scores[j] = s;
        top = fmaxf(top, s);
    }
    const float m = block_max(top, red);
    float l = 0.0f;
    for (unsigned j = t; j < p.sk; j += nt) {
        const float w = expf(scores[j] - m);
        scores[j] = w;
        l += w;
    }
    // Its barriers also make every weight visible to every thread.
    const float total = block_sum(l, red);

    const bool half = p.v.kind == KIND_F16;
    const u64 obase = row * p.dv;
    if (p.dv >= nt) {
        for (unsigned c = t; c < p.dv; c += nt) {
            const float acc = half ? attention_row_values<true>(p, scores, vbase, c, 0, 1)
                                   : attention_row_values<false>(p, scores, vbase, c, 0, 1);
            st(p.out, obase + c, acc / total);
        }
        return;
    }
    const unsigned slices = nt / p.dv, c = t % p.dv, slice = t / p.dv;
    float acc = 0.0f;
    if (slice < slices) {
        acc = half ? attention_row_values<true>(p, scores, vbase, c, slice, slices)
                   : attention_row_values<false>(p, scores, vbase, c, slice, slices);
    }
    part[t] = acc;
    __syncthreads();
    if (slice == 0) {
        float sum = 0.0f;
        for (unsigned s = 0; s < slices; s++) sum += part[s * p.dv + c];
        st(p.out, obase + c, sum / total);
    }
}

// Many queries: the softmax of one row of the scores (f32, already scaled) that the first
// product wrote, masked on the way; a block per row. The weights go to `probs` as f16 halves
// (`half`: the second product's tensor-core operand) or f32 (possibly the scores themselves:
// each element is read and then written by the same thread).
extern "C" __global__ void attention_softmax(const AttentionSoftmaxParams p) {
    __shared__ float red[32];
    const unsigned t = threadIdx.x, nt = blockDim.x;
    const u64 row = blockIdx.x;
    const unsigned i = (unsigned)(row % p.sq);
    const float* s = (const float*)p.scores + row * p.sk;
    const u64 mrow = p.mode == 1u ? broadcast_offset(row * p.sk, p.rank, p.dims, p.mask_strides) : 0;
    const unsigned msk = p.mask_strides[p.rank - 1];

    float top = ATTENTION_NEG_INF;
    for (unsigned j = t; j < p.sk; j += nt) {
        top = fmaxf(top, attention_masked(s[j], p.mode, p.mask, mrow, msk, i, j, p.sq, p.sk));
    }
    const float m = block_max(top, red);
    float l = 0.0f;
    for (unsigned j = t; j < p.sk; j += nt) {
        l += expf(attention_masked(s[j], p.mode, p.mask, mrow, msk, i, j, p.sq, p.sk) - m);
    }
    const float total = block_sum(l, red);
    for (unsigned j = t; j < p.sk; j += nt) {
        const float w = expf(attention_masked(s[j], p.mode, p.mask, mrow, msk, i, j, p.sq, p.sk) - m) / total;
        if (p.half) {
            ((unsigned short*)p.probs)[row * p.sk + j] = float_to_half(w);
        } else {
            ((float*)p.probs)[row * p.sk + j] = w;
        }
    }
}
