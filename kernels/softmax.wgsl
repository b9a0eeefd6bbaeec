// Softmax over rows of p.n values (the last axis), p.outputs rows, stably: the row maximum,
// then the sum of exp(x - max), then exp(x - max) / sum, all in f32.
//
// Each workgroup of 256 threads holds SLOTS rows; the LANES threads (a power of two) of a row
// are neighbours and read consecutive values (lane, lane + LANES, ...). The lanes' partial
// maxima and sums are combined by trees in workgroup memory.

const LANES: u32 = $LANES;
const SLOTS: u32 = $SLOTS;

var<workgroup> part: array<f32, 256>;

// Every lane's `v` combined over its row (max, or sum when `is_sum`), returned to all lanes.
// Called by every thread of the workgroup: it synchronises.
fn row_reduce(l: u32, lane: u32, v: f32, is_sum: bool) -> f32 {
    part[l] = v;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            let b = part[l + s];
            part[l] = select(max(part[l], b), part[l] + b, is_sum);
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
    let valid = row < p.outputs;
    let base = row * p.n;
    // Starting from the row's first value keeps -inf (not a WGSL constant) out.
    var mx = 0.0;
    if (valid) {
        mx = ld0(base);
        for (var k = lane; k < p.n; k += LANES) {
            mx = max(mx, ld0(base + k));
        }
    }
    mx = row_reduce(l, lane, mx, false);
    var sum = 0.0;
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            sum += exp(ld0(base + k) - mx);
        }
    }
    sum = row_reduce(l, lane, sum, true);
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            st(base + k, exp(ld0(base + k) - mx) / sum);
        }
    }
}
