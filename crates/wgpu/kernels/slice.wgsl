// Slice along one axis: input and output are viewed as [outer, dim, inner]; each output block of
// `p.block` words (len * inner) is a run of the input block of `p.in_block` words (dim * inner),
// starting `p.start` words in (start * inner). Words are copied as they are.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    stw(i, ldw0((i / p.block) * p.in_block + p.start + i % p.block));
}
