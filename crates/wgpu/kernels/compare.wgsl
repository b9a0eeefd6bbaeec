// Comparison with broadcasting: out[i] = 1 if the comparison of a and b holds, else 0, as u32.
// Placeholders: T is the compute type of the inputs' dtype (f32, i32 or u32) and LOAD0/LOAD1
// its load (ld, ldi or ldu), so integers compare exactly; EXPR is the comparison of `a` and `b`.

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    let a: $T = $LOAD0(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.a0, p.a1));
    let b: $T = $LOAD1(broadcast_offset(i, p.rank, p.dims0, p.dims1, p.b0, p.b1));
    stu(i, select(0u, 1u, $EXPR));
}
