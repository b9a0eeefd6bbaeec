// Attention for a few queries (decoder steps and short prompts), first pass: the keys are
// cut into splits of 64 and one workgroup of 64 threads takes one (head b, query i, split s),
// so that a decoder step's six heads fill the GPU (with a workgroup per head, a step's
// cross-attention over 1500 keys kept six multiprocessors busy, 58 us on an H200). The
// workgroup writes its split's partial softmax to the scratch, at
// ((b * Sq + i) * splits + s) * (DV + 2): the split's max score m, its sum of weights
// l = sum exp(score - m) and the DV weighted sums of values; attention_combine.wgsl merges
// the splits. Thread t scores key t of the split (q staged in workgroup memory), the max and
// the sum are reduced across the workgroup, and thread t sums the values of columns t,
// t + 64, .. over the split's keys. Masks as in attention.wgsl; a split without a visible key
// writes m = NONE, l = 0 and zeros. Scores, softmax and sums are f32.

const D: u32 = $D;
const DV: u32 = $DV;
const MASK: u32 = $MASK;
const SPLIT: u32 = 64u;
// Below every real score: the score of a masked key, and "no key" for the max.
const NONE: f32 = -3.0e38;

var<workgroup> qs: array<f32, D>;
var<workgroup> ws: array<f32, SPLIT>;
var<workgroup> red: array<f32, SPLIT>;

// Element `e` of the additive mask (`$MASK_LOAD` is `ld3(e)`, or `0.0` without a mask input).
fn mask_at(e: u32) -> f32 {
    return $MASK_LOAD;
}

// The max (or sum) of `x` over the workgroup; call in uniform control flow.
fn reduce(t: u32, x: f32, is_max: bool) -> f32 {
    red[t] = x;
    workgroupBarrier();
    for (var s = SPLIT / 2u; s > 0u; s = s / 2u) {
        if (t < s) {
            red[t] = select(red[t] + red[t + s], max(red[t], red[t + s]), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    // Uniform per workgroup, so returning keeps the barriers below in uniform control flow.
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.batch * p.sq * p.splits) {
        return;
    }
    let s = wg % p.splits;
    let bi = wg / p.splits;
    let b = bi / p.sq;
    let i = bi % p.sq;
    for (var d = t; d < D; d += SPLIT) {
        qs[d] = ld0(bi * D + d);
    }
    workgroupBarrier();

    var mask_row = 0u;
    if (MASK == 1u) {
        mask_row = broadcast_offset(b, p.lead_rank, p.lead0, p.lead1, p.mask0, p.mask1) + i * p.mask_sq;
    }
    // Key j is visible to query i when j < Sk (and, causal, j <= i + Sk - Sq).
    let visible = select(p.sk, min(p.sk, i + 1u + p.sk - p.sq), MASK == 2u);
    let j = s * SPLIT + t;
    var score = NONE;
    if (j < visible) {
        let kbase = (b * p.sk + j) * D;
        var s4 = vec4<f32>(0.0);
        var d = 0u;
        for (; d + 4u <= D; d += 4u) {
            let k = vec4<f32>(ld1(kbase + d), ld1(kbase + d + 1u), ld1(kbase + d + 2u), ld1(kbase + d + 3u));
            s4 += vec4<f32>(qs[d], qs[d + 1u], qs[d + 2u], qs[d + 3u]) * k;
        }
        var dot = (s4.x + s4.y) + (s4.z + s4.w);
        for (; d < D; d++) {
            dot += qs[d] * ld1(kbase + d);
        }
        score = dot * p.scale;
        if (MASK == 1u) {
            score += mask_at(mask_row + j * p.mask_sk);
        }
        // An additive -inf (anything at or below NONE) masks the key.
        score = select(NONE, score, score > NONE);
    }
    let m = reduce(t, score, true);
    let w = select(0.0, exp(score - m), score > NONE);
    ws[t] = w;
    // Its barriers also make every weight visible to every thread.
    let l = reduce(t, w, false);

    let out = (bi * p.splits + s) * (DV + 2u);
    if (t == 0u) {
        st(out, m);
        st(out + 1u, l);
    }
    let keys = min(SPLIT, p.sk - min(p.sk, s * SPLIT));
    let vbase = (b * p.sk + s * SPLIT) * DV;
    for (var c = t; c < DV; c += SPLIT) {
        // Four sums apart, so that four loads of V are in flight at once.
        var a = vec4<f32>(0.0);
        var k = 0u;
        for (; k + 4u <= keys; k += 4u) {
            let v = vec4<f32>(
                ld2(vbase + k * DV + c),
                ld2(vbase + (k + 1u) * DV + c),
                ld2(vbase + (k + 2u) * DV + c),
                ld2(vbase + (k + 3u) * DV + c),
            );
            a += vec4<f32>(ws[k], ws[k + 1u], ws[k + 2u], ws[k + 3u]) * v;
        }
        for (; k < keys; k++) {
            a.x += ws[k] * ld2(vbase + k * DV + c);
        }
        st(out + 2u + c, (a.x + a.y) + (a.z + a.w));
    }
}
