// Attention on matrix units (cooperative matrices: tensor cores), flash style, first pass:
// softmax(q k^T * scale + mask) v per flattened batch (head) b for heads of 64 (D = DV = 64),
// with the masks of attention.wgsl. The keys are cut into `p.splits` splits of `p.chunk`
// (a multiple of 64) so that enough workgroups run at once; a workgroup takes 64 queries of
// one head and one split, and writes each query's partial softmax over the split to the
// scratch as attention_split.wgsl does ((b * Sq + i) * splits + s) * (DV + 2): max m, sum l,
// DV weighted sums), which attention_combine.wgsl merges. Within the split, keys are visited
// in blocks of 64 with an online softmax, the score matrix never stored beyond one block.
// Q K^T and P V take f16 inputs and accumulate in f32; scale, mask, softmax and sums are f32.
//
// Chosen where the device has 16 x 16 x 16 f16 -> f32 cooperative matrices on subgroups of
// 32 lanes (`susurrus_wgpu::matrix_units`). A workgroup of 128 invocations, four subgroups,
// takes 64 queries, subgroup s the 16 queries 16s.. of them: their rows of Q, as f16, stay in
// four A matrices for the whole loop, and their weighted sums of V in four 16 x 16 f32
// accumulators. Per block the invocations stage K and V rows as f16 in workgroup memory (each
// invocation's share of the next block is loaded into registers while the current one is
// computed, so the loads' latency is hidden); each subgroup multiplies its Q by K^T into four
// score tiles and stores them in its scratch; lane l owns query row l / 2 and half l % 2 of
// the block's keys: it reads its 32 scores into registers (starting at column l, so that the
// 32 lanes read 32 different banks: rows are 64 words apart), scales and masks them, combines
// the row's max and sum with its partner lane (a subgroup shuffle) and writes the weights
// exp(s - m) as f16, which the subgroup multiplies by V into its accumulators. The partial
// results leave through the scratch, consecutive lanes writing consecutive columns.
//
// The running max m of a row is raised only when a block's scores exceed it by more than
// SLACK: the weights then stay below e^SLACK (well inside f16), and only on such blocks are the
// accumulators rescaled by exp(m_old - m_new), through workgroup memory (a cooperative matrix's
// elements cannot be addressed by row). Any subgroup's need is published in `grew` and read
// back uniformly, so that every subgroup takes the same barriers.
//
// Masked keys (causal, past Sk, or an additive -inf) get weight 0; a split without a visible
// key writes m = NONE, l = 0 and zeros.
enable f16;
enable wgpu_cooperative_matrix;

const BQ: u32 = 64u;
const BK: u32 = 64u;
const D: u32 = 64u;
const MASK: u32 = $MASK;
// Row stride of the staged f16 rows (K, V, Q and the weights): 8 halves of padding, so that
// the rows a subgroup loads start in different banks.
const RS: u32 = 72u;
// Below every real score: "no key yet" for the running max, and the score of a masked key.
const NONE: f32 = -3.0e38;

// How far (natural log) a block's scores may exceed a row's running max before it is raised.
const SLACK: f32 = 8.0;
// Keys and values per invocation per block: dimension t % 64 of keys t / 64 + 2u, u < 32.
const PER: u32 = 32u;

var<workgroup> ks: array<f16, 4608>;
var<workgroup> vs: array<f16, 4608>;
// Per subgroup: 16 rows of f16 (its queries, then each block's weights) and 16 x 64 f32 (each
// block's scores; the accumulators when they are rescaled or written out).
var<workgroup> ps: array<f16, 4608>;
var<workgroup> ss: array<f32, 4096>;
// Per subgroup, rewritten every block: 1 if one of its rows' max was raised on the block.
var<workgroup> grew: array<u32, 4>;

// Element `e` of the additive mask (`$MASK_LOAD` is `ld3(e)`, or `0.0` without a mask input).
fn mask_at(e: u32) -> f32 {
    return $MASK_LOAD;
}

// x as f16, clamped to the largest finite f16 (converting a value beyond it is undefined).
fn to_f16(x: f32) -> f16 {
    return f16(clamp(x, -65504.0, 65504.0));
}

// This invocation's share of the block of keys from `j0`: key j0 + row + 2u of dimension d
// of K and of V, zero past `kend`.
fn fetch(kr: ptr<function, array<f32, PER>>, vr: ptr<function, array<f32, PER>>, base: u32, kend: u32, j0: u32, d: u32) {
    for (var u = 0u; u < PER; u++) {
        let key = j0 + 2u * u;
        var kx = 0.0;
        var vx = 0.0;
        if (key < kend) {
            kx = ld1(base + key * D + d);
            vx = ld2(base + key * D + d);
        }
        (*kr)[u] = kx;
        (*vr)[u] = vx;
    }
}

// Score of the key `key` in this lane's row from the raw product `raw`: scaled, masked, NONE
// where the key is hidden.
fn score(raw: f32, key: u32, visible: u32, live: bool, mask_row: u32) -> f32 {
    var s = NONE;
    if (live && key < visible) {
        s = raw * p.scale;
        if (MASK == 1u) {
            s += mask_at(mask_row + key * p.mask_sk);
        }
        // An additive -inf (anything at or below NONE) masks the key.
        s = select(NONE, s, s > NONE);
    }
    return s;
}

@compute @workgroup_size(128)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let wg = wid.x + wid.y * nwg.x;
    if (wg >= p.batch * p.qblocks * p.splits) {
        return;
    }
    let split = wg % p.splits;
    let b = wg / p.splits / p.qblocks;
    let q0 = (wg / p.splits % p.qblocks) * BQ;
    let kbase = b * p.sk * D;
    let first = q0 + sg * 16u;
    let pbase = sg * 16u * RS;
    let sbase = sg * 1024u;

    // This split's keys; those past the last one visible to the workgroup's last query are
    // never read.
    var kend = min(p.sk, (split + 1u) * p.chunk);
    if (MASK == 2u) {
        kend = min(kend, min(q0 + BQ, p.sq) + p.sk - p.sq);
    }
    let jfirst = split * p.chunk;
    // The first block's K and V, loading while Q is staged.
    let d = t % D;
    let krow = t / D;
    var kr: array<f32, PER>;
    var vr: array<f32, PER>;
    fetch(&kr, &vr, kbase, kend, jfirst + krow, d);

    // This subgroup's 16 query rows as four 16 x 16 A matrices along D.
    for (var e = lane; e < 16u * D; e += 32u) {
        let i = first + e / D;
        var x = 0.0;
        if (i < p.sq) {
            x = ld0((b * p.sq + i) * D + e % D);
        }
        ps[pbase + (e / D) * RS + e % D] = to_f16(x);
    }
    workgroupBarrier();
    let qa0 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase], RS);
    let qa1 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase + 16u], RS);
    let qa2 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase + 32u], RS);
    let qa3 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase + 48u], RS);

    // This lane's query row and half.
    let r = lane / 2u;
    let h = lane % 2u;
    let i = first + r;
    let live = i < p.sq;
    var mask_row = 0u;
    if (MASK == 1u) {
        mask_row = broadcast_offset(b, p.lead_rank, p.lead0, p.lead1, p.mask0, p.mask1) + i * p.mask_sq;
    }
    let visible = select(kend, min(kend, i + 1u + p.sk - p.sq), MASK == 2u);

    var m = NONE;
    var l = 0.0;
    var o0 = coop_mat16x16<f32, C>();
    var o1 = coop_mat16x16<f32, C>();
    var o2 = coop_mat16x16<f32, C>();
    var o3 = coop_mat16x16<f32, C>();
    for (var j0 = jfirst; j0 < kend; j0 += BK) {
        // Every subgroup is done with the previous block's K and V (and Q, the first time).
        workgroupBarrier();
        for (var u = 0u; u < PER; u++) {
            ks[(krow + 2u * u) * RS + d] = to_f16(kr[u]);
            vs[(krow + 2u * u) * RS + d] = to_f16(vr[u]);
        }
        workgroupBarrier();
        if (j0 + BK < kend) {
            fetch(&kr, &vr, kbase, kend, j0 + BK + krow, d);
        }

        // Scores of the block: S[16 x 64] = Q K^T, K^T read as a column-major B.
        for (var kt = 0u; kt < 4u; kt++) {
            var s = coop_mat16x16<f32, C>();
            s = coopMultiplyAdd(qa0, coopLoad<coop_mat16x16<f16, B>>(&ks[kt * 16u * RS], RS), s);
            s = coopMultiplyAdd(qa1, coopLoad<coop_mat16x16<f16, B>>(&ks[kt * 16u * RS + 16u], RS), s);
            s = coopMultiplyAdd(qa2, coopLoad<coop_mat16x16<f16, B>>(&ks[kt * 16u * RS + 32u], RS), s);
            s = coopMultiplyAdd(qa3, coopLoad<coop_mat16x16<f16, B>>(&ks[kt * 16u * RS + 48u], RS), s);
            coopStoreT(s, &ss[sbase + kt * 16u], 64u);
        }
        workgroupBarrier();

        // Lane l visits its 32 columns starting at column l: the 32 lanes then read 32
        // different banks at each step (rows are 64 words apart, which would put a column of
        // every row in one bank).
        let row = sbase + r * 64u + h * 32u;
        var top = NONE;
        var sc: array<f32, 32>;
        for (var c = 0u; c < 32u; c++) {
            let col = (c + lane) & 31u;
            sc[c] = score(ss[row + col], j0 + h * 32u + col, visible, live, mask_row);
            top = max(top, sc[c]);
        }
        top = max(top, subgroupShuffleXor(top, 1u));
        // The max is set by the row's first visible block and raised past SLACK.
        let grow = m > NONE && top > m + SLACK;
        let m_new = select(m, top, m == NONE || grow);
        let alpha = select(1.0, exp(m - m_new), grow);
        var sum = 0.0;
        for (var c = 0u; c < 32u; c++) {
            let col = (c + lane) & 31u;
            let w = select(0.0, exp(sc[c] - m_new), sc[c] > NONE);
            sum += w;
            ps[pbase + r * RS + h * 32u + col] = f16(w);
        }
        sum += subgroupShuffleXor(sum, 1u);
        l = l * alpha + sum;
        m = m_new;
        let raised = subgroupAny(grow);
        if (lane == 0u) {
            grew[sg] = select(0u, 1u, raised);
        }
        // A barrier too: the weights are in place and every score has been read.
        let g = workgroupUniformLoad(&grew);
        if (max(max(g[0], g[1]), max(g[2], g[3])) != 0u) {
            coopStoreT(o0, &ss[sbase], 64u);
            coopStoreT(o1, &ss[sbase + 16u], 64u);
            coopStoreT(o2, &ss[sbase + 32u], 64u);
            coopStoreT(o3, &ss[sbase + 48u], 64u);
            workgroupBarrier();
            for (var c = 0u; c < 32u; c++) {
                ss[row + ((c + lane) & 31u)] *= alpha;
            }
            workgroupBarrier();
            o0 = coopLoadT<coop_mat16x16<f32, C>>(&ss[sbase], 64u);
            o1 = coopLoadT<coop_mat16x16<f32, C>>(&ss[sbase + 16u], 64u);
            o2 = coopLoadT<coop_mat16x16<f32, C>>(&ss[sbase + 32u], 64u);
            o3 = coopLoadT<coop_mat16x16<f32, C>>(&ss[sbase + 48u], 64u);
        }

        // The block's P V [16 x 64] added to the accumulators, V read as a row-major B.
        let pa0 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase], RS);
        let pa1 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase + 16u], RS);
        let pa2 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase + 32u], RS);
        let pa3 = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase + 48u], RS);
        o0 = coopMultiplyAdd(pa0, coopLoadT<coop_mat16x16<f16, B>>(&vs[0u], RS), o0);
        o0 = coopMultiplyAdd(pa1, coopLoadT<coop_mat16x16<f16, B>>(&vs[16u * RS], RS), o0);
        o0 = coopMultiplyAdd(pa2, coopLoadT<coop_mat16x16<f16, B>>(&vs[32u * RS], RS), o0);
        o0 = coopMultiplyAdd(pa3, coopLoadT<coop_mat16x16<f16, B>>(&vs[48u * RS], RS), o0);
        o1 = coopMultiplyAdd(pa0, coopLoadT<coop_mat16x16<f16, B>>(&vs[16u], RS), o1);
        o1 = coopMultiplyAdd(pa1, coopLoadT<coop_mat16x16<f16, B>>(&vs[16u * RS + 16u], RS), o1);
        o1 = coopMultiplyAdd(pa2, coopLoadT<coop_mat16x16<f16, B>>(&vs[32u * RS + 16u], RS), o1);
        o1 = coopMultiplyAdd(pa3, coopLoadT<coop_mat16x16<f16, B>>(&vs[48u * RS + 16u], RS), o1);
        o2 = coopMultiplyAdd(pa0, coopLoadT<coop_mat16x16<f16, B>>(&vs[32u], RS), o2);
        o2 = coopMultiplyAdd(pa1, coopLoadT<coop_mat16x16<f16, B>>(&vs[16u * RS + 32u], RS), o2);
        o2 = coopMultiplyAdd(pa2, coopLoadT<coop_mat16x16<f16, B>>(&vs[32u * RS + 32u], RS), o2);
        o2 = coopMultiplyAdd(pa3, coopLoadT<coop_mat16x16<f16, B>>(&vs[48u * RS + 32u], RS), o2);
        o3 = coopMultiplyAdd(pa0, coopLoadT<coop_mat16x16<f16, B>>(&vs[48u], RS), o3);
        o3 = coopMultiplyAdd(pa1, coopLoadT<coop_mat16x16<f16, B>>(&vs[16u * RS + 48u], RS), o3);
        o3 = coopMultiplyAdd(pa2, coopLoadT<coop_mat16x16<f16, B>>(&vs[32u * RS + 48u], RS), o3);
        o3 = coopMultiplyAdd(pa3, coopLoadT<coop_mat16x16<f16, B>>(&vs[48u * RS + 48u], RS), o3);
    }
    // Every subgroup is done with its last weights and scores before the scratch is reused.
    workgroupBarrier();
    coopStoreT(o0, &ss[sbase], 64u);
    coopStoreT(o1, &ss[sbase + 16u], 64u);
    coopStoreT(o2, &ss[sbase + 32u], 64u);
    coopStoreT(o3, &ss[sbase + 48u], 64u);
    workgroupBarrier();
    if (live && h == 0u) {
        let out = ((b * p.sq + i) * p.splits + split) * (D + 2u);
        st(out, m);
        st(out + 1u, l);
    }
    // The subgroup's 16 rows of sums, consecutive lanes writing consecutive columns.
    for (var e = lane; e < 16u * D; e += 32u) {
        let qi = first + e / D;
        if (qi < p.sq) {
            st(((b * p.sq + qi) * p.splits + split) * (D + 2u) + 2u + e % D, ss[sbase + e]);
        }
    }
}
