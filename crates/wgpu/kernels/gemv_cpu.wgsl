// Matrix-vector product for CPU adapters, the one-row case of matmul_cpu.wgsl (same parameters
// and epilogue): out[z] = epilogue(a[z] x b[z]) with a [1, K], b [K, N] (or [N, K] when
// `$TRANSPOSE_B` is true) and out [1, N]; z, the batch index, is the workgroup's z id.
//
// Each invocation computes 4 output columns over the whole of K, four k at a time (`ld4_*`),
// with no workgroup memory and no reduction tree: CPU drivers run invocations as SIMD lanes of
// one core, and load storage lane by lane, so every loaded value of `a` serves four columns.
// Columns past N are clamped to the last one (loads stay in bounds) and not stored.

const TRANSPOSE_B: bool = $TRANSPOSE_B;

fn epilogue(v: f32, at: u32, col: u32) -> f32 {
    return $EPILOGUE;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let col0 = ((wid.x + wid.y * nwg.x) * 64u + t) * 4u;
    if (col0 >= p.n) {
        return;
    }
    let a_base = broadcast_offset(wid.z, p.batch_rank, p.batch0, p.batch1, p.a0, p.a1);
    let b_base = broadcast_offset(wid.z, p.batch_rank, p.batch0, p.batch1, p.b0, p.b1);
    let c1 = min(col0 + 1u, p.n - 1u);
    let c2 = min(col0 + 2u, p.n - 1u);
    let c3 = min(col0 + 3u, p.n - 1u);
    var acc = vec4<f32>(0.0);
    let k4 = p.k / 4u * 4u;
    if (TRANSPOSE_B) {
        let b0 = b_base + col0 * p.k;
        let b1 = b_base + c1 * p.k;
        let b2 = b_base + c2 * p.k;
        let b3 = b_base + c3 * p.k;
        for (var k = 0u; k < k4; k += 4u) {
            let x = ld4_0(a_base + k);
            acc += vec4<f32>(dot(x, ld4_1(b0 + k)), dot(x, ld4_1(b1 + k)), dot(x, ld4_1(b2 + k)), dot(x, ld4_1(b3 + k)));
        }
        for (var k = k4; k < p.k; k++) {
            acc += ld0(a_base + k) * vec4<f32>(ld1(b0 + k), ld1(b1 + k), ld1(b2 + k), ld1(b3 + k));
        }
    } else {
        // Four consecutive columns of one row of b: one `ld4_1` when all are inside.
        let inside = col0 + 3u < p.n;
        for (var k = 0u; k < p.k; k++) {
            let r = b_base + k * p.n;
            var w: vec4<f32>;
            if (inside) {
                w = ld4_1(r + col0);
            } else {
                w = vec4<f32>(ld1(r + col0), ld1(r + c1), ld1(r + c2), ld1(r + c3));
            }
            acc += ld0(a_base + k) * w;
        }
    }
    let out_base = wid.z * p.n;
    for (var j = 0u; j < 4u; j++) {
        if (col0 + j < p.n) {
            let at = out_base + col0 + j;
            st(at, epilogue(acc[j], at, col0 + j));
        }
    }
}
