// Fused attention for CPU adapters, same parameters as attention.wgsl: out = softmax(q k^T *
// scale + mask) v per flattened batch (head) b, with q [Sq, D], k [Sk, D], v [Sk, DV] and
// out [Sq, DV]. Scores, softmax and accumulation are f32.
//
// CPU drivers run a workgroup's invocations as SIMD lanes of one core and load storage lane by
// lane, so there is no workgroup memory and no barrier: each invocation takes one query of one
// head, keeps it and its accumulator in registers, and visits every key once, reading its K
// and V rows with four-element loads (`ld4_*`). The softmax is online: a running max m and
// sum l; the accumulator is rescaled by exp(m_old - m_new) at each key.
//
// Loops are kept few on purpose: llvmpipe stops an invocation's loops after 65535 iterations
// in total (all loops together), so the kernel spends D/4 + DV/4 + 1 of them per key and the
// op only picks this kernel while Sk times that stays below the limit.
//
// Masked keys (causal, or an additive -inf) get weight 0; a query with no visible key divides
// 0 by 0, as the reference does. MASK is 0 (none), 1 (additive: `mask_at` reads input 3
// through its broadcast strides) or 2 (causal: key j is visible to query i when
// j <= i + Sk - Sq).

const D: u32 = $D;
const DV: u32 = $DV;
const MASK: u32 = $MASK;
const D4: u32 = (D + 3u) / 4u;
const DV4: u32 = (DV + 3u) / 4u;
// Below every real score: "no key yet" for the running max, and the score of a masked key.
const NONE: f32 = -3.0e38;

// Element `e` of the additive mask (`$MASK_LOAD` is `ld3(e)`, or `0.0` without a mask input).
fn mask_at(e: u32) -> f32 {
    return $MASK_LOAD;
}

// Elements 4 * c .. 4 * c + 3 of the row at `base` of length `len` of input `which` (0: q,
// 1: k, 2: v), zero past `len`.
fn row4(which: u32, base: u32, c: u32, len: u32) -> vec4<f32> {
    if (4u * c + 3u < len) {
        if (which == 0u) {
            return ld4_0(base + 4u * c);
        } else if (which == 1u) {
            return ld4_1(base + 4u * c);
        }
        return ld4_2(base + 4u * c);
    }
    var x = vec4<f32>(0.0);
    let rest = len - 4u * c;
    if (rest > 0u) {
        x.x = select(select(ld2(base + 4u * c), ld1(base + 4u * c), which == 1u), ld0(base + 4u * c), which == 0u);
    }
    if (rest > 1u) {
        x.y = select(select(ld2(base + 4u * c + 1u), ld1(base + 4u * c + 1u), which == 1u), ld0(base + 4u * c + 1u), which == 0u);
    }
    if (rest > 2u) {
        x.z = select(select(ld2(base + 4u * c + 2u), ld1(base + 4u * c + 2u), which == 1u), ld0(base + 4u * c + 2u), which == 0u);
    }
    return x;
}

@compute @workgroup_size(16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let inv = (wid.x + wid.y * nwg.x) * 16u + t;
    if (inv >= p.batch * p.sq) {
        return;
    }
    let b = inv / p.sq;
    let i = inv % p.sq;
    let kbase = b * p.sk * D;
    let vbase = b * p.sk * DV;

    var q: array<vec4<f32>, D4>;
    var acc: array<vec4<f32>, DV4>;
    for (var c = 0u; c < D4; c++) {
        q[c] = row4(0u, (b * p.sq + i) * D, c, D) * p.scale;
    }
    var m = NONE;
    var l = 0.0;
    var mask_row = 0u;
    if (MASK == 1u) {
        mask_row = broadcast_offset(b, p.lead_rank, p.lead0, p.lead1, p.mask0, p.mask1) + i * p.mask_sq;
    }
    let visible = select(p.sk, min(p.sk, i + 1u + p.sk - p.sq), MASK == 2u);

    for (var j = 0u; j < visible; j++) {
        var qk = vec4<f32>(0.0);
        for (var c = 0u; c < D4; c++) {
            qk += q[c] * row4(1u, kbase + j * D, c, D);
        }
        var score = qk.x + qk.y + qk.z + qk.w;
        if (MASK == 1u) {
            score += mask_at(mask_row + j * p.mask_sk);
        }
        // An additive -inf (anything at or below NONE) masks the key.
        score = select(NONE, score, score > NONE);
        let m_new = max(m, score);
        let alpha = exp(m - m_new);
        m = m_new;
        let w = select(0.0, exp(score - m_new), score > NONE);
        l = l * alpha + w;
        for (var c = 0u; c < DV4; c++) {
            acc[c] = acc[c] * alpha + w * row4(2u, vbase + j * DV, c, DV);
        }
    }

    let obase = (b * p.sq + i) * DV;
    for (var c = 0u; c < DV4; c++) {
        let o = acc[c] / l;
        st(obase + 4u * c, o.x);
        if (4u * c + 1u < DV) {
            st(obase + 4u * c + 1u, o.y);
        }
        if (4u * c + 2u < DV) {
            st(obase + 4u * c + 2u, o.z);
        }
        if (4u * c + 3u < DV) {
            st(obase + 4u * c + 3u, o.w);
        }
    }
}
