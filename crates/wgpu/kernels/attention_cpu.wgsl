// Fused attention for CPU adapters, same parameters as attention.wgsl: out = softmax(q k^T *
// scale + mask) v per flattened batch (head) b, with q [Sq, D], k [Sk, D], v [Sk, DV] and
// out [Sq, DV]. Scores, softmax and accumulation are f32.
//
// CPU drivers run a workgroup's invocations as SIMD lanes of one core and load storage lane by
// lane, so there is no workgroup memory and no barrier: each invocation takes four
// consecutive queries of one head (rows past Sq repeat the last one and are not stored), keeps
// them and their accumulators in registers, and visits every key once, reading its K and V
// rows with four-element loads (`ld4_*`) that serve all four queries. The four online
// softmaxes run side by side as the lanes of vec4s: running maxima `m`, sums `l`, scores `s`.
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

// The additive mask of query row `i` at key `j` (0 without one).
fn mask_of(b: u32, i: u32, j: u32) -> f32 {
    if (MASK != 1u) {
        return 0.0;
    }
    let row = broadcast_offset(b, p.lead_rank, p.lead0, p.lead1, p.mask0, p.mask1) + i * p.mask_sq;
    return mask_at(row + j * p.mask_sk);
}

fn store_row(obase: u32, c: u32, o: vec4<f32>) {
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

@compute @workgroup_size(16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let blocks = (p.sq + 3u) / 4u;
    let inv = (wid.x + wid.y * nwg.x) * 16u + t;
    if (inv >= p.batch * blocks) {
        return;
    }
    let b = inv / blocks;
    let i0 = (inv % blocks) * 4u;
    let rows = vec4<u32>(min(i0, p.sq - 1u), min(i0 + 1u, p.sq - 1u), min(i0 + 2u, p.sq - 1u), min(i0 + 3u, p.sq - 1u));
    let kbase = b * p.sk * D;
    let vbase = b * p.sk * DV;

    var q0: array<vec4<f32>, D4>;
    var q1: array<vec4<f32>, D4>;
    var q2: array<vec4<f32>, D4>;
    var q3: array<vec4<f32>, D4>;
    var acc0: array<vec4<f32>, DV4>;
    var acc1: array<vec4<f32>, DV4>;
    var acc2: array<vec4<f32>, DV4>;
    var acc3: array<vec4<f32>, DV4>;
    let qbase = vec4<u32>(b * p.sq) + rows;
    for (var c = 0u; c < D4; c++) {
        q0[c] = row4(0u, qbase.x * D, c, D) * p.scale;
        q1[c] = row4(0u, qbase.y * D, c, D) * p.scale;
        q2[c] = row4(0u, qbase.z * D, c, D) * p.scale;
        q3[c] = row4(0u, qbase.w * D, c, D) * p.scale;
    }
    var visible = vec4<u32>(p.sk);
    if (MASK == 2u) {
        visible = min(vec4<u32>(p.sk), rows + vec4<u32>(1u + p.sk - p.sq));
    }
    let kend = max(max(visible.x, visible.y), max(visible.z, visible.w));
    var m = vec4<f32>(NONE);
    var l = vec4<f32>(0.0);

    for (var j = 0u; j < kend; j++) {
        var s = vec4<f32>(0.0);
        for (var c = 0u; c < D4; c++) {
            let k = row4(1u, kbase + j * D, c, D);
            s += vec4<f32>(dot(q0[c], k), dot(q1[c], k), dot(q2[c], k), dot(q3[c], k));
        }
        if (MASK == 1u) {
            s += vec4<f32>(mask_of(b, rows.x, j), mask_of(b, rows.y, j), mask_of(b, rows.z, j), mask_of(b, rows.w, j));
        }
        // An additive -inf (anything at or below NONE) masks the key, as does causality.
        let live = (s > vec4<f32>(NONE)) & (vec4<u32>(j) < visible);
        s = select(vec4<f32>(NONE), s, live);
        let m_new = max(m, s);
        let alpha = exp(m - m_new);
        m = m_new;
        let w = select(vec4<f32>(0.0), exp(s - m_new), live);
        l = l * alpha + w;
        for (var c = 0u; c < DV4; c++) {
            let v = row4(2u, vbase + j * DV, c, DV);
            acc0[c] = acc0[c] * alpha.x + w.x * v;
            acc1[c] = acc1[c] * alpha.y + w.y * v;
            acc2[c] = acc2[c] * alpha.z + w.z * v;
            acc3[c] = acc3[c] * alpha.w + w.w * v;
        }
    }

    let obase = (vec4<u32>(b * p.sq) + rows) * DV;
    for (var c = 0u; c < DV4; c++) {
        store_row(obase.x, c, acc0[c] / l.x);
        if (i0 + 1u < p.sq) {
            store_row(obase.y, c, acc1[c] / l.y);
        }
        if (i0 + 2u < p.sq) {
            store_row(obase.z, c, acc2[c] / l.z);
        }
        if (i0 + 3u < p.sq) {
            store_row(obase.w, c, acc3[c] / l.w);
        }
    }
}
