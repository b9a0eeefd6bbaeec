// Attention for one query per head (a decoder step): out = softmax(q k^T * scale + mask) v
// with q [1, D], k [Sk, D], v [Sk, DV] per flattened batch (head) b. The general kernel
// (attention.wgsl) gives a workgroup 32 queries; with one live query, 31/32 of its lanes
// idle, and a step's cross-attention over 1500 keys took ~0.5 ms on an H200. Here the 256
// threads of a workgroup share one query's keys:
// - scores: thread t scores keys t, t + 256, ... into workgroup memory (Sk <= MAXK), and
//   the maximum is reduced across the workgroup;
// - weights: each thread turns its scores into exp(s - m) and the sum is reduced;
// - values: threads split the DV output columns and, when DV < 256, the keys
//   (G = 256 / DV slices, added at the end); each thread keeps eight sums over keys apart, so
//   eight loads of V are in flight at once (one at a time, waiting on each load, made a step's
//   cross-attention over 1500 keys take ~0.14 ms on an H200, with one workgroup per head).
// Softmax and sums are f32; a masked key (additive -inf) gets weight 0.

const D: u32 = $D;
const DV: u32 = $DV;
const MASK: u32 = $MASK;
const MAXK: u32 = $MAXK;
// Key slices of the value sum.
const G: u32 = 256u / DV;
// Below every real score: the score of a masked key.
const NONE: f32 = -3.0e38;

var<workgroup> sc: array<f32, MAXK>;
var<workgroup> red: array<f32, 256>;

// Element `e` of the additive mask (`$MASK_LOAD` is `ld3(e)`, or `0.0` without a mask input).
fn mask_at(e: u32) -> f32 {
    return $MASK_LOAD;
}

// The max (or sum) of `x` over the workgroup; call in uniform control flow.
fn reduce(t: u32, x: f32, is_max: bool) -> f32 {
    red[t] = x;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s = s / 2u) {
        if (t < s) {
            red[t] = select(red[t] + red[t + s], max(red[t], red[t + s]), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    // Uniform per workgroup, so returning keeps the barriers below in uniform control flow.
    let b = wid.x + wid.y * nwg.x;
    if (b >= p.batch) {
        return;
    }
    let qbase = b * D;
    let kbase = b * p.sk * D;
    let vbase = b * p.sk * DV;
    var mask_row = 0u;
    if (MASK == 1u) {
        mask_row = broadcast_offset(b, p.lead_rank, p.lead0, p.lead1, p.mask0, p.mask1);
    }

    // One query sees every key, causal or not (key j is visible when j <= 0 + Sk - 1).
    var top = NONE;
    for (var j = t; j < p.sk; j += 256u) {
        var s4 = vec4<f32>(0.0);
        var d = 0u;
        for (; d + 4u <= D; d += 4u) {
            let q = vec4<f32>(ld0(qbase + d), ld0(qbase + d + 1u), ld0(qbase + d + 2u), ld0(qbase + d + 3u));
            let k = vec4<f32>(ld1(kbase + j * D + d), ld1(kbase + j * D + d + 1u), ld1(kbase + j * D + d + 2u), ld1(kbase + j * D + d + 3u));
            s4 += q * k;
        }
        var s = s4.x + s4.y + s4.z + s4.w;
        for (; d < D; d++) {
            s += ld0(qbase + d) * ld1(kbase + j * D + d);
        }
        s = s * p.scale;
        if (MASK == 1u) {
            s += mask_at(mask_row + j * p.mask_sk);
        }
        s = select(NONE, s, s > NONE);
        sc[j] = s;
        top = max(top, s);
    }
    let m = reduce(t, top, true);

    var l = 0.0;
    for (var j = t; j < p.sk; j += 256u) {
        let w = select(0.0, exp(sc[j] - m), sc[j] > NONE);
        sc[j] = w;
        l += w;
    }
    // Its barriers also make every weight visible to every thread.
    let total = reduce(t, l, false);

    let c = t % DV;
    let slice = t / DV;
    var acc = 0.0;
    if (slice < G) {
        var a = vec4<f32>(0.0);
        var b = vec4<f32>(0.0);
        var j = slice;
        for (; j + 7u * G < p.sk; j += 8u * G) {
            let w0 = vec4<f32>(sc[j], sc[j + G], sc[j + 2u * G], sc[j + 3u * G]);
            let w1 = vec4<f32>(sc[j + 4u * G], sc[j + 5u * G], sc[j + 6u * G], sc[j + 7u * G]);
            let v0 = vec4<f32>(
                ld2(vbase + j * DV + c),
                ld2(vbase + (j + G) * DV + c),
                ld2(vbase + (j + 2u * G) * DV + c),
                ld2(vbase + (j + 3u * G) * DV + c),
            );
            let v1 = vec4<f32>(
                ld2(vbase + (j + 4u * G) * DV + c),
                ld2(vbase + (j + 5u * G) * DV + c),
                ld2(vbase + (j + 6u * G) * DV + c),
                ld2(vbase + (j + 7u * G) * DV + c),
            );
            a += w0 * v0;
            b += w1 * v1;
        }
        for (; j < p.sk; j += G) {
            a.x += sc[j] * ld2(vbase + j * DV + c);
        }
        a += b;
        acc = (a.x + a.y) + (a.z + a.w);
    }
    red[t] = acc;
    workgroupBarrier();
    if (slice == 0u) {
        var sum = 0.0;
        for (var s = 0u; s < G; s++) {
            sum += red[s * DV + c];
        }
        st(b * DV + c, sum / total);
    }
}
