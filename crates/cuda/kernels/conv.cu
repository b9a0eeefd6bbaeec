// Conv1d (crates/core/src/ops/conv1d.rs) as an implicit matrix product, as in
// kernels/conv1d.wgsl: out[n, co, t] = bias[co] + sum over r of w[co, r] * col[r, t], where
// r = ci * K + j runs over input channels and taps (w [C_out, C_in, K] is already the matrix
// [C_out, R]) and col[r, t] = x[n, ci, t * stride + j * dilation - padding], zero in the
// padding. Accumulation is f32; the bias is added last, as the reference does.
//
// A block of 128 threads computes a tile of 64 output channels x 32 positions of one batch
// item (grid x: positions, y: channels, z: batch). Thread (tx, ty) = (tid % 16, tid / 16)
// holds 8 x 2 accumulators: channels ty + 8a and positions tx + 16b, so neighbouring threads
// read neighbouring shared words and write neighbouring output words. The reduction runs in
// chunks of 16 r: the block stages the chunk's 64 x 16 weights and 16 x 32 gathered inputs in
// shared memory, and each thread then does its 16 x 16 multiply-adds from there. Each thread
// loads its part of the next chunk into registers before computing the current one, so the
// global loads overlap the arithmetic.
//
// Whisper's stem on an H100 (CUDA events over repeated launches): conv1 (80 -> 384, L 3000)
// about 42 us, conv2 (384 -> 384, stride 2) about 125 us. Tiles of 64 x 64 and 128 x 64,
// 8 x 4 register tiles read as float4, and splitting the reduction over 2 or 4 groups of
// threads in a block were no faster overall: conv2's 282 blocks leave the SMs short of warps
// (a split over more blocks, summed by a second kernel, would be the next step).

#define CONV_TILE_C 64
#define CONV_TILE_T 32
#define CONV_CHUNK 16
#define CONV_THREADS 128
// Weight rows are CONV_CHUNK + 1 words so the threads storing one channel's chunk hit
// distinct banks.
#define CONV_WROW (CONV_CHUNK + 1)
// Rows of threads (channels apart), and what each thread computes and stages.
#define CONV_TY (CONV_THREADS / 16)
#define CONV_A (CONV_TILE_C / CONV_TY)
#define CONV_B (CONV_TILE_T / 16)
#define CONV_W_EACH (CONV_TILE_C * CONV_CHUNK / CONV_THREADS)
#define CONV_X_EACH (CONV_CHUNK * CONV_TILE_T / CONV_THREADS)

// Element `i` of a float operand (f32 words or native halves): conv1d's operands are floats,
// and the two-way load keeps the unrolled staging code small (NVRTC compiles it at run time).
__device__ __forceinline__ float conv_ld(In t, u64 i) {
    return t.kind == KIND_F16 ? half_to_float(((const unsigned short*)t.ptr)[i]) : ((const float*)t.ptr)[i];
}

extern "C" __global__ void conv1d_tiled(const Conv1dParams p) {
    __shared__ float ws[CONV_TILE_C * CONV_WROW]; // [channel][r of the chunk]
    __shared__ float xs[CONV_CHUNK * CONV_TILE_T]; // [r of the chunk][position]
    const unsigned li = threadIdx.x;
    const unsigned tx = li % 16, ty = li / 16;
    const unsigned t0 = blockIdx.x * CONV_TILE_T, co0 = blockIdx.y * CONV_TILE_C, n = blockIdx.z;
    const u64 x_base = (u64)n * p.c_in * p.len;
    // What this thread stages: weight column w_r of channels w_c + (CONV_THREADS /
    // CONV_CHUNK) i, and input position x_t of chunk rows x_r + (CONV_THREADS / CONV_TILE_T) i.
    const unsigned w_r = li % CONV_CHUNK, w_c = li / CONV_CHUNK;
    const unsigned x_t = t0 + li % CONV_TILE_T, x_r = li / CONV_TILE_T;
    // Where tap 0 of position x_t reads, before the dilation.
    const long long x_start = (long long)x_t * p.stride - (long long)p.padding;
    float w_next[CONV_W_EACH], x_next[CONV_X_EACH];
    // Loads the chunk from reduction index r0 into w_next and x_next, zero past the ends.
    auto fetch = [&](unsigned r0) {
        const unsigned wr = r0 + w_r;
#pragma unroll
        for (int i = 0; i < CONV_W_EACH; i++) {
            const unsigned co = co0 + w_c + i * (CONV_THREADS / CONV_CHUNK);
            w_next[i] = wr < p.red && co < p.c_out ? conv_ld(p.w, (u64)co * p.red + wr) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < CONV_X_EACH; i++) {
            const unsigned r = r0 + x_r + i * (CONV_THREADS / CONV_TILE_T);
            float v = 0.0f;
            if (r < p.red && x_t < p.out_len) {
                const unsigned ci = r / p.k;
                const long long pos = x_start + (long long)(r - ci * p.k) * p.dilation;
                if (pos >= 0 && pos < (long long)p.len) v = conv_ld(p.x, x_base + (u64)ci * p.len + (u64)pos);
            }
            x_next[i] = v;
        }
    };
    float acc[CONV_A][CONV_B];
#pragma unroll
    for (int a = 0; a < CONV_A; a++)
#pragma unroll
        for (int b = 0; b < CONV_B; b++) acc[a][b] = 0.0f;
    fetch(0);
    for (unsigned r0 = 0; r0 < p.red; r0 += CONV_CHUNK) {
#pragma unroll
        for (int i = 0; i < CONV_W_EACH; i++) ws[(w_c + i * (CONV_THREADS / CONV_CHUNK)) * CONV_WROW + w_r] = w_next[i];
#pragma unroll
        for (int i = 0; i < CONV_X_EACH; i++) xs[(x_r + i * (CONV_THREADS / CONV_TILE_T)) * CONV_TILE_T + li % CONV_TILE_T] = x_next[i];
        __syncthreads();
        if (r0 + CONV_CHUNK < p.red) fetch(r0 + CONV_CHUNK);
#pragma unroll
        for (int rr = 0; rr < CONV_CHUNK; rr++) {
            float xv[CONV_B];
#pragma unroll
            for (int b = 0; b < CONV_B; b++) xv[b] = xs[rr * CONV_TILE_T + tx + 16 * b];
#pragma unroll
            for (int a = 0; a < CONV_A; a++) {
                const float wv = ws[(ty + CONV_TY * a) * CONV_WROW + rr];
#pragma unroll
                for (int b = 0; b < CONV_B; b++) acc[a][b] += wv * xv[b];
            }
        }
        __syncthreads();
    }
    // The output is f32 words, f16 values rounded (conv1d's output has x's float dtype).
    const bool to_f16 = p.out.dtype == DTYPE_F16;
    float* out = (float*)p.out.ptr;
#pragma unroll
    for (int a = 0; a < CONV_A; a++) {
        const unsigned co = co0 + ty + CONV_TY * a;
        if (co >= p.c_out) continue;
        const float bias = p.has_bias ? conv_ld(p.bias, co) : 0.0f;
        const u64 row = ((u64)n * p.c_out + co) * p.out_len;
#pragma unroll
        for (int b = 0; b < CONV_B; b++) {
            const unsigned t = t0 + tx + 16 * b;
            const float v = acc[a][b] + bias;
            if (t < p.out_len) out[row + t] = to_f16 ? round_f16(v) : v;
        }
    }
}

// The input windows of a convolution unrolled into a matrix of f16 halves, one thread per
// element: row `ci * k + j` holds tap `j` of channel `ci` for every output position.
extern "C" __global__ void conv1d_im2col(const Conv1dIm2colParams p) {
    unsigned i = (unsigned)global_index();
    if (i >= p.n) return;
    unsigned t = i % p.out_len;
    unsigned row = i / p.out_len;
    unsigned red = p.c_in * p.k;
    unsigned b = row / red;
    unsigned r = row % red;
    unsigned ci = r / p.k, j = r % p.k;
    int at = (int)(t * p.stride + j * p.dilation) - (int)p.padding;
    float v = 0.0f;
    if (at >= 0 && at < (int)p.len) v = ld(p.x, ((u64)b * p.c_in + ci) * p.len + at);
    ((unsigned short*)p.cols)[i] = float_to_half(v);
}
