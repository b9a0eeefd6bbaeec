//! A tensor's data as a model file's reader hands it over: borrowed from the whole file's
//! bytes, or owned in the type its tensor keeps, so that loading moves it into the tensor
//! instead of copying it. The streaming readers ([`crate::load::ct2_stream`], [`crate::load::hf_stream`])
//! fill owned buffers as the file arrives, with the helpers here.

use std::collections::TryReserveError;

use half::f16;

/// A tensor's data (see the module docs).
#[derive(Clone, Debug)]
pub enum FileData<'a> {
    Borrowed(&'a [u8]),
    F16(Vec<f16>),
    F32(Vec<f32>),
    Bytes(Vec<u8>),
}

impl FileData<'_> {
    /// The data as the file stores it (little-endian), for owned f16, f32 and bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            FileData::Borrowed(b) => b,
            FileData::F16(v) => bytemuck::cast_slice(v),
            FileData::F32(v) => bytemuck::cast_slice(v),
            FileData::Bytes(v) => v,
        }
    }

    /// The owned buffer's bytes, to fill (empty for borrowed data).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            FileData::F16(v) => bytemuck::cast_slice_mut(v),
            FileData::F32(v) => bytemuck::cast_slice_mut(v),
            FileData::Bytes(v) => v,
            FileData::Borrowed(_) => &mut [],
        }
    }

    /// Resizes the owned buffer to hold `bytes` bytes (whole elements), zeroing what is new.
    /// `exact` reserves no more (a buffer allocated whole); otherwise it grows as a `Vec`
    /// does, by doubling, so data arriving a chunk at a time costs amortized copies.
    pub(crate) fn resize(&mut self, bytes: usize, exact: bool) -> Result<(), TryReserveError> {
        fn to<T: Clone>(v: &mut Vec<T>, len: usize, exact: bool, zero: T) -> Result<(), TryReserveError> {
            let more = len.saturating_sub(v.len());
            if exact {
                v.try_reserve_exact(more)?
            } else {
                v.try_reserve(more)?
            }
            v.resize(len.max(v.len()), zero);
            Ok(())
        }
        match self {
            FileData::F16(v) => to(v, bytes.div_ceil(2), exact, f16::ZERO),
            FileData::F32(v) => to(v, bytes.div_ceil(4), exact, 0.0),
            FileData::Bytes(v) => to(v, bytes, exact, 0),
            FileData::Borrowed(_) => Ok(()),
        }
    }

    /// Gives back what growing reserved beyond the data.
    pub(crate) fn shrink(&mut self) {
        match self {
            FileData::F16(v) => v.shrink_to_fit(),
            FileData::F32(v) => v.shrink_to_fit(),
            FileData::Bytes(v) => v.shrink_to_fit(),
            FileData::Borrowed(_) => {}
        }
    }
}
