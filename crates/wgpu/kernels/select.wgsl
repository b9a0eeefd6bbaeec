// where(cond, a, b) with broadcasting of all three: out[i] = a where cond is non-zero, else b.
// Values move as raw 32-bit words (ldw/stw), so every dtype is copied exactly.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let cond = ldw0(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.a0, p.a1));
    if (cond != 0u) {
        stw(i, ldw1(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.b0, p.b1)));
    } else {
        stw(i, ldw2(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.c0, p.c1)));
    }
}
