// Permute: output element `i` is the input word at the offset its coordinates reach through
// the input strides of the output's axes (`p.strides`). Words are copied as they are, so every
// dtype arrives bit for bit.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    stw(i, ldw0(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.strides0, p.strides1)));
}
