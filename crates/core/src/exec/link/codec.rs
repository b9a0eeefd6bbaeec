//! The one f16 codec of the executors: how a value's elements are stored in a block.
//!
//! A value is stored either as its dtype's own little-endian bytes, or, for f16 values where
//! [`Place::f16_words`](super::Place::f16_words) says so, widened to one f32 word per element
//! (GPU kernels then need 16-bit storage only for weights). Widening is exact and kernels round
//! what they store to f16 precision, so narrowing a word back is exact too.
//!
//! f16 values stored as their own bytes are also the packed pairs wgpu reads without
//! `shader-f16` (`unpack2x16float` of word `i / 2`, element `i` in the low half when even):
//! little-endian f16 bytes are exactly those words, so no third form is needed.

use std::borrow::Cow;

use half::f16;

use crate::error::{Error, Result};
use crate::ir::{DType, TensorType};
use crate::tensor::{Tensor, TensorData};

/// f16 values widened to f32 words (exact).
pub fn f16_to_words(values: &[f16]) -> Vec<f32> {
    values.iter().map(|v| v.to_f32()).collect()
}

/// f32 words narrowed to f16 values (round to nearest even; exact for words that hold f16
/// values, as every stored word does).
pub fn words_to_f16(words: &[f32]) -> Vec<f16> {
    words.iter().map(|&w| f16::from_f32(w)).collect()
}

/// Bytes a value of type `ty` takes when stored as `f16_words` says.
pub fn stored_size(ty: &TensorType, f16_words: bool) -> usize {
    if ty.dtype == DType::F16 && f16_words { ty.numel() * 4 } else { ty.byte_size() }
}

/// The bytes of `t` as stored: borrowed unless f16 values are widened to words.
pub fn stored_bytes(t: &Tensor, f16_words: bool) -> Cow<'_, [u8]> {
    match t.data() {
        TensorData::F16(v) if f16_words => Cow::Owned(bytemuck::cast_slice(&f16_to_words(v)).to_vec()),
        _ => Cow::Borrowed(t.as_bytes()),
    }
}

/// The value of type `ty` stored at the start of `bytes` (which may be longer, as padded
/// device buffers and staging memory are).
pub fn decode(bytes: &[u8], ty: &TensorType, f16_words: bool) -> Result<Tensor> {
    let need = stored_size(ty, f16_words);
    let bytes = bytes
        .get(..need)
        .ok_or_else(|| Error::Backend(format!("read {} bytes of a {ty} value, need {need}", bytes.len())))?;
    if ty.dtype == DType::F16 && f16_words {
        let words: Vec<f32> = bytemuck::pod_collect_to_vec(bytes);
        return Tensor::new(ty.shape.clone(), TensorData::F16(words_to_f16(&words)));
    }
    Tensor::from_bytes(ty, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16_tensor(bits: &[u16]) -> Tensor {
        Tensor::new([bits.len()], TensorData::F16(bits.iter().map(|&b| f16::from_bits(b)).collect())).unwrap()
    }

    #[test]
    fn known_f16_values_widen_to_their_f32_words() {
        // 1.0, -2.0, 65504 (largest f16), 2^-24 (smallest subnormal), -0.0, +inf.
        let t = f16_tensor(&[0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00]);
        let words: Vec<u32> = bytemuck::pod_collect_to_vec(&stored_bytes(&t, true));
        assert_eq!(words, [0x3F80_0000, 0xC000_0000, 0x477F_E000, 0x3380_0000, 0x8000_0000, 0x7F80_0000]);
        assert_eq!(decode(&stored_bytes(&t, true), &t.ty(), true).unwrap(), t);
    }

    #[test]
    fn f16_bytes_are_the_packed_pairs_wgpu_unpacks() {
        // Elements 0 and 1 share word 0, element 0 in the low half.
        let t = f16_tensor(&[0x3C00, 0xC000, 0x7BFF]);
        let stored = stored_bytes(&t, false);
        assert!(matches!(stored, Cow::Borrowed(_)), "f16 kept as f16 is not copied");
        assert_eq!(&stored[..], &[0x00, 0x3C, 0x00, 0xC0, 0xFF, 0x7B]);
        assert_eq!(u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]), 0xC000_3C00);
        assert_eq!(decode(&stored, &t.ty(), false).unwrap(), t);
    }

    #[test]
    fn every_f16_value_round_trips_through_a_word() {
        let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).filter(|v| !v.is_nan()).collect();
        let back = words_to_f16(&f16_to_words(&all));
        assert!(all.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    #[test]
    fn other_dtypes_are_their_own_bytes_and_short_buffers_are_errors() {
        let t = Tensor::i32([2], vec![-1, 7]).unwrap();
        assert_eq!(stored_bytes(&t, true).as_ref(), t.as_bytes());
        assert_eq!(stored_size(&t.ty(), true), 8);
        let padded = [t.as_bytes(), &[0xAA; 8]].concat();
        assert_eq!(decode(&padded, &t.ty(), true).unwrap(), t);
        let h = TensorType::new(DType::F16, [3]);
        assert_eq!((stored_size(&h, false), stored_size(&h, true)), (6, 12));
        let err = decode(&[0; 8], &h, true).unwrap_err().to_string();
        assert_eq!(err, "backend error: read 8 bytes of a f16[3] value, need 12");
    }
}
