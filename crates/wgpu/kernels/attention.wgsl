// Fused attention: out = softmax(q k^T * scale + mask) v, per flattened batch (head) b with
// q [Sq, D], k [Sk, D], v [Sk, DV] and out [Sq, DV]. The score matrix is never stored: keys are
// visited in blocks of BK with an online softmax (per query a running max m and sum l; the
// accumulator is rescaled by exp(m_old - m_new) when the max grows). Scores, softmax and
// accumulation are f32.
//
// A workgroup of 256 threads takes BQ consecutive queries of one head; the G = 256 / BQ
// threads ("lanes") of a query split each key block in four steps:
// - scores: lane l scores keys l, l + G, ... of the block (SPT of them) against its copy of
//   the query row, held in registers;
// - max: the lanes' maxima are combined in workgroup memory (`lanes_reduce`);
// - weights: each lane turns its own scores into exp(s - m) in workgroup memory and adds
//   them to its share of l (the shares are added once, at the end);
// - values: lanes split the output columns in vec4 chunks (CG lanes, chunks c, c + CG, ...)
//   and, when G > CG, the block's keys (NS = G / CG slices, added at the end).
// The K and V rows of a block are copied into workgroup memory, where the BQ queries share
// them; each thread loads its part of the next block into registers while the current one is
// computed. (A one-query variant that read K and V in place hung SwiftShader's WebGPU adapter;
// decoder steps use this kernel with one live query per workgroup.)
//
// The dot products and value sums are unrolled by hand, 16 vec4s at a time: written as loops,
// the loads were issued one round trip after another on the GPUs measured (several times
// slower).
//
// Masked keys (causal, past Sk, or an additive -inf) get weight 0; a query with no visible
// key divides 0 by 0, as the reference does. MASK is 0 (none), 1 (additive: `mask_at` reads
// input 3 through its broadcast strides) or 2 (causal: key j is visible to query i when
// j <= i + Sk - Sq).

const BQ: u32 = $BQ;
const BK: u32 = $BK;
const D: u32 = $D;
const DV: u32 = $DV;
const CG: u32 = $CG;
const MASK: u32 = $MASK;

const G: u32 = 256u / BQ;
const SPT: u32 = BK / G;
const NS: u32 = G / CG;
// Keys of a block per value slice.
const KPT: u32 = BK / NS;
const D4: u32 = (D + 3u) / 4u;
const DV4: u32 = (DV + 3u) / 4u;
// Value chunks per lane.
const CPT: u32 = (DV4 + CG - 1u) / CG;
// The query row in vec4s, zero-padded to whole groups of 16.
const Q4: u32 = (D4 + 15u) / 16u * 16u;
// Row strides of the staged keys (one vec4 of padding: the lanes of a query read different
// rows, which then fall in different banks) and of the weights.
const KS4: u32 = D4 + 1u;
const PS: u32 = BK + 1u;
// Elements of a staged block each thread loads.
const KLOADS: u32 = (BK * D + 255u) / 256u;
const VLOADS: u32 = (BK * DV + 255u) / 256u;
// Below every real score: "no key yet" for the running max, and the score of a masked key.
const NONE: f32 = -3.0e38;

var<workgroup> kt: array<vec4<f32>, $KT_LEN>;
var<workgroup> vt: array<vec4<f32>, $VT_LEN>;
var<workgroup> wt: array<f32, BQ * PS>;
var<workgroup> red: array<f32, 256>;

// Element `e` of the additive mask (`$MASK_LOAD` is `ld3(e)`, or `0.0` without a mask input).
fn mask_at(e: u32) -> f32 {
    return $MASK_LOAD;
}

// Elements 4 * d4 .. 4 * d4 + 3 of the row of `key` (block slot `j`), zero past D.
fn key4(kbase: u32, j: u32, key: u32, d4: u32) -> vec4<f32> {
    if (d4 >= D4) {
        return vec4<f32>(0.0);
    }
    return kt[j * KS4 + d4];
}

// Value chunk `ch` (columns 4 * ch ..) of `key` (block slot `j`), zero past DV.
fn value4(vbase: u32, j: u32, key: u32, ch: u32) -> vec4<f32> {
    return vt[j * DV4 + ch];
}

// The weight of block slot `slice + NS * r` for query `qi`, zero past KPT and Sk.
fn pv_weight(qi: u32, j0: u32, kend: u32, r: u32, slice: u32) -> f32 {
    let j = slice + NS * r;
    if (r < KPT) {
        return wt[qi * PS + j];
    }
    return 0.0;
}

// Value chunk `ch` of block slot `slice + NS * r`, zero past KPT and Sk.
fn pv_value(vbase: u32, j0: u32, kend: u32, r: u32, slice: u32, ch: u32) -> vec4<f32> {
    let j = slice + NS * r;
    if (r < KPT) {
        return value4(vbase, j, j0 + j, ch);
    }
    return vec4<f32>(0.0);
}

// The max (or sum) of `x` over the G lanes of query `qi`; call in uniform control flow. Up to
// 32 lanes every lane reads all G values; beyond, lanes first combine groups of 16.
fn lanes_reduce(t: u32, qi: u32, lane: u32, x: f32, is_max: bool) -> f32 {
    red[t] = x;
    workgroupBarrier();
    var n = G;
    if (G > 32u) {
        var part = red[t];
        if (lane < G / 16u) {
            let base = qi * G + lane * 16u;
            part = red[base];
            for (var g = 1u; g < 16u; g++) {
                part = select(part + red[base + g], max(part, red[base + g]), is_max);
            }
        }
        workgroupBarrier();
        red[t] = part;
        workgroupBarrier();
        n = G / 16u;
    }
    var r = red[qi * G];
    for (var g = 1u; g < n; g++) {
        r = select(r + red[qi * G + g], max(r, red[qi * G + g]), is_max);
    }
    return r;
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

    var q: array<vec4<f32>, Q4>;
    for (var d4 = 0u; d4 < D4; d4++) {
        var x = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
            if (live && d4 * 4u + c < D) {
                x[c] = ld0((b * p.sq + i) * D + d4 * 4u + c);
            }
        }
        q[d4] = x;
    }
    var mask_row = 0u;
    if (MASK == 1u) {
        mask_row = broadcast_offset(b, p.lead_rank, p.lead0, p.lead1, p.mask0, p.mask1) + i * p.mask_sq;
    }
    // Keys past the last one visible to the workgroup's last query are never read.
    var kend = p.sk;
    if (MASK == 2u) {
        kend = min(p.sk, min(q0 + BQ, p.sq) + p.sk - p.sq);
    }
    let visible = select(kend, min(kend, i + 1u + p.sk - p.sq), MASK == 2u);

    var m = NONE;
    var l = 0.0;
    var acc: array<vec4<f32>, CPT>;
    let c0 = lane % CG;
    let slice = lane / CG;

    // This thread's elements of the next staged block: element e of a block is row e / D of
    // the keys (e / DV of the values), and the rows of a block are contiguous in memory.
    var kr: array<f32, KLOADS>;
    var vr: array<f32, VLOADS>;
    {
        for (var r = 0u; r < KLOADS; r++) {
            let e = t + 256u * r;
            if (e < BK * D && e / D < kend) {
                kr[r] = ld1(kbase + e);
            }
        }
        for (var r = 0u; r < VLOADS; r++) {
            let e = t + 256u * r;
            if (e < BK * DV && e / DV < kend) {
                vr[r] = ld2(vbase + e);
            }
        }
    }
    for (var j0 = 0u; j0 < kend; j0 += BK) {
        {
            for (var r = 0u; r < KLOADS; r++) {
                let e = t + 256u * r;
                if (e < BK * D) {
                    let d = e % D;
                    kt[(e / D) * KS4 + d / 4u][d % 4u] = kr[r];
                }
            }
            for (var r = 0u; r < VLOADS; r++) {
                let e = t + 256u * r;
                if (e < BK * DV) {
                    let c = e % DV;
                    vt[(e / DV) * DV4 + c / 4u][c % 4u] = vr[r];
                }
            }
            workgroupBarrier();
            let next = j0 + BK;
            for (var r = 0u; r < KLOADS; r++) {
                let e = t + 256u * r;
                var x = 0.0;
                if (e < BK * D && next + e / D < kend) {
                    x = ld1(kbase + next * D + e);
                }
                kr[r] = x;
            }
            for (var r = 0u; r < VLOADS; r++) {
                let e = t + 256u * r;
                var x = 0.0;
                if (e < BK * DV && next + e / DV < kend) {
                    x = ld2(vbase + next * DV + e);
                }
                vr[r] = x;
            }
        }

        var s: array<f32, SPT>;
        var top = NONE;
        for (var r = 0u; r < SPT; r++) {
            let j = lane + G * r;
            let key = j0 + j;
            var score = NONE;
            if (live && key < visible) {
                var qk = vec4<f32>(0.0);
                for (var d4 = 0u; d4 < Q4; d4 += 16u) {
                    let k = array<vec4<f32>, 16>(
                        key4(kbase, j, key, d4 + 0u),
                        key4(kbase, j, key, d4 + 1u),
                        key4(kbase, j, key, d4 + 2u),
                        key4(kbase, j, key, d4 + 3u),
                        key4(kbase, j, key, d4 + 4u),
                        key4(kbase, j, key, d4 + 5u),
                        key4(kbase, j, key, d4 + 6u),
                        key4(kbase, j, key, d4 + 7u),
                        key4(kbase, j, key, d4 + 8u),
                        key4(kbase, j, key, d4 + 9u),
                        key4(kbase, j, key, d4 + 10u),
                        key4(kbase, j, key, d4 + 11u),
                        key4(kbase, j, key, d4 + 12u),
                        key4(kbase, j, key, d4 + 13u),
                        key4(kbase, j, key, d4 + 14u),
                        key4(kbase, j, key, d4 + 15u)
                    );
                    qk += q[d4 + 0u] * k[0] + q[d4 + 1u] * k[1] + q[d4 + 2u] * k[2] + q[d4 + 3u] * k[3] +
                        q[d4 + 4u] * k[4] + q[d4 + 5u] * k[5] + q[d4 + 6u] * k[6] + q[d4 + 7u] * k[7] +
                        q[d4 + 8u] * k[8] + q[d4 + 9u] * k[9] + q[d4 + 10u] * k[10] + q[d4 + 11u] * k[11] +
                        q[d4 + 12u] * k[12] + q[d4 + 13u] * k[13] + q[d4 + 14u] * k[14] + q[d4 + 15u] * k[15];
                }
                score = (qk.x + qk.y + qk.z + qk.w) * p.scale;
                if (MASK == 1u) {
                    score += mask_at(mask_row + key * p.mask_sk);
                }
                // An additive -inf (anything at or below NONE) masks the key.
                score = select(NONE, score, score > NONE);
            }
            s[r] = score;
            top = max(top, score);
        }
        let m_new = max(m, lanes_reduce(t, qi, lane, top, true));
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

        for (var r = 0u; r < KPT; r += 16u) {
            let w = array<vec4<f32>, 4>(
                vec4<f32>(pv_weight(qi, j0, kend, r + 0u, slice), pv_weight(qi, j0, kend, r + 1u, slice), pv_weight(qi, j0, kend, r + 2u, slice), pv_weight(qi, j0, kend, r + 3u, slice)),
                vec4<f32>(pv_weight(qi, j0, kend, r + 4u, slice), pv_weight(qi, j0, kend, r + 5u, slice), pv_weight(qi, j0, kend, r + 6u, slice), pv_weight(qi, j0, kend, r + 7u, slice)),
                vec4<f32>(pv_weight(qi, j0, kend, r + 8u, slice), pv_weight(qi, j0, kend, r + 9u, slice), pv_weight(qi, j0, kend, r + 10u, slice), pv_weight(qi, j0, kend, r + 11u, slice)),
                vec4<f32>(pv_weight(qi, j0, kend, r + 12u, slice), pv_weight(qi, j0, kend, r + 13u, slice), pv_weight(qi, j0, kend, r + 14u, slice), pv_weight(qi, j0, kend, r + 15u, slice))
            );
            for (var c = 0u; c < CPT; c++) {
                let ch = c0 + CG * c;
                if (ch < DV4) {
                    let v = array<vec4<f32>, 16>(
                        pv_value(vbase, j0, kend, r + 0u, slice, ch),
                        pv_value(vbase, j0, kend, r + 1u, slice, ch),
                        pv_value(vbase, j0, kend, r + 2u, slice, ch),
                        pv_value(vbase, j0, kend, r + 3u, slice, ch),
                        pv_value(vbase, j0, kend, r + 4u, slice, ch),
                        pv_value(vbase, j0, kend, r + 5u, slice, ch),
                        pv_value(vbase, j0, kend, r + 6u, slice, ch),
                        pv_value(vbase, j0, kend, r + 7u, slice, ch),
                        pv_value(vbase, j0, kend, r + 8u, slice, ch),
                        pv_value(vbase, j0, kend, r + 9u, slice, ch),
                        pv_value(vbase, j0, kend, r + 10u, slice, ch),
                        pv_value(vbase, j0, kend, r + 11u, slice, ch),
                        pv_value(vbase, j0, kend, r + 12u, slice, ch),
                        pv_value(vbase, j0, kend, r + 13u, slice, ch),
                        pv_value(vbase, j0, kend, r + 14u, slice, ch),
                        pv_value(vbase, j0, kend, r + 15u, slice, ch)
                    );
                    acc[c] += w[0].x * v[0] + w[0].y * v[1] + w[0].z * v[2] + w[0].w * v[3] +
                        w[1].x * v[4] + w[1].y * v[5] + w[1].z * v[6] + w[1].w * v[7] +
                        w[2].x * v[8] + w[2].y * v[9] + w[2].z * v[10] + w[2].w * v[11] +
                        w[3].x * v[12] + w[3].y * v[13] + w[3].z * v[14] + w[3].w * v[15];
                }
            }
        }
        workgroupBarrier();
    }

    let total = lanes_reduce(t, qi, lane, l, false);
    let obase = (b * p.sq + i) * DV;
    for (var c = 0u; c < CPT; c++) {
        let ch = c0 + CG * c;
        for (var k = 0u; k < 4u; k++) {
            var sum = acc[c][k];
            if (NS > 1u) {
                workgroupBarrier();
                red[t] = sum;
                workgroupBarrier();
                sum = 0.0;
                for (var sl = 0u; sl < NS; sl++) {
                    sum += red[qi * G + sl * CG + c0];
                }
            }
            if (slice == 0u && live && ch < DV4 && ch * 4u + k < DV) {
                st(obase + ch * 4u + k, sum / total);
            }
        }
    }
}
