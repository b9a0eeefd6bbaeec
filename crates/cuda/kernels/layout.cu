// Data movement (crates/cuda/src/lower/layout.rs): 32-bit words moved as they are
// (ldw/stw), so every dtype arrives bit for bit. Index arithmetic is 32-bit (the lowering
// keeps every tensor below 2^32 elements; 64-bit division is slow on GPUs). With `vec == 4`
// the lowering found every operand 32-bit words at 16-byte aligned addresses and every size,
// offset and stride of the copy a multiple of 4 words, and passed them in units of 4 words:
// a thread then moves 16 bytes at once.

// Moves unit `from` of `x` to unit `to` of `out`: a word, or 4 words when `vec == 4`.
__device__ __forceinline__ void layout_move(In x, unsigned from, Out out, unsigned to, unsigned vec) {
    if (vec == 4u) ((uint4*)out.ptr)[to] = ((const uint4*)x.ptr)[from];
    else stw(out, to, ldw(x, from));
}

// The thread's unit in a one-dimensional launch over `n` units, or false past them.
__device__ __forceinline__ bool layout_unit(unsigned n, unsigned& i) {
    u64 g = global_index();
    i = (unsigned)g;
    return g < n;
}

// Permute: output unit `i` is the input unit at the offset its coordinates (over the output's
// `rank` dimensions) reach through the input strides of the output's axes. The loop over the
// axes is unrolled so the parameters are read at fixed offsets.
extern "C" __global__ void permute_copy(const PermuteParams p) {
    unsigned i;
    if (!layout_unit(p.n, i)) return;
    unsigned rest = i, from = 0;
#pragma unroll
    for (int k = 7; k > 0; k--) {
        if (k < (int)p.rank) {
            unsigned d = p.dims[k], q = rest / d;
            from += (rest - q * d) * p.strides[k];
            rest = q;
        }
    }
    from += rest * p.strides[0];
    layout_move(p.x, from, p.out, i, p.vec);
}

// Permute that transposes the last two axes of a contiguous [batch, b, a] input into the
// output [batch, a, b] (dims = [batch, a, b]): 32x32 tiles pass through shared memory, so
// reads run along a and writes along b, both coalesced. Grid (ceil(b/32), ceil(a/32), batch),
// blocks of 32x8 threads; the padded tile rows keep the column reads free of bank conflicts.
extern "C" __global__ void permute_transpose(const PermuteParams p) {
    __shared__ unsigned tile[32][33];
    unsigned na = p.dims[1], nb = p.dims[2];
    unsigned batch = blockIdx.z * na * nb;
    unsigned a0 = blockIdx.y * 32u, b0 = blockIdx.x * 32u;
    unsigned a = a0 + threadIdx.x;
    for (unsigned j = threadIdx.y; j < 32u; j += 8u) {
        unsigned b = b0 + j;
        if (a < na && b < nb) tile[j][threadIdx.x] = ldw(p.x, batch + b * na + a);
    }
    __syncthreads();
    unsigned b = b0 + threadIdx.x;
    for (unsigned j = threadIdx.y; j < 32u; j += 8u) {
        unsigned a = a0 + j;
        if (a < na && b < nb) stw(p.out, batch + a * nb + b, tile[threadIdx.x][j]);
    }
}

// Slice along one axis: output block `i / block` of `block` units is the run of input block
// `i / block` (of `in_block` units) starting `start` units in.
extern "C" __global__ void slice_copy(const SliceParams p) {
    unsigned i;
    if (!layout_unit(p.n, i)) return;
    unsigned q = i / p.block;
    layout_move(p.x, q * p.in_block + p.start + (i - q * p.block), p.out, i, p.vec);
}

// One input of a concat: its block `i / part` goes `at` units into output block `i / part`.
extern "C" __global__ void concat_part(const ConcatParams p) {
    unsigned i;
    if (!layout_unit(p.n, i)) return;
    unsigned q = i / p.part;
    layout_move(p.x, i, p.out, q * p.block + p.at + (i - q * p.part), p.vec);
}

// Gather rows: output element `i` is word `i % row_len` of the table row named by id
// `i / row_len`, clamped into 0..rows (a kernel cannot fail on a bad id, and the clamped read
// stays in bounds; the lowering rejects tables without rows). The table may pass 2^32 words:
// its offset is 64-bit (a multiplication, no division).
extern "C" __global__ void gather_rows(const GatherParams p) {
    unsigned i;
    if (!layout_unit(p.n, i)) return;
    unsigned k = i / p.row_len;
    unsigned row;
    if (p.ids.kind == KIND_I32) {
        int id = ldi(p.ids, k);
        row = id < 0 ? 0u : min((unsigned)id, p.rows - 1u);
    } else {
        row = min(ldu(p.ids, k), p.rows - 1u);
    }
    u64 at = (u64)row * p.row_len + (i - k * p.row_len);
    if (p.table.kind == KIND_Q8) {
        st(p.out, i, (float)((const signed char*)p.table.ptr)[at] * ((const float*)p.scales)[row]);
    } else {
        stw(p.out, i, ldw(p.table, at));
    }
}

// KV-cache write: value unit `i` (of [outer, len, inner]) goes to row `offset + j` of the
// buffer (the output, [outer, cap, inner]); the buffer's other rows are left as they are. The
// offset is runtime scalar `scalar`, read here at run time (0 for NO_OFFSET, 0xffffffff). A
// write that would run past the capacity writes nothing: the reference reports it as an error,
// a kernel cannot, so the buffer keeps its contents and nothing is written out of bounds.
extern "C" __global__ void kv_write_rows(const KvWriteParams p) {
    unsigned i;
    if (!layout_unit(p.n, i)) return;
    unsigned offset = p.scalar == 0xffffffffu ? 0u : ((const unsigned*)p.scalars)[p.scalar];
    // The lowering's shapes make len <= cap, so cap - len does not wrap.
    if (offset > p.cap - p.len) return;
    unsigned row = i / p.inner;
    unsigned k = i - row * p.inner;
    unsigned o = row / p.len;
    unsigned j = row - o * p.len;
    layout_move(p.value, i, p.out, (o * p.cap + offset + j) * p.inner + k, p.vec);
}
