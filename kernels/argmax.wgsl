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
// preferring the smaller index on ties; then the lanes' (value, index) pairs are combined by
// a tree in workgroup memory with the same rule, so the result is the first best overall.

const LANES: u32 = $LANES;
const SLOTS: u32 = $SLOTS;
const LANE_STRIDE: u32 = $LANE_STRIDE;
const SLOT_STRIDE: u32 = $SLOT_STRIDE;

var<workgroup> best_v: array<$T, 256>;
var<workgroup> best_k: array<u32, 256>;

// NaN by its bits: compilers may fold `x != x` away.
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn greater(a: $T, b: $T) -> bool {
    return $GREATER;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let slot = (l / SLOT_STRIDE) % SLOTS;
    let lane = (l / LANE_STRIDE) % LANES;
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
    best_v[l] = v;
    best_k[l] = best;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            let o = l + s * LANE_STRIDE;
            let ov = best_v[o];
            let ok = best_k[o];
            if (greater(ov, best_v[l]) || (!greater(best_v[l], ov) && ok < best_k[l])) {
                best_v[l] = ov;
                best_k[l] = ok;
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u && m < p.outputs * p.splits) {
        if (p.splits == 1u) {
            stu(m, best_k[l]);
        } else {
            stw(2u * m, $BITS(best_v[l]));
            stw(2u * m + 1u, best_k[l]);
        }
    }
}
