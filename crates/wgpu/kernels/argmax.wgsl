// Argmax over one axis of x viewed as [outer, n, inner]: for result m = o * inner + i, the
// first k whose value no other value of the run is greater than, as u32. Values are compared
// as `$T` (read with `$LOAD`); `$GREATER` says whether `a` beats `b` (for floats NaN beats
// every number, as in the reference). With `p.splits` > 1 (a few long runs: the vocabulary of
// a decoder step) each run is cut into splits of `p.chunk` values, and for split s of run m
// the kernel writes the split's best value's bits and its k to words 2 (m * splits + s) and
// 2 (m * splits + s) + 1 of the scratch, which argmax_combine.wgsl merges.
//
// The thread layout is the reduce kernel's: SLOTS results per workgroup of 256 threads,
// LANES threads per result, LANE_STRIDE and SLOT_STRIDE apart in thread index. Each lane
// keeps the first best of its values k = lane, lane + LANES, ... in two candidates taken in
// turn (so two loads are in flight, as the reduce kernel does with four sums), merged
// preferring the smaller index on ties. The lanes are then combined with two folds of
// `kernels/lanes*.wgsl` on 32-bit keys: `$KEY` maps a value to a u32 whose order is the
// values' (NaN above everything, -0 equal to +0), so the run's best key is a u32 maximum,
// and its first index the minimum of the indices of the lanes holding that key. `$UNKEY`
// maps the best key back to the value's bits for the scratch.

const LANES: u32 = $LANES;
const SLOTS: u32 = $SLOTS;
const LANE_STRIDE: u32 = $LANE_STRIDE;
const SLOT_STRIDE: u32 = $SLOT_STRIDE;

fn greater(a: $T, b: $T) -> bool {
    return $GREATER;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, th: Thread) {
    let t = thread_index(th);
    let slot = (t / SLOT_STRIDE) % SLOTS;
    let lane = (t / LANE_STRIDE) % LANES;
    let m = (wid.x + wid.y * nwg.x) * SLOTS + slot;
    var v: $T;
    var best = 0u;
    if (m < p.outputs * p.splits) {
        let run = m / p.splits;
        let k0 = (m % p.splits) * p.chunk;
        let k1 = min(p.n, k0 + p.chunk);
        let base = (run / p.inner) * p.n * p.inner + run % p.inner;
        // Every lane starts from the split's first value (k0), a genuine candidate, so lanes
        // without values of their own cannot win with a made-up one.
        v = $LOAD(base + k0 * p.inner);
        best = k0;
        var v1 = v;
        var best1 = k0;
        var k = k0 + lane;
        for (; k + LANES < k1; k += 2u * LANES) {
            let x = $LOAD(base + k * p.inner);
            let x1 = $LOAD(base + (k + LANES) * p.inner);
            if (greater(x, v)) {
                v = x;
                best = k;
            }
            if (greater(x1, v1)) {
                v1 = x1;
                best1 = k + LANES;
            }
        }
        if (k < k1) {
            let x = $LOAD(base + k * p.inner);
            if (greater(x, v)) {
                v = x;
                best = k;
            }
        }
        if (greater(v1, v) || (!greater(v, v1) && best1 < best)) {
            v = v1;
            best = best1;
        }
    }
    let key = $KEY(v);
    let top = lanes(t, lane, key, FOLD_UMAX);
    let first = lanes(t, lane, select(0xffffffffu, best, key == top), FOLD_UMIN);
    if (lane == 0u && m < p.outputs * p.splits) {
        if (p.splits == 1u) {
            stu(m, first);
        } else {
            stw(2u * m, $UNKEY(top));
            stw(2u * m + 1u, first);
        }
    }
}
