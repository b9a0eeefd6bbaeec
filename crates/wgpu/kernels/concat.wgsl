// Concat along one axis: the output is viewed as [outer, total, inner] and each block of
// `p.block` words (total * inner) holds the inputs' blocks one after another; input k's part
// ends `ends[k]` words into the block and spans `blocks[k]` words. `$PICK` is an if/else chain
// over the inputs that sets `v` from the input whose part holds position `r`.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let o = i / p.block;
    let r = i % p.block;
    var v = 0u;
    $PICK
    stw(i, v);
}
