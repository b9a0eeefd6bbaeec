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
// sums are combined by a tree in workgroup memory.

const LANES: u32 = $LANES;
const SLOTS: u32 = $SLOTS;

var<workgroup> part: array<f32, 256>;

fn load_x(i: u32) -> f32 {
    return $LOAD_X;
}

// The sum of every lane's `v` over its row, returned to all lanes. Called by every thread of
// the workgroup: it synchronises.
fn row_sum(l: u32, lane: u32, v: f32) -> f32 {
    part[l] = v;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            part[l] += part[l + s];
        }
        workgroupBarrier();
    }
    let r = part[l - lane];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let lane = l % LANES;
    let row = (wid.x + wid.y * nwg.x) * SLOTS + l / LANES;
    let valid = row < p.rows;
    let base = row * p.n;
    let n = f32(p.n);
    var sum = 0.0;
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            sum += load_x(base + k);
        }
    }
    let mean = row_sum(l, lane, sum) / n;
    var squares = 0.0;
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            let d = load_x(base + k) - mean;
            squares += d * d;
        }
    }
    let scale = 1.0 / sqrt(row_sum(l, lane, squares) / n + p.eps);
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            st(base + k, (load_x(base + k) - mean) * scale * $GAMMA(k) + $BETA(k));
        }
    }
}
