// Argmax over long runs, second pass: merges the splits argmax.wgsl wrote to the scratch (read
// as input $SCRATCH_INPUT): for run m, the pairs (value bits, k) of its `p.splits` splits at
// words 2 (m * splits + s). One thread per run takes the first best: a greater value, or an
// equal one at a smaller k (the splits' k grow with s, so this is the first best overall).
// Values are compared as `$T` (`$FROM_BITS` reads them back); `$GREATER` as in argmax.wgsl.

fn greater(a: $T, b: $T) -> bool {
    return $GREATER;
}

fn partial(w: u32) -> u32 {
    return ldw$SCRATCH_INPUT(w);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let m = linear_index(wid, nwg, lid);
    if (m >= p.outputs) {
        return;
    }
    let first = 2u * m * p.splits;
    var v: $T = $FROM_BITS(partial(first));
    var best = partial(first + 1u);
    for (var s = 1u; s < p.splits; s++) {
        let x: $T = $FROM_BITS(partial(first + 2u * s));
        let k = partial(first + 2u * s + 1u);
        if (greater(x, v) || (!greater(v, x) && k < best)) {
            v = x;
            best = k;
        }
    }
    stu(m, best);
}
