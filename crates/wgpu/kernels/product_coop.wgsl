// A matrix product on matrix units (cooperative matrices: tensor cores): out = epilogue(A x B)
// for each batch z (the workgroup's z id), A [M, K] and B [K, N], in f16 with f32 sums: A and
// B are rounded to f16 as they are staged (f16 weights are already exact). The op supplies how
// its operands are read and where results go (placeholders, filled by its lowering):
// - matmul, matmul_bias (lower/matmul.rs): A = a, B = b (or b^T when TRANSPOSE_B), the
//   batch offsets through broadcast strides, the bias and GELU in the epilogue;
// - conv1d (lower/conv.rs): A = the weight [C_out, C_in * taps], B = the input gathered by
//   tap (the implicit im2col; zero in the padding), z the batch item, the bias per row.
// M, N and K are the sizes; A_BASE and B_BASE batch z's offsets; LOAD_A and LOAD_B read
// element (row, k) of A and (k, col) of B at such an offset (zero for k past K; any value for
// a row past M or a column past N, whose results are never stored); OUT_AT is the output index
// of (row, col) and EPILOGUE maps the sum v of (row, col), stored at output index `at`, to the
// value stored.
//
// Chosen where the device has 16 x 16 x 16 f16 -> f32 cooperative matrices on subgroups of
// 32 lanes (`susurrus_wgpu::matrix_units`). A workgroup of 128 invocations, four subgroups,
// computes a 64 x 64 output tile; subgroup s owns the 32 x 32 quadrant (s / 2, s % 2) as 2 x 2
// accumulators of 16 x 16. K advances in steps of 32: every invocation converts its share of
// the step's A and B tiles to f16 in workgroup memory, where the subgroups load their
// operands; the next step is read into registers while the current one is multiplied. Each
// accumulator leaves through its subgroup's 16 x 16 scratch, where every lane applies the
// epilogue to 8 values and stores those inside the matrix.
enable f16;
enable wgpu_cooperative_matrix;

const TILE: u32 = 64u;
const TK: u32 = 32u;
const TRANSPOSE_B: bool = $TRANSPOSE_B;
// Row strides of the staged tiles in halves, padded by 8 so that the rows a subgroup loads
// start in different banks. A is staged row-major, as_[r * AS + k]; B^T (a weight [N, K])
// likewise, bs[n * AS + k], read as a column-major B; a plain B row-major, bs[k * BS + n].
const AS: u32 = 40u;
const BS: u32 = 72u;

var<workgroup> as_: array<f16, 2560>;
var<workgroup> bs: array<f16, 2560>;
var<workgroup> cs: array<f32, 1024>;

// x as f16, clamped to the largest finite f16 (converting a value beyond it is undefined).
fn to_f16(x: f32) -> f16 {
    return f16(clamp(x, -65504.0, 65504.0));
}

fn a_base(z: u32) -> u32 {
    return $A_BASE;
}

fn b_base(z: u32) -> u32 {
    return $B_BASE;
}

fn load_a(base: u32, row: u32, k: u32) -> f32 {
    $LOAD_A
}

fn load_b(base: u32, col: u32, k: u32) -> f32 {
    $LOAD_B
}

fn out_at(z: u32, row: u32, col: u32) -> u32 {
    return $OUT_AT;
}

fn epilogue(v: f32, at: u32, row: u32, col: u32) -> f32 {
    return $EPILOGUE;
}

@compute @workgroup_size(128)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let a_base = a_base(wid.z);
    let b_base = b_base(wid.z);

    // What this invocation stages, so that a subgroup's loads are consecutive: A element k =
    // t % 32 of rows t / 32 + 4i (i < 16), B^T likewise; a plain B column t % 64 of k rows
    // t / 64 + 2i.
    let ak = t % 32u;
    let ar = t / 32u;
    let bc = t % 64u;
    let bk = t / 64u;
    var ra: array<f32, 16>;
    var rb: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) {
        ra[i] = load_a(a_base, row0 + ar + 4u * i, ak);
        if (TRANSPOSE_B) {
            rb[i] = load_b(b_base, col0 + ar + 4u * i, ak);
        } else {
            rb[i] = load_b(b_base, col0 + bc, bk + 2u * i);
        }
    }

    // This subgroup's quadrant.
    let qr = (sg / 2u) * 32u;
    let qc = (sg % 2u) * 32u;
    var acc00 = coop_mat16x16<f32, C>();
    var acc01 = coop_mat16x16<f32, C>();
    var acc10 = coop_mat16x16<f32, C>();
    var acc11 = coop_mat16x16<f32, C>();
    for (var k0 = 0u; k0 < $K; k0 += TK) {
        for (var i = 0u; i < 16u; i++) {
            as_[(ar + 4u * i) * AS + ak] = to_f16(ra[i]);
            if (TRANSPOSE_B) {
                bs[(ar + 4u * i) * AS + ak] = to_f16(rb[i]);
            } else {
                bs[(bk + 2u * i) * BS + bc] = to_f16(rb[i]);
            }
        }
        workgroupBarrier();

        let next = k0 + TK;
        if (next < $K) {
            for (var i = 0u; i < 16u; i++) {
                ra[i] = load_a(a_base, row0 + ar + 4u * i, next + ak);
                if (TRANSPOSE_B) {
                    rb[i] = load_b(b_base, col0 + ar + 4u * i, next + ak);
                } else {
                    rb[i] = load_b(b_base, col0 + bc, next + bk + 2u * i);
                }
            }
        }

        for (var kk = 0u; kk < TK; kk += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&as_[qr * AS + kk], AS);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&as_[(qr + 16u) * AS + kk], AS);
            var b0: coop_mat16x16<f16, B>;
            var b1: coop_mat16x16<f16, B>;
            if (TRANSPOSE_B) {
                b0 = coopLoad<coop_mat16x16<f16, B>>(&bs[qc * AS + kk], AS);
                b1 = coopLoad<coop_mat16x16<f16, B>>(&bs[(qc + 16u) * AS + kk], AS);
            } else {
                b0 = coopLoadT<coop_mat16x16<f16, B>>(&bs[kk * BS + qc], BS);
                b1 = coopLoadT<coop_mat16x16<f16, B>>(&bs[kk * BS + qc + 16u], BS);
            }
            acc00 = coopMultiplyAdd(a0, b0, acc00);
            acc01 = coopMultiplyAdd(a0, b1, acc01);
            acc10 = coopMultiplyAdd(a1, b0, acc10);
            acc11 = coopMultiplyAdd(a1, b1, acc11);
        }
        workgroupBarrier();
    }

    let scratch = sg * 256u;
    for (var tile = 0u; tile < 4u; tile++) {
        switch tile {
            case 0u: { coopStoreT(acc00, &cs[scratch], 16u); }
            case 1u: { coopStoreT(acc01, &cs[scratch], 16u); }
            case 2u: { coopStoreT(acc10, &cs[scratch], 16u); }
            default: { coopStoreT(acc11, &cs[scratch], 16u); }
        }
        workgroupBarrier();
        let tr = row0 + qr + (tile / 2u) * 16u;
        let tc = col0 + qc + (tile % 2u) * 16u;
        for (var e = 0u; e < 8u; e++) {
            let idx = lane * 8u + e;
            let row = tr + idx / 16u;
            let col = tc + idx % 16u;
            if (row < $M && col < $N) {
                let at = out_at(wid.z, row, col);
                st(at, epilogue(cs[scratch + idx], at, row, col));
            }
        }
        workgroupBarrier();
    }
}
