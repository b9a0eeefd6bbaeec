// Data movement (crates/native/src/cuda/lower/layout.rs): one thread per copied element,
// 32-bit words moved as they are (ldw/stw), so every dtype arrives bit for bit. Counts are
// u32; offsets are computed in u64.

// Permute: output element `i` is the input word at the offset its coordinates reach through
// the input strides of the output's axes.
extern "C" __global__ void permute_copy(const PermuteParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    stw(p.out, i, ldw(p.x, broadcast_offset(i, p.rank, p.dims, p.strides)));
}

// Slice along one axis: output block `i / block` of `block` words is the run of input block
// `i / block` (of `in_block` words) starting `start` words in.
extern "C" __global__ void slice_copy(const SliceParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    stw(p.out, i, ldw(p.x, (i / p.block) * p.in_block + p.start + i % p.block));
}

// One input of a concat: its block `i / part` goes `at` words into output block `i / part`.
extern "C" __global__ void concat_part(const ConcatParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    stw(p.out, (i / p.part) * p.block + p.at + i % p.part, ldw(p.x, i));
}

// Gather rows: output element `i` is word `i % row_len` of the table row named by id
// `i / row_len`, clamped into 0..rows (a kernel cannot fail on a bad id, and the clamped read
// stays in bounds; the lowering rejects tables without rows).
extern "C" __global__ void gather_rows(const GatherParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    u64 k = i / p.row_len;
    unsigned row;
    if (p.ids.kind == KIND_I32) {
        int id = ldi(p.ids, k);
        row = id < 0 ? 0u : min((unsigned)id, p.rows - 1u);
    } else {
        row = min(ldu(p.ids, k), p.rows - 1u);
    }
    stw(p.out, i, ldw(p.table, (u64)row * p.row_len + i % p.row_len));
}

// KV-cache write: value element `i` (of [outer, len, inner]) goes to row `offset + j` of the
// buffer (the output, [outer, cap, inner]); the buffer's other rows are left as they are. The
// offset is runtime scalar `scalar`, read here at run time (0 for NO_OFFSET, 0xffffffff). A
// write that would run past the capacity writes nothing: the reference reports it as an error,
// a kernel cannot, so the buffer keeps its contents and nothing is written out of bounds.
extern "C" __global__ void kv_write_rows(const KvWriteParams p) {
    u64 i = global_index();
    if (i >= p.n) return;
    unsigned offset = p.scalar == 0xffffffffu ? 0u : ((const unsigned*)p.scalars)[p.scalar];
    // The lowering's shapes make len <= cap, so cap - len does not wrap.
    if (offset > p.cap - p.len) return;
    u64 k = i % p.inner;
    u64 row = i / p.inner;
    u64 j = row % p.len;
    u64 o = row / p.len;
    stw(p.out, (o * p.cap + offset + j) * p.inner + k, ldw(p.value, i));
}
