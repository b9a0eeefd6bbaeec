// Fused attention: out = softmax(q k^T * scale + mask) v for one flattened batch (head) b per
// group of workgroups, q [Sq, D], k [Sk, D], v [Sk, DV], out [Sq, DV]. The score matrix is
// never stored: keys are visited in blocks of BK with an online softmax (a running max m and
// sum l per query; the accumulator is rescaled by exp(m_old - m_new) when the max grows).
//
// A workgroup of 256 threads takes BQ consecutive queries; the G = 256 / BQ threads of a
// query ("lanes") split each key block:
// - scores: lane l computes the scores of keys l, l + G, ... (SPT of them) against its copy of
//   the query row, held in registers;
// - max: every lane publishes the max of its scores, then reads the G maxima of its query;
// - weights: each lane turns its own scores into exp(s - m) in workgroup memory and adds
//   them to its share of l (shares are added at the end);
// - values: lanes split the DV output columns (CG column lanes, columns c, c + CG, ...) and,
//   when G > CG, the keys of the block (NS = G / CG slices, added at the end).
// With STAGE, the K and V rows of a block are first copied into workgroup memory, where the
// BQ queries share them; without it (one query per workgroup, decoder steps) every thread
// reads its key straight from memory, as nothing would be shared.
//
// Masked keys (causal, past Sk, or an additive -inf) get weight 0. A query with no visible
// key divides 0 by 0, as the reference does. MASK is 0 (none), 1 (additive: input 3, read
// through its broadcast strides) or 2 (causal: key j is visible to query i when
// j <= i + Sk - Sq).

const BQ: u32 = $BQ;
const BK: u32 = $BK;
const D: u32 = $D;
const DV: u32 = $DV;
const CG: u32 = $CG;
const STAGE: bool = $STAGE;
const MASK: u32 = $MASK;

const G: u32 = 256u / BQ;
const SPT: u32 = BK / G;
const NS: u32 = G / CG;
const CPT: u32 = (DV + CG - 1u) / CG;
const D4: u32 = (D + 3u) / 4u;
// Row strides of the staged K tile (vec4s; one of padding so the G lanes reading G different
// rows hit different banks) and of the weights (one of padding for the same reason).
const KS4: u32 = D4 + 1u;
const PS: u32 = BK + 1u;
// Below every real score: "no key yet" for the running max, and the score of a masked key.
const NONE: f32 = -3.0e38;

var<workgroup> kt: array<vec4<f32>, $KT_LEN>;
var<workgroup> vt: array<f32, $VT_LEN>;
var<workgroup> wt: array<f32, BQ * PS>;
var<workgroup> red: array<f32, 256>;

// Element `e` of the additive mask (`$MASK_LOAD` is `ld3(e)`, or `0.0` without a mask input).
fn mask_at(e: u32) -> f32 {
    return $MASK_LOAD;
}

// Elements d..d+3 of key `key`'s row (block row `j`), zero past D.
fn key4(kbase: u32, j: u32, key: u32, d4: u32) -> vec4<f32> {
    if (STAGE) {
        return kt[j * KS4 + d4];
    }
    var r = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        let d = d4 * 4u + c;
        if (d < D) {
            r[c] = ld1(kbase + key * D + d);
        }
    }
    return r;
}

fn value(vbase: u32, j: u32, key: u32, c: u32) -> f32 {
    if (STAGE) {
        return vt[j * DV + c];
    }
    return ld2(vbase + key * DV + c);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.batch * p.qblocks) {
        return;
    }
    let b = wg / p.qblocks;
    let q0 = (wg % p.qblocks) * BQ;
    let qi = t / G;
    let lane = t % G;
    let i = q0 + qi;
    let live = i < p.sq;
    let kbase = b * p.sk * D;
    let vbase = b * p.sk * DV;

    var q: array<vec4<f32>, D4>;
    if (live) {
        for (var d = 0u; d < D; d++) {
            q[d / 4u][d % 4u] = ld0((b * p.sq + i) * D + d);
        }
    }
    var mask_row = 0u;
    if (MASK == 1u) {
        mask_row = broadcast_offset(b, p.lead_rank, p.lead0, p.lead1, p.mask0, p.mask1) + i * p.mask_sq;
    }
    // Keys past the last visible key of the block's last query are never read.
    var kend = p.sk;
    if (MASK == 2u) {
        kend = min(p.sk, min(q0 + BQ, p.sq) + p.sk - p.sq);
    }
    let visible = select(kend, min(kend, i + 1u + p.sk - p.sq), MASK == 2u);

    var m = NONE;
    var l = 0.0;
    var acc: array<f32, CPT>;
    let c0 = lane % CG;
    let slice = lane / CG;
    for (var j0 = 0u; j0 < kend; j0 += BK) {
        if (STAGE) {
            for (var e = t; e < BK * D; e += 256u) {
                let key = j0 + e / D;
                let d = e % D;
                var x = 0.0;
                if (key < kend) {
                    x = ld1(kbase + key * D + d);
                }
                kt[(e / D) * KS4 + d / 4u][d % 4u] = x;
            }
            for (var e = t; e < BK * DV; e += 256u) {
                let key = j0 + e / DV;
                var x = 0.0;
                if (key < kend) {
                    x = ld2(vbase + key * DV + e % DV);
                }
                vt[e] = x;
            }
            workgroupBarrier();
        }

        var s: array<f32, SPT>;
        var top = NONE;
        for (var r = 0u; r < SPT; r++) {
            let j = lane + G * r;
            let key = j0 + j;
            var score = NONE;
            if (live && key < visible) {
                var qk = 0.0;
                for (var d4 = 0u; d4 < D4; d4++) {
                    qk += dot(q[d4], key4(kbase, j, key, d4));
                }
                score = qk * p.scale;
                if (MASK == 1u) {
                    score += mask_at(mask_row + key * p.mask_sk);
                }
                // An additive -inf (or anything at or below NONE) masks the key.
                score = select(NONE, score, score > NONE);
            }
            s[r] = score;
            top = max(top, score);
        }
        red[t] = top;
        workgroupBarrier();

        var m_new = m;
        for (var g = 0u; g < G; g++) {
            m_new = max(m_new, red[qi * G + g]);
        }
        let alpha = exp(m - m_new);
        m = m_new;
        l *= alpha;
        for (var c = 0u; c < CPT; c++) {
            acc[c] *= alpha;
        }
        for (var r = 0u; r < SPT; r++) {
            let w = select(0.0, exp(s[r] - m), s[r] > NONE);
            l += w;
            wt[qi * PS + lane + G * r] = w;
        }
        workgroupBarrier();

        for (var j = slice; j < BK; j += NS) {
            let key = j0 + j;
            if (key < kend) {
                let w = wt[qi * PS + j];
                for (var c = 0u; c < CPT; c++) {
                    let col = c0 + CG * c;
                    if (col < DV) {
                        acc[c] += w * value(vbase, j, key, col);
                    }
                }
            }
        }
        workgroupBarrier();
    }

    red[t] = l;
    workgroupBarrier();
    var total = 0.0;
    for (var g = 0u; g < G; g++) {
        total += red[qi * G + g];
    }
    let obase = (b * p.sq + i) * DV;
    for (var c = 0u; c < CPT; c++) {
        let col = c0 + CG * c;
        if (NS == 1u) {
            if (live && col < DV) {
                st(obase + col, acc[c] / total);
            }
        } else {
            workgroupBarrier();
            red[t] = acc[c];
            workgroupBarrier();
            if (slice == 0u && live && col < DV) {
                var sum = 0.0;
                for (var k = 0u; k < NS; k++) {
                    sum += red[qi * G + k * CG + c0];
                }
                st(obase + col, sum / total);
            }
        }
    }
}
