// Lane folds of the axis kernels on subgroup operations (`Features::SUBGROUP`), chosen where
// the device has them and a slot's lanes are neighbours (LANE_STRIDE 1): the interface of
// `kernels/lanes.wgsl`.
//
// Threads are numbered by subgroup (`subgroup_id * subgroup_size + subgroup_invocation_id`),
// so a subgroup's invocations are consecutive threads whatever order the driver packs them in.
// Subgroups are at least SUBGROUP_MIN lanes wide (a power of two; the adapter's minimum), so
// each group of LANE_WIDTH = min(LANES, SUBGROUP_MIN) consecutive threads lies in one
// subgroup: shuffles fold it without workgroup memory. A slot wider than that (LANES /
// LANE_WIDTH groups) combines its groups' results through workgroup memory with one barrier;
// two halves of `lanes_part` are used in turn, so the next fold's writes cannot meet this
// one's reads (a barrier lies between them).

struct Thread {
    @builtin(subgroup_id) id: u32,
    @builtin(subgroup_size) size: u32,
    @builtin(subgroup_invocation_id) lane: u32,
}

fn thread_index(th: Thread) -> u32 {
    return th.id * th.size + th.lane;
}

const SUBGROUP_MIN: u32 = $SUBGROUP_MIN;
const LANE_WIDTH: u32 = min(LANES, SUBGROUP_MIN);
const GROUPS: u32 = LANES / LANE_WIDTH;

var<workgroup> lanes_part: array<u32, 512>;
var<private> lanes_round: u32;

fn lanes(t: u32, lane: u32, bits: u32, op: u32) -> u32 {
    var v = bits;
    for (var s = 1u; s < LANE_WIDTH; s <<= 1u) {
        v = fold(v, subgroupShuffleXor(v, s), op);
    }
    if (GROUPS == 1u) {
        return v;
    }
    let half = (lanes_round & 1u) * 256u;
    lanes_round += 1u;
    if (t % LANE_WIDTH == 0u) {
        lanes_part[half + t / LANE_WIDTH] = v;
    }
    workgroupBarrier();
    let first = half + (t - lane) / LANE_WIDTH;
    var r = lanes_part[first];
    for (var g = 1u; g < GROUPS; g++) {
        r = fold(r, lanes_part[first + g], op);
    }
    return r;
}

fn lanes_f32(t: u32, lane: u32, v: f32, op: u32) -> f32 {
    return bitcast<f32>(lanes(t, lane, bitcast<u32>(v), op));
}
