// Matrix multiply for CPU adapters (lavapipe, SwiftShader), same parameters and epilogue as
// matmul.wgsl: out[z] = epilogue(a[z] x b[z]) with a [M, K], b [K, N] (or [N, K] when
// `$TRANSPOSE_B` is true) and out [M, N]; z, the batch index, is the workgroup's z id.
//
// CPU drivers run a workgroup's invocations as SIMD loops on one core and load from storage
// lane by lane, so the kernel uses no workgroup memory and no barriers, and reuses every loaded
// value as often as it can: each invocation computes a 4 x 4 register block of the output
// straight from storage, four k at a time (`ld4_*`, four consecutive elements). Rows and
// columns past the edge are clamped to the last one (loads stay in bounds without tests) and
// their results are not stored. Adjacent invocations take adjacent column blocks, so a
// workgroup of 64 reads a few rows of `a` many times from cache.

const TRANSPOSE_B: bool = $TRANSPOSE_B;

fn epilogue(v: f32, at: u32, col: u32) -> f32 {
    return $EPILOGUE;
}

fn store_row(base: u32, row: u32, col: u32, acc: vec4<f32>) {
    if (row >= p.m) {
        return;
    }
    for (var j = 0u; j < 4u; j++) {
        if (col + j < p.n) {
            let at = base + row * p.n + col + j;
            st(at, epilogue(acc[j], at, col + j));
        }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let blocks_n = (p.n + 3u) / 4u;
    let blocks_m = (p.m + 3u) / 4u;
    let block = (wid.x + wid.y * nwg.x) * 64u + t;
    if (block >= blocks_n * blocks_m) {
        return;
    }
    let row0 = (block / blocks_n) * 4u;
    let col0 = (block % blocks_n) * 4u;
    let a_base = broadcast_offset(wid.z, p.batch_rank, p.batch0, p.batch1, p.a0, p.a1);
    let b_base = broadcast_offset(wid.z, p.batch_rank, p.batch0, p.batch1, p.b0, p.b1);
    // Row starts of a (and of b's columns when transposed), clamped to the matrix.
    let a0 = a_base + min(row0, p.m - 1u) * p.k;
    let a1 = a_base + min(row0 + 1u, p.m - 1u) * p.k;
    let a2 = a_base + min(row0 + 2u, p.m - 1u) * p.k;
    let a3 = a_base + min(row0 + 3u, p.m - 1u) * p.k;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    let k4 = p.k / 4u * 4u;
    if (TRANSPOSE_B) {
        let b0 = b_base + min(col0, p.n - 1u) * p.k;
        let b1 = b_base + min(col0 + 1u, p.n - 1u) * p.k;
        let b2 = b_base + min(col0 + 2u, p.n - 1u) * p.k;
        let b3 = b_base + min(col0 + 3u, p.n - 1u) * p.k;
        for (var k = 0u; k < k4; k += 4u) {
            let x0 = ld4_0(a0 + k);
            let x1 = ld4_0(a1 + k);
            let x2 = ld4_0(a2 + k);
            let x3 = ld4_0(a3 + k);
            let w0 = ld4_1(b0 + k);
            let w1 = ld4_1(b1 + k);
            let w2 = ld4_1(b2 + k);
            let w3 = ld4_1(b3 + k);
            acc0 += vec4<f32>(dot(x0, w0), dot(x0, w1), dot(x0, w2), dot(x0, w3));
            acc1 += vec4<f32>(dot(x1, w0), dot(x1, w1), dot(x1, w2), dot(x1, w3));
            acc2 += vec4<f32>(dot(x2, w0), dot(x2, w1), dot(x2, w2), dot(x2, w3));
            acc3 += vec4<f32>(dot(x3, w0), dot(x3, w1), dot(x3, w2), dot(x3, w3));
        }
        for (var k = k4; k < p.k; k++) {
            let w = vec4<f32>(ld1(b0 + k), ld1(b1 + k), ld1(b2 + k), ld1(b3 + k));
            acc0 += ld0(a0 + k) * w;
            acc1 += ld0(a1 + k) * w;
            acc2 += ld0(a2 + k) * w;
            acc3 += ld0(a3 + k) * w;
        }
    } else {
        // Four consecutive columns of one row of b: one `ld4_1` when all are inside.
        let inside = col0 + 3u < p.n;
        let c1 = min(col0 + 1u, p.n - 1u);
        let c2 = min(col0 + 2u, p.n - 1u);
        let c3 = min(col0 + 3u, p.n - 1u);
        for (var k = 0u; k < p.k; k++) {
            let r = b_base + k * p.n;
            var w: vec4<f32>;
            if (inside) {
                w = ld4_1(r + col0);
            } else {
                w = vec4<f32>(ld1(r + col0), ld1(r + c1), ld1(r + c2), ld1(r + c3));
            }
            acc0 += ld0(a0 + k) * w;
            acc1 += ld0(a1 + k) * w;
            acc2 += ld0(a2 + k) * w;
            acc3 += ld0(a3 + k) * w;
        }
    }
    let out_base = wid.z * p.m * p.n;
    store_row(out_base, row0, col0, acc0);
    store_row(out_base, row0 + 1u, col0, acc1);
    store_row(out_base, row0 + 2u, col0, acc2);
    store_row(out_base, row0 + 3u, col0, acc3);
}
