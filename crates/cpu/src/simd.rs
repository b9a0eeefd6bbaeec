//! The inner loops of the fast CPU backend, compiled twice: once for the baseline target and
//! once with AVX2 + FMA (+ F16C), chosen at run time. Portable binaries stay portable, and on
//! the machines we measure (x86-64 with AVX2) the loops run 8 lanes wide.
//!
//! The bodies are plain Rust that LLVM vectorises; only the f16 dot product uses intrinsics
//! (F16C conversion). `exp` and `erf` are polynomial approximations (about 2 ulp and 5e-7
//! absolute) because calls to libm would not vectorise: the encoder takes 54 million
//! exponentials per window.

use half::f16;

/// Whether the AVX2 versions can run here (checked once; std caches the CPUID result).
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
}

/// Defines `pub fn $name` that runs `$body` compiled with AVX2 + FMA where the CPU has them.
macro_rules! multiversion {
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        pub fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn wide($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                if avx2() {
                    // SAFETY: the CPU has the features `wide` was compiled for.
                    return unsafe { wide($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}

/// `a * b + c`: fused where the hardware fuses (x86-64's FMA, in the AVX2 versions); in
/// WebAssembly, whose SIMD has no fused multiply-add, with two roundings (a fused one there
/// is a call to a software `fmaf`, which also keeps the loops from vectorising).
#[inline(always)]
fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(target_family = "wasm")]
    return a * b + c;
    #[cfg(not(target_family = "wasm"))]
    a.mul_add(b, c)
}

/// Accumulators a reduction keeps: independent sums let the loop vectorise and pipeline.
const LANES: usize = 16;

multiversion! {
    /// `sum(a[i] * b[i])`, in a fixed order (16 partial sums, then pairwise).
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut acc = [0.0f32; LANES];
        let mut ca = a.chunks_exact(LANES);
        let mut cb = b.chunks_exact(LANES);
        for (x, y) in (&mut ca).zip(&mut cb) {
            for l in 0..LANES {
                acc[l] = fma(x[l], y[l], acc[l]);
            }
        }
        for (l, (x, y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
            acc[l] = fma(*x, *y, acc[l]);
        }
        fold(acc)
    }
}

/// Adds the partial sums pairwise.
#[inline(always)]
fn fold(mut acc: [f32; LANES]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] += acc[l + width];
        }
        width /= 2;
    }
    acc[0]
}

/// `sum(a[i] * b[i])` with `b` in f16, widened on the fly (what a decoder step does with
/// every weight row: half the memory traffic of an f32 copy).
pub fn dot_f16(a: &[f32], b: &[f16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the CPU has AVX2, FMA and F16C.
        return unsafe { dot_f16_avx2(a, b) };
    }
    #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
    return wasm::dot_f16(a, b);
    #[cfg(not(all(target_family = "wasm", target_feature = "simd128")))]
    {
        let mut acc = [0.0f32; LANES];
        let n = a.len().min(b.len());
        for i in 0..n {
            acc[i % LANES] = fma(a[i], f16_to_f32(b[i]), acc[i % LANES]);
        }
        fold(acc)
    }
}

/// `out[j] = dot_f16(x, m[j*k..(j+1)*k])` for every row `j` of `m` (f16 weight rows).
pub fn dot_rows_f16(x: &[f32], m: &[f16], k: usize, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: the CPU has AVX2, FMA and F16C.
        unsafe { dot_rows_f16_avx2(x, m, k, out) };
        return;
    }
    for (o, row) in out.iter_mut().zip(m.chunks_exact(k)) {
        *o = dot_f16(x, row);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_rows_f16_avx2(x: &[f32], m: &[f16], k: usize, out: &mut [f32]) {
    for (o, row) in out.iter_mut().zip(m.chunks_exact(k)) {
        // SAFETY: the caller's features.
        *o = unsafe { dot_f16_avx2(x, row) };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn dot_f16_avx2(a: &[f32], b: &[f16]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let blocks = n / LANES;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut lo = _mm256_setzero_ps();
    let mut hi = _mm256_setzero_ps();
    for i in 0..blocks {
        let at = i * LANES;
        // SAFETY: at + 16 <= n elements of both slices.
        unsafe {
            let w = _mm256_loadu_si256(pb.add(at) as *const __m256i);
            let w0 = _mm256_cvtph_ps(_mm256_castsi256_si128(w));
            let w1 = _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(w));
            lo = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(at)), w0, lo);
            hi = _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(at + 8)), w1, hi);
        }
    }
    let mut acc = [0.0f32; LANES];
    // SAFETY: acc holds 16 floats.
    unsafe {
        _mm256_storeu_ps(acc.as_mut_ptr(), lo);
        _mm256_storeu_ps(acc.as_mut_ptr().add(8), hi);
    }
    for i in blocks * LANES..n {
        acc[i % LANES] = fma(a[i], f16_to_f32(b[i]), acc[i % LANES]);
    }
    fold(acc)
}

multiversion! {
    /// `out[j] = dot(x, m[j*k..(j+1)*k])` for every row `j` of `m` (the loop inside one
    /// call, so a decoder step's many short dot products pay no per-call dispatch).
    fn dot_rows(x: &[f32], m: &[f32], k: usize, out: &mut [f32]) {
        for (o, row) in out.iter_mut().zip(m.chunks_exact(k)) {
            let mut acc = [0.0f32; LANES];
            let mut cx = x.chunks_exact(LANES);
            let mut cr = row.chunks_exact(LANES);
            for (a, b) in (&mut cx).zip(&mut cr) {
                for l in 0..LANES {
                    acc[l] = fma(a[l], b[l], acc[l]);
                }
            }
            for (l, (a, b)) in cx.remainder().iter().zip(cr.remainder()).enumerate() {
                acc[l] = fma(*a, *b, acc[l]);
            }
            *o = fold(acc);
        }
    }
}

multiversion! {
    /// `out[j] = dot(x, m[j*k..(j+1)*k]) * scales[j]` for every row `j` of the int8 `m`
    /// (a q8 weight: values widened exactly, summed in the order of [`dot_rows`]).
    fn dot_rows_q8(x: &[f32], m: &[i8], scales: &[f32], k: usize, out: &mut [f32]) {
        for ((o, row), &s) in out.iter_mut().zip(m.chunks_exact(k)).zip(scales) {
            let mut acc = [0.0f32; LANES];
            let mut cx = x.chunks_exact(LANES);
            let mut cr = row.chunks_exact(LANES);
            for (a, b) in (&mut cx).zip(&mut cr) {
                for l in 0..LANES {
                    acc[l] = fma(a[l], f32::from(b[l]), acc[l]);
                }
            }
            for (l, (a, b)) in cx.remainder().iter().zip(cr.remainder()).enumerate() {
                acc[l] = fma(*a, f32::from(*b), acc[l]);
            }
            *o = fold(acc) * s;
        }
    }
}

multiversion! {
    /// `out[i] = q[i] * scale` (one row of a q8 weight).
    fn dequantize_row(q: &[i8], scale: f32, out: &mut [f32]) {
        for (o, &v) in out.iter_mut().zip(q) {
            *o = f32::from(v) * scale;
        }
    }
}

multiversion! {
    /// `out = sum_j p[j] * v[j*d..(j+1)*d]` (attention's weighted sum of values).
    fn weighted_rows(p: &[f32], v: &[f32], d: usize, out: &mut [f32]) {
        out.fill(0.0);
        for (&w, row) in p.iter().zip(v.chunks_exact(d)) {
            for (o, &x) in out.iter_mut().zip(row) {
                *o = fma(w, x, *o);
            }
        }
    }
}

multiversion! {
    /// `out[i] = e^x[i]`.
    fn exp_into(x: &[f32], out: &mut [f32]) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = exp(v);
        }
    }
}

multiversion! {
    /// Widens f16 to f32.
    fn widen(src: &[f16], dst: &mut [f32]) {
        #[cfg(all(target_family = "wasm", target_feature = "simd128"))]
        wasm::widen(src, dst);
        #[cfg(all(target_family = "wasm", not(target_feature = "simd128")))]
        for (d, &h) in dst.iter_mut().zip(src) {
            *d = f16_to_f32(h);
        }
        #[cfg(not(target_family = "wasm"))]
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst);
    }
}

/// An f16 as f32, exactly, without branches (so loops over weights vectorise where no
/// conversion instruction exists: WebAssembly, x86-64 without F16C). The magnitude's bits
/// moved to an f32's places read as a number 2^112 too small, for normal and subnormal values
/// alike; infinities and NaNs (exponent all ones) get the f32 exponent all ones instead.
#[inline(always)]
pub fn f16_to_f32(h: f16) -> f32 {
    let h = u32::from(h.to_bits());
    let magnitude = (h & 0x7fff) << 13;
    // 2^112: f32 exponent bits 112 + 127.
    let finite = f32::from_bits(magnitude) * f32::from_bits(0x7780_0000);
    let value = if magnitude >= 0x0f80_0000 { f32::from_bits(magnitude | 0x7f80_0000) } else { finite };
    f32::from_bits(value.to_bits() | ((h & 0x8000) << 16))
}

/// WebAssembly SIMD128 versions of the loops LLVM does not vectorise by itself: the f16
/// weights widened four lanes at a time ([`f16_to_f32`]'s arithmetic), products summed in
/// the lanes and order of the portable loops, so both give the same numbers.
#[cfg(all(target_family = "wasm", target_feature = "simd128"))]
mod wasm {
    use std::arch::wasm32::*;

    use half::f16;

    use super::{LANES, f16_to_f32, fma, fold};

    /// Four f16s (zero-extended to u32 lanes) as f32s.
    #[inline(always)]
    fn widen4(h: v128) -> v128 {
        let magnitude = u32x4_shl(v128_and(h, u32x4_splat(0x7fff)), 13);
        let finite = f32x4_mul(magnitude, f32x4_splat(f32::from_bits(0x7780_0000)));
        let special = u32x4_ge(magnitude, u32x4_splat(0x0f80_0000));
        let value = v128_bitselect(v128_or(magnitude, u32x4_splat(0x7f80_0000)), finite, special);
        v128_or(value, u32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16))
    }

    /// Four f16s known to be finite (sign-extended to i32 lanes) as f32s: the sign and the
    /// magnitude's bits moved to an f32's places in one shift (the sign's copies above the
    /// magnitude masked off), read as a number 2^112 too small. Four operations where
    /// [`widen4`] takes nine.
    #[inline(always)]
    fn widen4_finite(h: v128) -> v128 {
        let bits = v128_and(i32x4_shl(h, 13), u32x4_splat(0x8fff_e000));
        f32x4_mul(bits, f32x4_splat(f32::from_bits(0x7780_0000)))
    }

    /// `sum(a[i] * b[i])`: 16 lanes over the whole chunks of 16, each 8 f16s (as loaded)
    /// widened by `widen` into their low and high four, then the tail into the same lanes, as
    /// the portable loop sums them.
    #[inline(always)]
    fn dot_lanes(a: &[f32], b: &[f16], mut widen: impl FnMut(v128) -> (v128, v128)) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc = [f32x4_splat(0.0); LANES / 4];
        for at in (0..n / LANES).map(|i| i * LANES) {
            for half in 0..2 {
                let at = at + 8 * half;
                // SAFETY: at + 8 <= n elements of both slices; unaligned loads are allowed.
                let (h, x0, x1) = unsafe {
                    (
                        v128_load(pb.add(at).cast::<v128>()),
                        v128_load(pa.add(at).cast::<v128>()),
                        v128_load(pa.add(at + 4).cast::<v128>()),
                    )
                };
                let (w0, w1) = widen(h);
                acc[2 * half] = f32x4_add(f32x4_mul(x0, w0), acc[2 * half]);
                acc[2 * half + 1] = f32x4_add(f32x4_mul(x1, w1), acc[2 * half + 1]);
            }
        }
        let mut lanes = [0.0f32; LANES];
        for (j, v) in acc.iter().enumerate() {
            // SAFETY: lanes holds 16 floats, j < 4.
            unsafe { v128_store(lanes.as_mut_ptr().add(4 * j).cast::<v128>(), *v) };
        }
        for i in n / LANES * LANES..n {
            lanes[i % LANES] = fma(a[i], f16_to_f32(b[i]), lanes[i % LANES]);
        }
        fold(lanes)
    }

    /// First with [`widen4_finite`], noting any f16 with its exponent all ones (an infinity
    /// or a NaN, which it misreads: weights never hold one, so decoder steps stop there);
    /// for a row that holds one, again with the exact [`widen4`].
    pub fn dot_f16(a: &[f32], b: &[f16]) -> f32 {
        let exponent = i16x8_splat(0x7c00);
        let mut special = i16x8_splat(0);
        let sum = dot_lanes(a, b, |h| {
            special = v128_or(special, i16x8_eq(v128_and(h, exponent), exponent));
            (widen4_finite(i32x4_extend_low_i16x8(h)), widen4_finite(i32x4_extend_high_i16x8(h)))
        });
        if !v128_any_true(special) {
            return sum;
        }
        dot_lanes(a, b, |h| (widen4(u32x4_extend_low_u16x8(h)), widen4(u32x4_extend_high_u16x8(h))))
    }

    pub fn widen(src: &[f16], dst: &mut [f32]) {
        let n = src.len().min(dst.len());
        let (ps, pd) = (src.as_ptr(), dst.as_mut_ptr());
        for at in (0..n / 8).map(|i| i * 8) {
            // SAFETY: at + 8 <= n elements of both slices.
            unsafe {
                let h = v128_load(ps.add(at).cast::<v128>());
                v128_store(pd.add(at).cast::<v128>(), widen4(u32x4_extend_low_u16x8(h)));
                v128_store(pd.add(at + 4).cast::<v128>(), widen4(u32x4_extend_high_u16x8(h)));
            }
        }
        for i in n / 8 * 8..n {
            dst[i] = f16_to_f32(src[i]);
        }
    }
}

/// `e^x` for finite `x`, within about 2 ulp; `x < -87.3` gives 0 (a masked score), `x > 88.7`
/// gives infinity. Cody-Waite reduction to `2^k * e^r` with `|r| <= ln2/2` and a degree-6
/// polynomial for `e^r`.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let small = x < -87.336_54;
    let x = x.clamp(-87.336_54, 88.722_83);
    // Round to nearest by adding and subtracting 1.5 * 2^23 (plain arithmetic, so the loop
    // vectorises; `f32::round` becomes a libm call).
    const ROUND: f32 = 12_582_912.0;
    let k = fma(x, std::f32::consts::LOG2_E, ROUND) - ROUND;
    let r = fma(k, -LN2_LO, fma(k, -LN2_HI, x));
    let mut p = 1.987_569_1e-4f32;
    p = fma(p, r, 1.398_199_9e-3);
    p = fma(p, r, 8.333_452e-3);
    p = fma(p, r, 4.166_579_6e-2);
    p = fma(p, r, 1.666_666_5e-1);
    p = fma(p, r, 0.5);
    let er = fma(p, r * r, r) + 1.0;
    // 2^k through the exponent bits; k is in [-126, 128] after the clamp, and k = 128 (x near
    // the top) is split so the scale stays representable.
    let ki = k as i32;
    let half = ki / 2;
    let s1 = f32::from_bits(((half + 127) as u32) << 23);
    let s2 = f32::from_bits(((ki - half + 127) as u32) << 23);
    if small { 0.0 } else { er * s1 * s2 }
}

/// `erf(x)` within 5e-7 absolute, and 1e-6 relative near zero: the Maclaurin series up to
/// `x^11` for `|x| < 0.5`, else Abramowitz & Stegun 7.1.26, `1 - poly(t) e^{-x^2}` with
/// `t = 1 / (1 + p|x|)`. Both are computed and one selected, so loops stay vectorised.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / fma(0.327_591_1f32, a, 1.0);
    let mut p = 1.061_405_4f32;
    p = fma(p, t, -1.453_152_1);
    p = fma(p, t, 1.421_413_7);
    p = fma(p, t, -0.284_496_72);
    p = fma(p, t, 0.254_829_6);
    let far = (1.0 - p * t * exp(-a * a)).copysign(x);
    // 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320)
    let x2 = x * x;
    let mut s = -1.0f32 / 1320.0;
    s = fma(s, x2, 1.0 / 216.0);
    s = fma(s, x2, -1.0 / 42.0);
    s = fma(s, x2, 1.0 / 10.0);
    s = fma(s, x2, -1.0 / 3.0);
    s = fma(s, x2, 1.0);
    let near = std::f32::consts::FRAC_2_SQRT_PI * x * s;
    if a < 0.5 { near } else { far }
}

/// GELU with erf, as Whisper defines it.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

multiversion! {
    /// `x[i] = gelu(x[i])`.
    fn gelu_in_place(x: &mut [f32]) {
        for v in x.iter_mut() {
            *v = gelu(*v);
        }
    }
}

multiversion! {
    /// `x = softmax(x * scale)` over the row, in f32 (max subtracted first). Loops run over
    /// whole 16-lane chunks with one partial result per lane, the shape LLVM vectorises.
    fn softmax_scaled(x: &mut [f32], scale: f32) {
        let mut lanes = [f32::NEG_INFINITY; LANES];
        let mut chunks = x.chunks_exact(LANES);
        for c in &mut chunks {
            for l in 0..LANES {
                lanes[l] = if c[l] * scale > lanes[l] { c[l] * scale } else { lanes[l] };
            }
        }
        let mut max = lanes.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        for &v in chunks.remainder() {
            max = max.max(v * scale);
        }
        let mut acc = [0.0f32; LANES];
        let mut chunks = x.chunks_exact_mut(LANES);
        for c in &mut chunks {
            for l in 0..LANES {
                let e = exp(fma(c[l], scale, -max));
                c[l] = e;
                acc[l] += e;
            }
        }
        let mut tail = 0.0;
        for v in chunks.into_remainder() {
            *v = exp(fma(*v, scale, -max));
            tail += *v;
        }
        let inv = 1.0 / (fold(acc) + tail);
        for v in x.iter_mut() {
            *v *= inv;
        }
    }
}

/// `sum(f(x[i]))` over 16-lane chunks (vectorises), then the tail.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            acc[l] += f(c[l]);
        }
    }
    fold(acc) + chunks.remainder().iter().map(|&v| f(v)).sum::<f32>()
}

multiversion! {
    /// Layer norm of one row in place: `(x - mean) / sqrt(var + eps) * gamma + beta`, the
    /// variance from the centred values (two passes, as the reference does).
    fn layer_norm_row(x: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
        let n = x.len() as f32;
        let mean = lane_sum(x, |v| v) / n;
        let var = lane_sum(x, |v| (v - mean) * (v - mean)) / n;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, g), b) in x.iter_mut().zip(gamma).zip(beta) {
            *v = fma((*v - mean) * inv, *g, *b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every one of the 65536 f16 values, against the `half` crate's conversion.
    #[test]
    fn f16_to_f32_is_exact_for_every_value() {
        for bits in 0..=u16::MAX {
            let h = f16::from_bits(bits);
            let (got, want) = (f16_to_f32(h), h.to_f32());
            if want.is_nan() {
                assert!(got.is_nan(), "{bits:#06x}: {got}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{bits:#06x}: {got} for {want}");
            }
        }
    }

    #[test]
    fn exp_is_within_two_ulp_of_std() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (got, want): (f64, f64) = (exp(x) as f64, (x as f64).exp());
            worst = worst.max(((got - want) / want).abs());
            x += 0.001_37;
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert_eq!(exp(-1e30), 0.0);
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn erf_and_gelu_match_libm() {
        let mut x = -6.0f32;
        while x < 6.0 {
            let want = (x as f64) * 0.5 * (1.0 + libm_erf(x as f64 / std::f64::consts::SQRT_2));
            let want_erf = libm_erf(x as f64);
            let err = (erf(x) as f64 - want_erf).abs();
            assert!(err < 5e-7 && err <= 1e-6 * want_erf.abs() + 1e-12, "erf({x}) = {} vs {want_erf}", erf(x));
            assert!((gelu(x) as f64 - want).abs() < 2e-6 * (1.0 + x.abs() as f64), "gelu({x})");
            x += 0.000_97;
        }
    }

    /// erf in f64 from its series / continued fraction, independent of the approximation.
    fn libm_erf(x: f64) -> f64 {
        // Maclaurin series converges fast for |x| < 3; beyond, erf is 1 to f64 precision
        // within the tolerance used.
        if x.abs() >= 4.0 {
            return x.signum();
        }
        let mut sum = 0.0f64;
        let mut term = x;
        let mut n = 0.0f64;
        while term.abs() > 1e-17 * sum.abs().max(1e-300) || n < 5.0 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -x * x / n;
            if n > 200.0 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn dots_and_norms_match_plain_loops() {
        let a: Vec<f32> = (0..1000).map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0).collect();
        let b: Vec<f32> = (0..1000).map(|i| ((i * 53 % 97) as f32 - 48.0) / 13.0).collect();
        let bh: Vec<f16> = b.iter().map(|&v| f16::from_f32(v)).collect();
        for n in [0, 1, 15, 16, 17, 384, 1000] {
            let want: f64 = (0..n).map(|i| a[i] as f64 * b[i] as f64).sum();
            assert!((dot(&a[..n], &b[..n]) as f64 - want).abs() < 1e-3, "dot {n}");
            let want_h: f64 = (0..n).map(|i| a[i] as f64 * bh[i].to_f64()).sum();
            assert!((dot_f16(&a[..n], &bh[..n]) as f64 - want_h).abs() < 1e-3, "dot_f16 {n}");
        }
        let mut row = a[..384].to_vec();
        let (g, beta) = (vec![2.0f32; 384], vec![0.5f32; 384]);
        layer_norm_row(&mut row, &g, &beta, 1e-5);
        let mean: f64 = a[..384].iter().map(|&v| v as f64).sum::<f64>() / 384.0;
        let var: f64 = a[..384].iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / 384.0;
        for (i, &v) in row.iter().enumerate() {
            let want = (a[i] as f64 - mean) / (var + 1e-5).sqrt() * 2.0 + 0.5;
            assert!((v as f64 - want).abs() < 1e-5, "norm {i}");
        }
        let mut s = vec![1.0f32, 2.0, 3.0, -1e30];
        softmax_scaled(&mut s, 0.5);
        let z: f64 = [0.5f64, 1.0, 1.5].iter().map(|v| v.exp()).sum();
        for (i, v) in [0.5f64, 1.0, 1.5].iter().enumerate() {
            assert!((s[i] as f64 - v.exp() / z).abs() < 1e-7);
        }
        assert_eq!(s[3], 0.0);
    }
}
