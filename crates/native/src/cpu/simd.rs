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
                acc[l] = x[l].mul_add(y[l], acc[l]);
            }
        }
        for (l, (x, y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
            acc[l] = x.mul_add(*y, acc[l]);
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
    let mut acc = [0.0f32; LANES];
    let n = a.len().min(b.len());
    for i in 0..n {
        acc[i % LANES] = a[i].mul_add(b[i].to_f32(), acc[i % LANES]);
    }
    fold(acc)
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
        acc[i % LANES] = a[i].mul_add(b[i].to_f32(), acc[i % LANES]);
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
                    acc[l] = a[l].mul_add(b[l], acc[l]);
                }
            }
            for (l, (a, b)) in cx.remainder().iter().zip(cr.remainder()).enumerate() {
                acc[l] = a.mul_add(*b, acc[l]);
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
                    acc[l] = a[l].mul_add(f32::from(b[l]), acc[l]);
                }
            }
            for (l, (a, b)) in cx.remainder().iter().zip(cr.remainder()).enumerate() {
                acc[l] = a.mul_add(f32::from(*b), acc[l]);
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
                *o = w.mul_add(x, *o);
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
        half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, dst);
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
    let k = x.mul_add(std::f32::consts::LOG2_E, ROUND) - ROUND;
    let r = k.mul_add(-LN2_LO, k.mul_add(-LN2_HI, x));
    let mut p = 1.987_569_1e-4f32;
    p = p.mul_add(r, 1.398_199_9e-3);
    p = p.mul_add(r, 8.333_452e-3);
    p = p.mul_add(r, 4.166_579_6e-2);
    p = p.mul_add(r, 1.666_666_5e-1);
    p = p.mul_add(r, 0.5);
    let er = p.mul_add(r * r, r) + 1.0;
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
    let t = 1.0 / 0.327_591_1f32.mul_add(a, 1.0);
    let mut p = 1.061_405_4f32;
    p = p.mul_add(t, -1.453_152_1);
    p = p.mul_add(t, 1.421_413_7);
    p = p.mul_add(t, -0.284_496_72);
    p = p.mul_add(t, 0.254_829_6);
    let far = (1.0 - p * t * exp(-a * a)).copysign(x);
    // 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320)
    let x2 = x * x;
    let mut s = -1.0f32 / 1320.0;
    s = s.mul_add(x2, 1.0 / 216.0);
    s = s.mul_add(x2, -1.0 / 42.0);
    s = s.mul_add(x2, 1.0 / 10.0);
    s = s.mul_add(x2, -1.0 / 3.0);
    s = s.mul_add(x2, 1.0);
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
                let e = exp(c[l].mul_add(scale, -max));
                c[l] = e;
                acc[l] += e;
            }
        }
        let mut tail = 0.0;
        for v in chunks.into_remainder() {
            *v = exp(v.mul_add(scale, -max));
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
            *v = ((*v - mean) * inv).mul_add(*g, *b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
