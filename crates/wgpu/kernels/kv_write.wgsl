// KV-cache write: copies `value` (input 1, viewed as [outer, len, inner] around the axis) into
// the buffer (the output, viewed as [outer, cap, inner]) at rows offset..offset+len, where the
// offset is runtime scalar `p.scalar` (0 when `p.scalar` is 0xffffffff: a write without an
// offset scalar). The buffer is the output binding itself: its other rows
// are left as they are. Words are copied as they are (ldw/stw), so every dtype is exact.
//
// A write that would run past the capacity writes nothing: the CPU reference reports it as an
// error, but a kernel cannot fail, so the buffer keeps its old contents instead.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    var offset = 0u;
    if (p.scalar != 0xffffffffu) {
        offset = runtime_scalar(p.scalar);
    }
    // Shape inference makes len <= cap, so cap - len does not wrap.
    if (offset > p.cap - p.len) {
        return;
    }
    let k = i % p.inner;
    let row = i / p.inner;
    let j = row % p.len;
    let o = row / p.len;
    stw((o * p.cap + offset + j) * p.inner + k, ldw1(i));
}
