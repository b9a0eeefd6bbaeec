// Softmax over rows of p.n values (the last axis), p.outputs rows, stably: the row maximum,
// then the sum of exp(x - max), then exp(x - max) / sum, all in f32.
//
// Each workgroup of 256 threads holds SLOTS rows; the LANES threads (a power of two) of a row
// are neighbours and read consecutive values (lane, lane + LANES, ...). The lanes' partial
// maxima and sums are combined by the lane folds placed before this kernel
// (`kernels/lanes*.wgsl`).

const LANES: u32 = $LANES;
const SLOTS: u32 = $SLOTS;
const LANE_STRIDE: u32 = 1u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, th: Thread) {
    let t = thread_index(th);
    let lane = t % LANES;
    let row = (wid.x + wid.y * nwg.x) * SLOTS + t / LANES;
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
    mx = lanes_f32(t, lane, mx, FOLD_MAX);
    var sum = 0.0;
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            sum += exp(ld0(base + k) - mx);
        }
    }
    sum = lanes_f32(t, lane, sum, FOLD_SUM);
    if (valid) {
        for (var k = lane; k < p.n; k += LANES) {
            st(base + k, exp(ld0(base + k) - mx) / sum);
        }
    }
}
