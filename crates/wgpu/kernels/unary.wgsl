// Unary elementwise: out[i] = f(in0[i]); `$EXPR` is f applied to `x`.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let x = ld0(i);
    st(i, $EXPR);
}
