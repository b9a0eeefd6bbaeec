// Attention for a few queries, second pass: merges the splits attention_split.wgsl wrote to
// the scratch (read as input $SCRATCH_INPUT). One thread per output element (flattened batch
// and query bi, column c): with M the largest split max, the output is
// sum_s o_s[c] exp(m_s - M) / sum_s l_s exp(m_s - M). A query with no visible key divides 0 by
// 0, as the reference does.

const DV: u32 = $DV;
// Below every real score: a split without a visible key.
const NONE: f32 = -3.0e38;

fn partial(e: u32) -> f32 {
    return ld$SCRATCH_INPUT(e);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let e = linear_index(wid, nwg, lid);
    if (e >= p.batch * p.sq * DV) {
        return;
    }
    let bi = e / DV;
    let c = e % DV;
    let first = bi * p.splits * (DV + 2u);
    var top = NONE;
    for (var s = 0u; s < p.splits; s++) {
        top = max(top, partial(first + s * (DV + 2u)));
    }
    var l = 0.0;
    var o = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        let at = first + s * (DV + 2u);
        let f = exp(partial(at) - top);
        l += partial(at + 1u) * f;
        o += partial(at + 2u + c) * f;
    }
    st(e, o / l);
}
