// Matrix-vector product, the one-row case of matmul.wgsl (same parameters and epilogue):
// out[z] = epilogue(a[z] x b[z]) with a [1, K], b [K, N] (or [N, K] when `$TRANSPOSE_B` is
// true) and out [1, N]; z, the batch index, is the workgroup's z id.
//
// A workgroup computes `$COLS` output columns; the LANES = 256 / COLS threads of one column
// split K between them (lane l takes k = l, l + LANES, ...; four at a time, so that four
// loads are in flight at once) and their partial sums are added by the lane folds placed
// before this kernel (`kernels/lanes*.wgsl`). The thread layout follows the weight's memory:
// with b [N, K] the lanes of a column are adjacent threads, so they read consecutive k; with
// b [K, N] adjacent threads are adjacent columns, reading consecutive elements of one row of b.

const COLS: u32 = $COLS;
const LANES: u32 = 256u / COLS;
const TRANSPOSE_B: bool = $TRANSPOSE_B;
const LANE_STRIDE: u32 = select(COLS, 1u, TRANSPOSE_B);

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

    var acc = 0.0;
    if (col < p.n) {
        var k = lane;
        for (; k + 3u * LANES < p.k; k += 4u * LANES) {
            let w = vec4<f32>(
                weight(b_base, col, k),
                weight(b_base, col, k + LANES),
                weight(b_base, col, k + 2u * LANES),
                weight(b_base, col, k + 3u * LANES),
            );
            let x = vec4<f32>(ld0(a_base + k), ld0(a_base + k + LANES), ld0(a_base + k + 2u * LANES), ld0(a_base + k + 3u * LANES));
            acc += dot(x, w);
        }
        for (; k < p.k; k += LANES) {
            acc += ld0(a_base + k) * weight(b_base, col, k);
        }
    }
    let sum = lanes_f32(t, lane, acc, FOLD_SUM);
    if (lane == 0u && col < p.n) {
        let at = wid.z * p.n + col;
        st(at, epilogue(sum, at, col));
    }
}
