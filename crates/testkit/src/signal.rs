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

/// A FLAC file of `samples` samples of digital silence at `rate` Hz, mono, 16-bit: one
/// CONSTANT subframe per block of 65535 samples, about 12 bytes a block, so ten hours at
/// 16 kHz are 106 KB. The decompression bomb of an upload limit: its size says nothing of its
/// length. Written from the FLAC format's specification (RFC 9639); symphonia's decoder reads
/// it in crates/cli/tests/audio.rs.
pub fn silent_flac(rate: u32, samples: u64) -> Vec<u8> {
    const BLOCK: u64 = 65535;
    let mut out = b"fLaC".to_vec();
    // The last metadata block (bit 7), STREAMINFO (type 0), 34 bytes.
    out.extend_from_slice(&[0x80, 0, 0, 34]);
    out.extend_from_slice(&(BLOCK as u16).to_be_bytes()); // minimum block size
    out.extend_from_slice(&(BLOCK as u16).to_be_bytes()); // maximum block size
    out.extend_from_slice(&[0; 6]); // frame sizes: unknown
    // Sample rate (20 bits), channels - 1 (3 bits), bits per sample - 1 (5 bits), total
    // samples (36 bits).
    let packed = (u64::from(rate) << 44) | (15 << 36) | (samples & ((1 << 36) - 1));
    out.extend_from_slice(&packed.to_be_bytes());
    out.extend_from_slice(&[0; 16]); // MD5: not computed
    let mut left = samples;
    let mut frame_number = 0u32;
    while left > 0 {
        let block = left.min(BLOCK);
        // Sync code and fixed block size; block size as 16 bits at the header's end (0b0111),
        // rate from STREAMINFO (0b0000); mono (0b0000), 16 bits (0b100).
        let mut frame = vec![0xFF, 0xF8, 0x70, 0x08];
        frame.extend_from_slice(&utf8_number(frame_number));
        frame.extend_from_slice(&((block - 1) as u16).to_be_bytes());
        frame.push(crc8(&frame));
        // A CONSTANT subframe (type 0, no wasted bits) of the value 0.
        frame.extend_from_slice(&[0x00, 0x00, 0x00]);
        frame.extend_from_slice(&crc16(&frame).to_be_bytes());
        out.extend_from_slice(&frame);
        left -= block;
        frame_number += 1;
    }
    out
}

/// A frame number as FLAC codes it: UTF-8's scheme for code points.
fn utf8_number(n: u32) -> Vec<u8> {
    match n {
        0..0x80 => vec![n as u8],
        0x80..0x800 => vec![0xC0 | (n >> 6) as u8, 0x80 | (n & 0x3F) as u8],
        0x800..0x10000 => vec![0xE0 | (n >> 12) as u8, 0x80 | ((n >> 6) & 0x3F) as u8, 0x80 | (n & 0x3F) as u8],
        _ => vec![
            0xF0 | (n >> 18) as u8,
            0x80 | ((n >> 12) & 0x3F) as u8,
            0x80 | ((n >> 6) & 0x3F) as u8,
            0x80 | (n & 0x3F) as u8,
        ],
    }
}

/// FLAC's frame header check: CRC-8, polynomial x^8 + x^2 + x + 1, initial 0.
fn crc8(bytes: &[u8]) -> u8 {
    let mut crc = 0u8;
    for &byte in bytes {
        crc ^= byte;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 { (crc << 1) ^ 0x07 } else { crc << 1 };
        }
    }
    crc
}

/// FLAC's frame check: CRC-16, polynomial x^16 + x^15 + x^2 + 1, initial 0.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x8005 } else { crc << 1 };
        }
    }
    crc
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
