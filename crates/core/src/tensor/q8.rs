//! The storage of [`DType::Q8`](super::DType::Q8) tensors: int8 values with one f32 scale
//! per index of the first axis.
//!
//! The bytes are the values (row-major, padded to a multiple of 4 bytes) followed by the
//! scales as little-endian f32: what backends upload as one buffer and read with one binding.
//! Held as 32-bit words so both parts can be borrowed as slices without copying.
//!
//! Quantization follows CTranslate2's (`int8`): per row `amax = max |v|` (127 for an all-zero
//! row), `q = round_half_even(v * (127 / amax))`; the stored scale is `1 / (127 / amax)`, the
//! reciprocal of CTranslate2's, so dequantizing is a product.

use crate::error::{Error, Result};

/// The words of a `Q8` tensor of `len` values in `rows` rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Q8Data {
    len: usize,
    words: Vec<u32>,
}

impl Q8Data {
    /// From values and one scale per row (`values.len()` a multiple of `scales.len()`).
    pub fn new(values: &[i8], scales: &[f32]) -> Result<Self> {
        if !values.len().is_multiple_of(scales.len()) {
            return Err(Error::BadTensor(format!(
                "q8: {} values do not divide into {} rows of scales",
                values.len(),
                scales.len()
            )));
        }
        let mut words = vec![0u32; values.len().div_ceil(4) + scales.len()];
        let value_words = values.len().div_ceil(4);
        bytemuck::cast_slice_mut::<u32, i8>(&mut words[..value_words])[..values.len()].copy_from_slice(values);
        bytemuck::cast_slice_mut::<u32, f32>(&mut words[value_words..]).copy_from_slice(scales);
        Ok(Q8Data { len: values.len(), words })
    }

    /// `len` zeros in `rows` rows, every scale 0.
    pub fn zeros(len: usize, rows: usize) -> Self {
        Q8Data { len, words: vec![0; len.div_ceil(4) + rows] }
    }

    /// Quantizes `values` laid out as `rows` rows (CTranslate2's int8 rule, see the module).
    pub fn quantize(values: &[f32], rows: usize) -> Result<Self> {
        if rows == 0 || !values.len().is_multiple_of(rows) {
            return Err(Error::BadTensor(format!("q8: {} values do not divide into {rows} rows", values.len())));
        }
        let row_len = values.len() / rows;
        let mut q = Vec::with_capacity(values.len());
        let mut scales = Vec::with_capacity(rows);
        for row in values.chunks(row_len.max(1)).take(rows) {
            let mut amax = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            if amax == 0.0 {
                amax = 127.0;
            }
            let amax = amax.max(127.0 / f32::MAX);
            let inverse = 127.0 / amax;
            q.extend(row.iter().map(|&v| (v * inverse).round_ties_even().clamp(-128.0, 127.0) as i8));
            scales.push(1.0 / inverse);
        }
        if row_len == 0 {
            scales.resize(rows, 1.0);
        }
        Q8Data::new(&q, &scales)
    }

    /// From the bytes of [`Q8Data::as_bytes`], for `len` values in `rows` rows.
    pub fn from_bytes(bytes: &[u8], len: usize, rows: usize) -> Result<Self> {
        let expected = len.div_ceil(4) * 4 + rows * 4;
        if bytes.len() != expected || !len.is_multiple_of(rows) {
            return Err(Error::BadTensor(format!(
                "q8: {len} values in {rows} rows need {expected} bytes, got {}",
                bytes.len()
            )));
        }
        Ok(Q8Data { len, words: bytemuck::pod_collect_to_vec(bytes) })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The int8 values, row-major.
    pub fn values(&self) -> &[i8] {
        &bytemuck::cast_slice::<u32, i8>(&self.words[..self.len.div_ceil(4)])[..self.len]
    }

    /// One scale per row.
    pub fn scales(&self) -> &[f32] {
        bytemuck::cast_slice(&self.words[self.len.div_ceil(4)..])
    }

    /// Values per row.
    pub fn row_len(&self) -> usize {
        self.len.checked_div(self.scales().len()).unwrap_or(0)
    }

    /// The dequantized values.
    pub fn to_f32(&self) -> Vec<f32> {
        let row_len = self.row_len().max(1);
        self.values().iter().enumerate().map(|(i, &q)| f32::from(q) * self.scales()[i / row_len]).collect()
    }

    /// Rows `lo..hi` as a tensor's data of their own.
    pub fn rows(&self, lo: usize, hi: usize) -> Result<Self> {
        let row_len = self.row_len();
        Q8Data::new(&self.values()[lo * row_len..hi * row_len], &self.scales()[lo..hi])
    }

    /// The bytes: values padded to 4 bytes, then the scales.
    pub fn as_bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantizes_per_row_as_ctranslate2_does() {
        // Row 0: amax 2, so q = round(v * 63.5); 0.5 * 63.5 = 31.75 -> 32, -2 -> -127.
        // Row 1 is all zeros: scale 1/1 and zeros. Row 2: 1 * 127 / 1 = 127, 0.5*127 = 63.5 -> 64 (even).
        let q = Q8Data::quantize(&[0.5, -2.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.5, -1.0], 3).unwrap();
        assert_eq!(q.values(), [32, -127, 64, 0, 0, 0, 127, 64, -127]);
        assert_eq!(q.scales(), [1.0 / 63.5, 1.0, 1.0 / 127.0]);
        let back = q.to_f32();
        assert_eq!(back[1], -127.0 * (1.0 / 63.5));
        assert!((back[0] - 0.5).abs() < 0.01);
        let bytes = q.as_bytes().to_vec();
        assert_eq!(bytes.len(), 12 + 12);
        assert_eq!(Q8Data::from_bytes(&bytes, 9, 3).unwrap(), q);
        assert_eq!(q.rows(1, 3).unwrap().values(), [0, 0, 0, 127, 64, -127]);
        assert_eq!(
            Q8Data::from_bytes(&bytes[..20], 9, 3).unwrap_err().to_string(),
            "bad tensor: q8: 9 values in 3 rows need 24 bytes, got 20"
        );
        assert!(Q8Data::new(&[1, 2, 3], &[1.0, 1.0]).is_err());
    }
}
