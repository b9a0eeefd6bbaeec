//! Comparisons of decoded audio with its references, shared by the native decoder's tests and
//! the browser's streaming decoder's (both read the fixtures of tests/audio/make_audio.sh).

/// The 16-bit samples of a canonical 44-byte-header mono WAV file's bytes (`int16 / 32768`),
/// read without any decoder.
pub fn wav_s16_samples(bytes: &[u8]) -> Vec<f32> {
    assert_eq!(&bytes[36..40], b"data", "not a canonical 44-byte WAV header");
    bytes[44..].chunks_exact(2).map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0).collect()
}

/// A raw little-endian f32 reference signal's bytes as samples.
pub fn f32_samples(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// The largest absolute difference of two signals of one length.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).abs()).fold(0.0, f64::max)
}

/// Normalised cross-correlation of `a[i + lag]` with `b[i]`.
pub fn correlation(a: &[f32], b: &[f32], lag: isize) -> f64 {
    let (mut ab, mut aa, mut bb) = (0.0, 0.0, 0.0);
    for (i, y) in b.iter().enumerate() {
        let Some(x) = i.checked_add_signed(lag).and_then(|j| a.get(j)) else { continue };
        let (x, y) = (f64::from(*x), f64::from(*y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    ab / (aa * bb).sqrt()
}

/// The sum of squares.
pub fn energy(x: &[f32]) -> f64 {
    x.iter().map(|s| f64::from(*s).powi(2)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shifted_signal_correlates_best_at_its_shift() {
        let a: Vec<f32> = (0..400).map(|i| ((i * i) % 17) as f32 - 8.0).collect();
        let b = a[3..].to_vec();
        assert!((correlation(&a, &b, 3) - 1.0).abs() < 1e-12);
        assert!(correlation(&a, &b, 0) < 0.5);
        assert_eq!(energy(&[3.0, -4.0]), 25.0);
        assert_eq!(max_abs_diff(&[1.0, 2.0], &[1.5, 1.0]), 1.0);
    }

    #[test]
    fn wav_and_f32_bytes_read_as_samples() {
        let mut wav = vec![0u8; 36];
        wav.extend(b"data\x04\0\0\0");
        wav.extend([0x00, 0x40, 0x00, 0x80]);
        assert_eq!(wav_s16_samples(&wav), [0.5, -1.0]);
        assert_eq!(f32_samples(&0.25f32.to_le_bytes()), [0.25]);
    }
}
