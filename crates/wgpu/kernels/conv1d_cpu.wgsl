// Conv1d for CPU adapters, same parameters as conv1d.wgsl: out[n, co, t] = bias[co] + sum over
// input channels ci and taps j of w[co, ci, j] * x[n, ci, t * stride + j * dilation - padding],
// zero in the padding. `$BIAS` is the bias of channel `co` (`ld2(co)`, or `0.0` without one).
//
// CPU drivers run a workgroup's invocations as SIMD lanes of one core and load storage lane by
// lane, so there is no workgroup memory and no barrier: each invocation computes 8 output
// channels x 8 positions of one batch item (workgroup id z) in registers, straight from
// storage, so each loaded weight serves 8 positions and each loaded input 8 channels.
// Channels past C_out repeat the last one and are not stored; input positions in the padding
// read 0 (tested only for the tiles that touch an edge).

fn store8(n: u32, co: u32, t0: u32, lo: vec4<f32>, hi: vec4<f32>) {
    if (co >= p.c_out) {
        return;
    }
    let bias = $BIAS;
    let row = (n * p.c_out + co) * p.out_len;
    for (var e = 0u; e < 4u; e++) {
        if (t0 + e < p.out_len) {
            st(row + t0 + e, lo[e] + bias);
        }
        if (t0 + 4u + e < p.out_len) {
            st(row + t0 + 4u + e, hi[e] + bias);
        }
    }
}

// x[n, ci, pos] for a position that may fall in the padding.
fn x_at(row: u32, pos: i32) -> f32 {
    if (pos >= 0 && u32(pos) < p.len) {
        return ld0(row + u32(pos));
    }
    return 0.0;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let tiles_t = (p.out_len + 7u) / 8u;
    let tile = (wid.x + wid.y * nwg.x) * 64u + t;
    if (tile >= tiles_t * ((p.c_out + 7u) / 8u)) {
        return;
    }
    let n = wid.z;
    let t0 = (tile % tiles_t) * 8u;
    let co0 = (tile / tiles_t) * 8u;
    // Weight rows of the 8 channels, clamped to the last channel.
    var wr: array<u32, 8>;
    for (var c = 0u; c < 8u; c++) {
        wr[c] = min(co0 + c, p.c_out - 1u) * p.red;
    }
    var lo: array<vec4<f32>, 8>;
    var hi: array<vec4<f32>, 8>;
    for (var ci = 0u; ci < p.c_in; ci++) {
        let row = (n * p.c_in + ci) * p.len;
        for (var j = 0u; j < p.k; j++) {
            let first = i32(t0 * p.stride + j * p.dilation) - i32(p.padding);
            let last = first + i32(7u * p.stride);
            var x0: vec4<f32>;
            var x1: vec4<f32>;
            if (first >= 0 && last < i32(p.len)) {
                let f = row + u32(first);
                if (p.stride == 1u) {
                    x0 = ld4_0(f);
                    x1 = ld4_0(f + 4u);
                } else {
                    let s = p.stride;
                    x0 = vec4<f32>(ld0(f), ld0(f + s), ld0(f + 2u * s), ld0(f + 3u * s));
                    x1 = vec4<f32>(ld0(f + 4u * s), ld0(f + 5u * s), ld0(f + 6u * s), ld0(f + 7u * s));
                }
            } else {
                let s = i32(p.stride);
                x0 = vec4<f32>(x_at(row, first), x_at(row, first + s), x_at(row, first + 2 * s), x_at(row, first + 3 * s));
                x1 = vec4<f32>(x_at(row, first + 4 * s), x_at(row, first + 5 * s), x_at(row, first + 6 * s), x_at(row, first + 7 * s));
            }
            let r = ci * p.k + j;
            for (var c = 0u; c < 8u; c++) {
                let w = ld1(wr[c] + r);
                lo[c] += w * x0;
                hi[c] += w * x1;
            }
        }
    }
    for (var c = 0u; c < 8u; c++) {
        store8(n, co0 + c, t0, lo[c], hi[c]);
    }
}
