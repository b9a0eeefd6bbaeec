// Lane folds of the axis kernels (reduce, argmax, softmax, layer norm, gemv), by a tree in
// workgroup memory: the path every adapter has. `kernels/lanes_subgroup.wgsl` is the same
// interface on subgroup shuffles; the lowering places one of the two before the kernel.
//
// A kernel of 256 threads splits them into slots of LANES lanes, LANE_STRIDE apart in thread
// index (both constants of the kernel). `lanes(t, lane, bits, op)` folds the 32-bit `bits` of
// every lane of thread t's slot with `op` and returns the result to all of them; every thread
// of the workgroup calls it (it synchronises). `lanes_f32` does the same for f32 values.
//
// The entry point takes its thread as `th: Thread` and its index from `thread_index(th)`.

struct Thread {
    @builtin(local_invocation_index) l: u32,
}

fn thread_index(th: Thread) -> u32 {
    return th.l;
}

var<workgroup> lanes_part: array<u32, 256>;

fn lanes(t: u32, lane: u32, bits: u32, op: u32) -> u32 {
    lanes_part[t] = bits;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            lanes_part[t] = fold(lanes_part[t], lanes_part[t + s * LANE_STRIDE], op);
        }
        workgroupBarrier();
    }
    let r = lanes_part[t - lane * LANE_STRIDE];
    // Every lane has read the result before a later fold overwrites it.
    workgroupBarrier();
    return r;
}

fn lanes_f32(t: u32, lane: u32, v: f32, op: u32) -> f32 {
    return bitcast<f32>(lanes(t, lane, bitcast<u32>(v), op));
}
