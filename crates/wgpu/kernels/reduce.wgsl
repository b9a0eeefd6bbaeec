// Sum, mean or max over one axis of x viewed as [outer, n, inner]; result m = o * inner + i.
// With `p.splits` > 1 (a few long runs: the vocabulary of a decoder step) each run is cut into
// splits of `p.chunk` values and result m * splits + s folds split s only; a second dispatch
// of this kernel folds those partial results (reading them with `$LOAD`, the scratch).
//
// Each workgroup of 256 threads computes SLOTS results; LANES threads (a power of two) share
// one result. A thread's slot and lane come from its index: LANE_STRIDE and SLOT_STRIDE are
// the index distances between neighbouring lanes and slots. With inner == 1 the lanes of a
// slot are neighbours (they read consecutive values of one row); otherwise the slots are
// (they read consecutive results' values at one k). Either way neighbouring threads load
// neighbouring words. Each lane folds the values k = lane, lane + LANES, ... in f32 into four
// partial results taken in turn (so four loads are in flight: folding one value at a time
// left a decoder step's reductions over 51864 logits waiting on every load, ~38 us each on an
// H200), combines those, then the lanes of a slot are combined by the lane folds placed
// before this kernel (`kernels/lanes*.wgsl`).
//
// `$FOLD` is the fold (`FOLD_SUM`, or `FOLD_MAX_NAN`: NaN wins), `$INIT` is a lane's starting
// value (it may read `first`, the index of the split's first value) and `$FINAL` turns the
// combined `v` into the result.

const LANES: u32 = $LANES;
const SLOTS: u32 = $SLOTS;
const LANE_STRIDE: u32 = $LANE_STRIDE;
const SLOT_STRIDE: u32 = $SLOT_STRIDE;

fn combine(a: f32, b: f32) -> f32 {
    return bitcast<f32>(fold(bitcast<u32>(a), bitcast<u32>(b), $FOLD));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, th: Thread) {
    let t = thread_index(th);
    let slot = (t / SLOT_STRIDE) % SLOTS;
    let lane = (t / LANE_STRIDE) % LANES;
    let m = (wid.x + wid.y * nwg.x) * SLOTS + slot;
    var acc = 0.0;
    if (m < p.outputs * p.splits) {
        let run = m / p.splits;
        let k0 = (m % p.splits) * p.chunk;
        let k1 = min(p.n, k0 + p.chunk);
        let base = (run / p.inner) * p.n * p.inner + run % p.inner;
        let first = base + k0 * p.inner;
        acc = $INIT;
        var acc1 = acc;
        var acc2 = acc;
        var acc3 = acc;
        var k = k0 + lane;
        for (; k + 3u * LANES < k1; k += 4u * LANES) {
            acc = combine(acc, $LOAD(base + k * p.inner));
            acc1 = combine(acc1, $LOAD(base + (k + LANES) * p.inner));
            acc2 = combine(acc2, $LOAD(base + (k + 2u * LANES) * p.inner));
            acc3 = combine(acc3, $LOAD(base + (k + 3u * LANES) * p.inner));
        }
        for (; k < k1; k += LANES) {
            acc = combine(acc, $LOAD(base + k * p.inner));
        }
        acc = combine(combine(acc, acc1), combine(acc2, acc3));
    }
    let v = lanes_f32(t, lane, acc, $FOLD);
    if (lane == 0u && m < p.outputs * p.splits) {
        st(m, $FINAL);
    }
}
