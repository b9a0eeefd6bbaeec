// Helpers every kernel module gets (the executor prepends this file).

// Entry `k` of eight values packed as two vec4s.
fn pick8(lo: vec4<u32>, hi: vec4<u32>, k: u32) -> u32 {
    if (k < 4u) {
        return lo[k];
    }
    return hi[k - 4u];
}

// Offset of output element `i` in an input read with `strides` (0 on broadcast axes), for an
// output of `rank` dimensions `dims` (row-major).
fn broadcast_offset(i: u32, rank: u32, dims_lo: vec4<u32>, dims_hi: vec4<u32>, st_lo: vec4<u32>, st_hi: vec4<u32>) -> u32 {
    var rest = i;
    var offset = 0u;
    for (var k = i32(rank) - 1; k >= 0; k--) {
        let d = pick8(dims_lo, dims_hi, u32(k));
        offset += (rest % d) * pick8(st_lo, st_hi, u32(k));
        rest /= d;
    }
    return offset;
}

// erf with Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7).
fn erf_f32(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let y = 1.0 - poly * exp(-x * x);
    return select(-y, y, x >= 0.0);
}

// GELU in its erf form, as Whisper uses.
fn gelu_f32(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_f32(x * 0.70710678118654752));
}

fn sigmoid_f32(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

// tanh that stays finite where exp would overflow (some drivers compute tanh through exp).
fn tanh_f32(x: f32) -> f32 {
    return tanh(clamp(x, -15.0, 15.0));
}

// NaN by its bits: compilers may fold `x != x` away.
fn is_nan(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// Order-preserving u32 keys of values (argmax, top_k): values compare as their keys do, and
// `unkey_*` gives a key's value bits back. f32 keys: negative values' bits reversed, positive
// ones above them; every NaN the largest key, -0 as +0.
fn key_f32(x: f32) -> u32 {
    if (is_nan(x)) {
        return 0xffffffffu;
    }
    let b = select(bitcast<u32>(x), 0u, x == 0.0);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn unkey_f32(key: u32) -> u32 {
    if (key == 0xffffffffu) {
        return 0x7fc00000u;
    }
    return select(~key, key & 0x7fffffffu, (key & 0x80000000u) != 0u);
}

// i32 keys: the sign bit flipped.
fn key_i32(x: i32) -> u32 {
    return bitcast<u32>(x) ^ 0x80000000u;
}

fn unkey_i32(key: u32) -> u32 {
    return key ^ 0x80000000u;
}

// The larger of a and b, NaN if either is (WGSL's max leaves NaN unspecified).
fn max_nan(a: f32, b: f32) -> f32 {
    return select(select(max(a, b), b, is_nan(b)), a, is_nan(a));
}

// How the lane folds (`kernels/lanes.wgsl`) combine two 32-bit values: f32 sums, maxima (NaN
// unspecified, or NaN winning) and u32 maxima and minima.
const FOLD_SUM: u32 = 0u;
const FOLD_MAX: u32 = 1u;
const FOLD_MAX_NAN: u32 = 2u;
const FOLD_UMAX: u32 = 3u;
const FOLD_UMIN: u32 = 4u;

fn fold(a: u32, b: u32, op: u32) -> u32 {
    let x = bitcast<f32>(a);
    let y = bitcast<f32>(b);
    switch op {
        case 0u: {
            return bitcast<u32>(x + y);
        }
        case 1u: {
            return bitcast<u32>(max(x, y));
        }
        case 2u: {
            return bitcast<u32>(max_nan(x, y));
        }
        case 3u: {
            return max(a, b);
        }
        default: {
            return min(a, b);
        }
    }
}
