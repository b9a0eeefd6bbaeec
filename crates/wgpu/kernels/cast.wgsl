// Dtype conversion with Rust `as` semantics (the CPU reference): the STORE placeholder is one of
//   st(i, ld0(i))           float or integer to f32 (ld0 converts any dtype to f32)
//   st_f16(i, ld0(i))       float or integer to f16 (rounds to nearest even)
//   sti(i, f32_to_i32(..))  float to i32 (truncates toward zero, saturates, NaN -> 0)
//   stu(i, f32_to_u32(..))  float to u32 (likewise)
//   stw(i, ldw0(i))         integer to integer (the same bits)

// WGSL leaves out-of-range float-to-integer conversions to the implementation; these make
// them saturate explicitly. 2^31 and 2^32 are exact in f32; below them `i32`/`u32` truncate.
fn f32_to_i32(x: f32) -> i32 {
    if (is_nan(x)) {
        return 0;
    }
    if (x >= 2147483648.0) {
        return 2147483647;
    }
    if (x <= -2147483648.0) {
        return bitcast<i32>(0x80000000u);
    }
    return i32(x);
}

fn f32_to_u32(x: f32) -> u32 {
    if (is_nan(x) || x <= 0.0) {
        return 0u;
    }
    if (x >= 4294967296.0) {
        return 0xffffffffu;
    }
    return u32(x);
}

// `st` rounds to f16 through pack2x16float, whose result WGSL leaves indeterminate for NaN and
// for values beyond f16's range: those are written here. Magnitudes from 65520 (halfway
// between the largest f16, 65504, and the next step, 65536) round to infinity.
fn st_f16(i: u32, x: f32) {
    let bits = bitcast<u32>(x);
    if (is_nan(x)) {
        stw(i, bits | 0x00400000u);
    } else if (abs(x) >= 65520.0) {
        stw(i, (bits & 0x80000000u) | 0x7f800000u);
    } else {
        st(i, x);
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = linear_index(wid, nwg, lid);
    if (i >= p.n) {
        return;
    }
    $STORE;
}
