// Binary elementwise with broadcasting: out[i] = f(a, b) with a and b read through their
// broadcast strides. `$T` is the compute type (f32, i32 or u32), `$LOAD` the matching load
// (ld, ldi or ldu), `$STORE` the store (st, sti or stu) and `$EXPR` f of `a` and `b`.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let a: $T = $LOAD0(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.a0, p.a1));
    let b: $T = $LOAD1(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.b0, p.b1));
    $STORE(i, $EXPR);
}
