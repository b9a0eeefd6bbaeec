// Matrix-vector products, the few-row case of matmul.wgsl (same parameters and epilogue):
// out[z] = epilogue(a[z] x b[z]) with a [ROWS, K], b [K, N] (or [N, K] when `$TRANSPOSE_B` is
// true) and out [ROWS, N]; z, the batch index, is the workgroup's z id. ROWS (`$ROWS`, at most
// 8) is a decoder step's rows: 1 for greedy decoding, the beams of a beam search.
//
// A workgroup computes `$COLS` output columns; the LANES = 256 / COLS threads of one column
// split K between them in chunks of four consecutive k (a vec4 of a weight row: two words of
// packed f16, read as stored) and their partial sums are added by the lane folds placed
// before this kernel (`kernels/lanes*.wgsl`). Each weight read serves every row: the rows
// cost their activations' reads (K values each, from cache) and ROWS folds, where a tiled
// product would compute a 64-row tile for them on a few workgroups. The thread layout follows
// the weight's memory:
// with b [N, K] the lanes of a column are adjacent threads, so they read consecutive k; with
// b [K, N] adjacent threads are adjacent columns, reading consecutive elements of one row of b.

const COLS: u32 = $COLS;
const LANES: u32 = 256u / COLS;
const TRANSPOSE_B: bool = $TRANSPOSE_B;
const ROWS: u32 = $ROWS;
const LANE_STRIDE: u32 = select(COLS, 1u, TRANSPOSE_B);
// The k between a lane's chunks of four.
const STEP: u32 = 4u * LANES;

fn epilogue(v: f32, at: u32, col: u32) -> f32 {
    return $EPILOGUE;
}

// b^T[col][k] of this batch.
fn weight(b_base: u32, col: u32, k: u32) -> f32 {
    if (TRANSPOSE_B) {
        return ld1(b_base + col * p.k + k);
    }
    return ld1(b_base + k * p.n + col);
}

// b^T[col][k .. k + 3]: four consecutive values of a weight row (two words of packed f16)
// when b is [N, K], else one value from each of four rows of b.
fn weight4(b_base: u32, col: u32, k: u32) -> vec4<f32> {
    if (TRANSPOSE_B) {
        return ld4_1(b_base + col * p.k + k);
    }
    let at = b_base + k * p.n + col;
    return vec4<f32>(ld1(at), ld1(at + p.n), ld1(at + 2u * p.n), ld1(at + 3u * p.n));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, th: Thread) {
    let t = thread_index(th);
    var c: u32;
    var lane: u32;
    if (TRANSPOSE_B) {
        c = t / LANES;
        lane = t % LANES;
    } else {
        c = t % COLS;
        lane = t / COLS;
    }
    let col = (wid.x + wid.y * nwg.x) * COLS + c;
    let a_base = broadcast_offset(wid.z, p.batch_rank, p.batch0, p.batch1, p.a0, p.a1);
    let b_base = broadcast_offset(wid.z, p.batch_rank, p.batch0, p.batch1, p.b0, p.b1);

    var acc: array<f32, ROWS>;
    if (col < p.n) {
        // Lane l takes the chunks of four k at 4l, 4l + STEP, ..., two per iteration, so
        // that two weight loads (four words of f32, two of packed f16) are in flight.
        var k = lane * 4u;
        for (; k + STEP + 3u < p.k; k += 2u * STEP) {
            let w0 = weight4(b_base, col, k);
            let w1 = weight4(b_base, col, k + STEP);
            for (var r = 0u; r < ROWS; r++) {
                let a = a_base + r * p.k + k;
                acc[r] += dot(ld4_0(a), w0) + dot(ld4_0(a + STEP), w1);
            }
        }
        for (; k + 3u < p.k; k += STEP) {
            let w = weight4(b_base, col, k);
            for (var r = 0u; r < ROWS; r++) {
                acc[r] += dot(ld4_0(a_base + r * p.k + k), w);
            }
        }
        // This lane's last chunk when K is not a multiple of four: k .. K - 1.
        for (; k < p.k; k++) {
            let w = weight(b_base, col, k);
            for (var r = 0u; r < ROWS; r++) {
                acc[r] += ld0(a_base + r * p.k + k) * w;
            }
        }
    }
    for (var r = 0u; r < ROWS; r++) {
        let sum = lanes_f32(t, lane, acc[r], FOLD_SUM);
        if (lane == 0u && col < p.n) {
            let at = (wid.z * ROWS + r) * p.n + col;
            st(at, epilogue(sum, at, col));
        }
    }
}
