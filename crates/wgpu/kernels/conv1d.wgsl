// Conv1d as an implicit matrix product: out[n, co, t] = bias[co] + sum over r of
// w[co, r] * col[r, t], where r = ci * K + j runs over input channels and taps (w [C_out, C_in, K]
// is already the matrix [C_out, R]) and col[r, t] = x[n, ci, t * stride + j * dilation - padding],
// zero in the padding.
//
// A workgroup computes a tile of 64 output channels x 64 positions of one batch item
// (workgroup id x: positions, y: channels, z: batch). Its 256 threads (16 x 16) each hold 4 x 4
// accumulators: channels ty + 16a and positions tx + 16b, so neighbouring threads read
// neighbouring workgroup-memory words and write neighbouring output words. The reduction runs
// in chunks of 16 r: every thread first stages 4 weights and 4 gathered inputs in workgroup
// memory, then does its 16 accumulators x 16 r multiply-adds from there. Accumulation is f32.
// `$BIAS` is the bias of channel `co` (`ld2(co)`, or `0.0` without one).
//
// Whisper's stem on an H100 (Vulkan): conv1 (80 -> 384, L 3000) about 0.1 ms and conv2
// (384 -> 384, stride 2) about 0.3 ms per run, run overhead included; chunks of 32 were slower
// for conv1 and no better overall.

const TILE: u32 = 64u;
const CHUNK: u32 = 16u;
// Weight tile rows are CHUNK + 1 words so the threads storing one channel's chunk hit
// distinct banks.
const WROW: u32 = CHUNK + 1u;

var<workgroup> ws: array<f32, TILE * WROW>; // [TILE channels][WROW]
var<workgroup> xs: array<f32, CHUNK * TILE>; // [CHUNK][TILE positions]

fn store4(n: u32, co: u32, t: u32, acc: vec4<f32>) {
    if (co >= p.c_out) {
        return;
    }
    let bias = $BIAS;
    let row = (n * p.c_out + co) * p.out_len;
    for (var b = 0u; b < 4u; b++) {
        let tb = t + 16u * b;
        if (tb < p.out_len) {
            st(row + tb, acc[b] + bias);
        }
    }
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let t0 = wid.x * TILE;
    let co0 = wid.y * TILE;
    let n = wid.z;
    let x_base = n * p.c_in * p.len;
    // What this thread stages: weight column li % CHUNK of every (256 / CHUNK)th channel from
    // li / CHUNK, and input position li % TILE of every (256 / TILE)th row from li / TILE.
    let w_r = li % CHUNK;
    let w_c = li / CHUNK;
    let x_t = t0 + li % TILE;
    let x_r = li / TILE;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var r0 = 0u; r0 < p.red; r0 += CHUNK) {
        let wr = r0 + w_r;
        for (var c = w_c; c < TILE; c += 256u / CHUNK) {
            let co = co0 + c;
            var v = 0.0;
            if (wr < p.red && co < p.c_out) {
                v = ld1(co * p.red + wr);
            }
            ws[c * WROW + w_r] = v;
        }
        for (var rr = x_r; rr < CHUNK; rr += 256u / TILE) {
            let r = r0 + rr;
            var v = 0.0;
            if (r < p.red && x_t < p.out_len) {
                let ci = r / p.k;
                let pos = i32(x_t * p.stride + (r - ci * p.k) * p.dilation) - i32(p.padding);
                if (pos >= 0 && u32(pos) < p.len) {
                    v = ld0(x_base + ci * p.len + u32(pos));
                }
            }
            xs[rr * TILE + li % TILE] = v;
        }
        workgroupBarrier();
        for (var rr = 0u; rr < CHUNK; rr++) {
            let xo = rr * TILE + lid.x;
            let xv = vec4<f32>(xs[xo], xs[xo + 16u], xs[xo + 32u], xs[xo + 48u]);
            let wo = lid.y * WROW + rr;
            acc0 += ws[wo] * xv;
            acc1 += ws[wo + 16u * WROW] * xv;
            acc2 += ws[wo + 32u * WROW] * xv;
            acc3 += ws[wo + 48u * WROW] * xv;
        }
        workgroupBarrier();
    }
    let t = t0 + lid.x;
    let co = co0 + lid.y;
    store4(n, co, t, acc0);
    store4(n, co + 16u, t, acc1);
    store4(n, co + 32u, t, acc2);
    store4(n, co + 48u, t, acc3);
}
