// Layer norm over rows of p.n values (the last axis), p.rows rows, in f32:
// (x - mean) / sqrt(var + eps) * gamma + beta, with the biased variance computed as the mean
// of squared deviations from the mean (a second pass over the row, which keeps its digits
// where E[x^2] - E[x]^2 would cancel).
//
// `$LOAD_X` reads x at flat index `i` (`ld0(i)`, or `(ld0(i) + ld1(i))` for the fused
// residual add); `$GAMMA` and `$BETA` are the loads of the weights.
//
// Each workgroup of 256 threads holds SLOTS rows; the LANES threads (a power of two) of a row
// are neighbours and read consecutive values (lane, lane + LANES, ...). The lanes' partial
// sums are combined by the lane folds placed before this kernel (`kernels/lanes*.wgsl`).

const LANES: u32 = $LANES;
const SLOTS: u32 = $SLOTS;
const LANE_STRIDE: u32 = 1u;

fn load_x(i: u32) -> f32 {
    return $LOAD_X;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, th: Thread) {
    let t = thread_index(th);
    let lane = t % LANES;
    let row = (wid.x + wid.y * nwg.x) * SLOTS + t / LANES;
    let valid = row < p.rows;
    let base = row * p.n;
    let n = f32(p.n);
    var sum = 0.0;
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            sum += load_x(base + k);
        }
    }
    let mean = lanes_f32(t, lane, sum, FOLD_SUM) / n;
    var squares = 0.0;
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            let d = load_x(base + k) - mean;
            squares += d * d;
        }
    }
    let scale = 1.0 / sqrt(lanes_f32(t, lane, squares, FOLD_SUM) / n + p.eps);
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            st(base + k, (load_x(base + k) - mean) * scale * $GAMMA(k) + $BETA(k));
        }
    }
}
