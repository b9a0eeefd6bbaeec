// Attention on matrix units (cooperative matrices: tensor cores), flash style, first pass:
// softmax(q k^T * scale + mask) v per flattened batch (head) b for heads of 64 (D = DV = 64),
// with the masks of attention.wgsl. The keys are cut into `p.splits` splits of `p.chunk`
// (a multiple of 64) so that enough workgroups run at once; a workgroup takes 64 queries of
// one head and one split, and writes each query's partial softmax over the split to the
// scratch as attention_split.wgsl does ((b * Sq + i) * splits + s) * (DV + 2): max m, sum l,
// DV weighted sums), which attention_combine.wgsl merges. Within the split, keys are visited
// in blocks of 64 with an online softmax (running max m and sum l; the sums are rescaled by
// exp(m_old - m_new) when the max grows), the score matrix never stored beyond one block.
// Q K^T and P V take f16 inputs and accumulate in f32; scale, mask, softmax and sums are f32.
//
// Chosen where the device has 16 x 16 x 16 f16 -> f32 cooperative matrices on subgroups of
// 32 lanes (`exec::wgpu::matrix_units`). A workgroup of 128 invocations, four subgroups,
// takes 64 queries, subgroup s the 16 queries 16s.. of them: their rows of Q, as f16, stay in
// four A matrices for the whole loop. Per block the invocations stage K and V rows as f16 in
// workgroup memory; each subgroup multiplies its Q by K^T into four 16 x 16 score tiles,
// stores them in its scratch, and then lane l owns query row l / 2 and half l % 2 of the
// block's keys (and of the output columns): it scales and masks its 32 scores, combines the
// row's max and sum with its partner lane (a subgroup shuffle), and writes the weights
// exp(s - m) as f16, which the subgroup multiplies by V into the scratch again; the lane adds
// its 32 output values to the 32 it keeps in registers.
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

var<workgroup> ks: array<f16, 4608>;
var<workgroup> vs: array<f16, 4608>;
// Per subgroup: 16 rows of f16 (its queries, then each block's weights) and 16 x 64 f32 (each
// block's scores, then its P V).
var<workgroup> ps: array<f16, 4608>;
var<workgroup> ss: array<f32, 4096>;

// Element `e` of the additive mask (`$MASK_LOAD` is `ld3(e)`, or `0.0` without a mask input).
fn mask_at(e: u32) -> f32 {
    return $MASK_LOAD;
}

// x as f16, clamped to the largest finite f16 (converting a value beyond it is undefined).
fn to_f16(x: f32) -> f16 {
    return f16(clamp(x, -65504.0, 65504.0));
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
    // This split's keys; those past the last one visible to the workgroup's last query are
    // never read.
    var kend = min(p.sk, (split + 1u) * p.chunk);
    if (MASK == 2u) {
        kend = min(kend, min(q0 + BQ, p.sq) + p.sk - p.sq);
    }
    let visible = select(kend, min(kend, i + 1u + p.sk - p.sq), MASK == 2u);

    var m = NONE;
    var l = 0.0;
    var o: array<f32, 32>;
    var sc: array<f32, 32>;
    for (var j0 = split * p.chunk; j0 < kend; j0 += BK) {
        workgroupBarrier();
        for (var e = t; e < BK * D; e += 128u) {
            let key = j0 + e / D;
            var kx = 0.0;
            var vx = 0.0;
            if (key < p.sk) {
                kx = ld1(kbase + key * D + e % D);
                vx = ld2(kbase + key * D + e % D);
            }
            ks[(e / D) * RS + e % D] = to_f16(kx);
            vs[(e / D) * RS + e % D] = to_f16(vx);
        }
        workgroupBarrier();

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

        var top = NONE;
        for (var c = 0u; c < 32u; c++) {
            let key = j0 + h * 32u + c;
            var score = NONE;
            if (live && key < visible) {
                score = ss[sbase + r * 64u + h * 32u + c] * p.scale;
                if (MASK == 1u) {
                    score += mask_at(mask_row + key * p.mask_sk);
                }
                // An additive -inf (anything at or below NONE) masks the key.
                score = select(NONE, score, score > NONE);
            }
            sc[c] = score;
            top = max(top, score);
        }
        top = max(top, subgroupShuffleXor(top, 1u));
        let m_new = max(m, top);
        let alpha = exp(m - m_new);
        var sum = 0.0;
        for (var c = 0u; c < 32u; c++) {
            let w = select(0.0, exp(sc[c] - m_new), sc[c] > NONE);
            sum += w;
            ps[pbase + r * RS + h * 32u + c] = f16(w);
        }
        sum += subgroupShuffleXor(sum, 1u);
        l = l * alpha + sum;
        m = m_new;
        workgroupBarrier();

        // The block's P V [16 x 64], V read as a row-major B.
        for (var vt = 0u; vt < 4u; vt++) {
            var acc = coop_mat16x16<f32, C>();
            for (var kc = 0u; kc < 4u; kc++) {
                let pa = coopLoadT<coop_mat16x16<f16, A>>(&ps[pbase + kc * 16u], RS);
                let vb = coopLoadT<coop_mat16x16<f16, B>>(&vs[kc * 16u * RS + vt * 16u], RS);
                acc = coopMultiplyAdd(pa, vb, acc);
            }
            coopStoreT(acc, &ss[sbase + vt * 16u], 64u);
        }
        workgroupBarrier();
        for (var c = 0u; c < 32u; c++) {
            o[c] = o[c] * alpha + ss[sbase + r * 64u + h * 32u + c];
        }
    }
    if (live) {
        let out = ((b * p.sq + i) * p.splits + split) * (D + 2u);
        if (h == 0u) {
            st(out, m);
            st(out + 1u, l);
        }
        for (var c = 0u; c < 32u; c++) {
            st(out + 2u + h * 32u + c, o[c]);
        }
    }
}
