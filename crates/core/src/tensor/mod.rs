//! Host tensors: typed, contiguous, row-major data with a shape, and the types of values
//! ([`DType`], [`Shape`], [`TensorType`]) that the IR above names too.
//!
//! This is the currency of the CPU reference, of run inputs and outputs, and of weights.
//! Floats are computed in f32: [`Tensor::to_f32`] widens any dtype and
//! [`Tensor::from_f32`] rounds back to the storage dtype.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use half::f16;

mod dtype;
mod q8;
mod shape;

pub use dtype::{DType, TensorType};
pub use q8::Q8Data;
pub use shape::{Shape, broadcast_offset};

use crate::error::{Error, Result};

/// The element storage of a [`Tensor`].
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I32(Vec<i32>),
    U32(Vec<u32>),
    Q8(Q8Data),
}

impl TensorData {
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::F16(_) => DType::F16,
            TensorData::I32(_) => DType::I32,
            TensorData::U32(_) => DType::U32,
            TensorData::Q8(_) => DType::Q8,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::U32(v) => v.len(),
            TensorData::Q8(q) => q.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A host tensor. Tensors are immutable and their data is shared: a clone (a weight handed
/// to a backend, a model compiled again) costs no copy of the elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Shape,
    data: Arc<TensorData>,
}

/// Weights by param name, supplied once at compile time (`exec` names it too). Defined with
/// the tensors, so code below the executors (the test kit's cases, the model's loaders) can
/// name it without reaching into a backend module.
pub type Weights = HashMap<String, Tensor>;

impl Tensor {
    /// A tensor from data; fails when the element count does not match the shape.
    pub fn new(shape: impl Into<Shape>, data: TensorData) -> Result<Self> {
        let shape = shape.into();
        if shape.numel() != data.len() {
            return Err(Error::BadTensor(format!(
                "shape {shape} needs {} elements, data has {}",
                shape.numel(),
                data.len()
            )));
        }
        Ok(Tensor { shape, data: Arc::new(data) })
    }

    /// An f32 tensor.
    pub fn f32(shape: impl Into<Shape>, data: Vec<f32>) -> Result<Self> {
        Tensor::new(shape, TensorData::F32(data))
    }

    /// An i32 tensor.
    pub fn i32(shape: impl Into<Shape>, data: Vec<i32>) -> Result<Self> {
        Tensor::new(shape, TensorData::I32(data))
    }

    /// A u32 tensor.
    pub fn u32(shape: impl Into<Shape>, data: Vec<u32>) -> Result<Self> {
        Tensor::new(shape, TensorData::U32(data))
    }

    /// A `Q8` tensor: int8 values and one scale per index of the first axis.
    pub fn q8(shape: impl Into<Shape>, values: &[i8], scales: &[f32]) -> Result<Self> {
        let shape = shape.into();
        let rows = TensorType::new(DType::Q8, shape.clone()).q8_rows();
        if scales.len() != rows {
            return Err(Error::BadTensor(format!("q8{shape} needs {rows} scales, got {}", scales.len())));
        }
        Tensor::new(shape, TensorData::Q8(Q8Data::new(values, scales)?))
    }

    /// This float tensor quantized to `Q8` (CTranslate2's int8 rule, one scale per index of
    /// the first axis; see [`Q8Data`]).
    pub fn quantized_q8(&self) -> Result<Tensor> {
        let rows = TensorType::new(DType::Q8, self.shape.clone()).q8_rows();
        Tensor::new(self.shape.clone(), TensorData::Q8(Q8Data::quantize(&self.to_f32(), rows)?))
    }

    /// A rank-0 f32 tensor.
    pub fn scalar_f32(v: f32) -> Self {
        Tensor { shape: Shape::scalar(), data: Arc::new(TensorData::F32(vec![v])) }
    }

    /// All zeros of the given type.
    pub fn zeros(ty: &TensorType) -> Self {
        let n = ty.numel();
        let data = match ty.dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::F16 => TensorData::F16(vec![f16::ZERO; n]),
            DType::I32 => TensorData::I32(vec![0; n]),
            DType::U32 => TensorData::U32(vec![0; n]),
            DType::Q8 => TensorData::Q8(Q8Data::zeros(n, ty.q8_rows())),
        };
        Tensor { shape: ty.shape.clone(), data: Arc::new(data) }
    }

    /// Converts f32 values into a tensor of `dtype` (rounding for f16, truncating toward
    /// zero and saturating for integers). Fails when the count does not match the shape.
    pub fn from_f32(dtype: DType, shape: impl Into<Shape>, values: Vec<f32>) -> Result<Self> {
        let data = match dtype {
            DType::F32 => TensorData::F32(values),
            DType::F16 => TensorData::F16(values.into_iter().map(f16::from_f32).collect()),
            DType::I32 => TensorData::I32(values.into_iter().map(|v| v as i32).collect()),
            DType::U32 => TensorData::U32(values.into_iter().map(|v| v as u32).collect()),
            DType::Q8 => return Tensor::f32(shape, values)?.quantized_q8(),
        };
        Tensor::new(shape, data)
    }

    /// Converts exact integer values into a tensor of `dtype` (wrapping for u32).
    pub fn from_i64(dtype: DType, shape: impl Into<Shape>, values: Vec<i64>) -> Result<Self> {
        let data = match dtype {
            DType::F32 => TensorData::F32(values.into_iter().map(|v| v as f32).collect()),
            DType::F16 => TensorData::F16(values.into_iter().map(|v| f16::from_f32(v as f32)).collect()),
            DType::I32 => TensorData::I32(values.into_iter().map(|v| v as i32).collect()),
            DType::U32 => TensorData::U32(values.into_iter().map(|v| v as u32).collect()),
            DType::Q8 => return Tensor::from_f32(dtype, shape, values.into_iter().map(|v| v as f32).collect()),
        };
        Tensor::new(shape, data)
    }

    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    pub fn ty(&self) -> TensorType {
        TensorType { dtype: self.dtype(), shape: self.shape.clone() }
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The same data under another shape with the same element count.
    pub fn reshaped(mut self, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        if shape.numel() != self.numel() {
            return Err(Error::BadTensor(format!("cannot reshape {} to {shape}", self.shape)));
        }
        self.shape = shape;
        Ok(self)
    }

    /// `parts` stacked along the first axis: one tensor whose rows are the first part's, then
    /// the second's, and so on (a fused weight of several linear layers). The parts must share
    /// the dtype and every other axis; q8 rows keep their own scales.
    pub fn concat_rows(parts: &[&Tensor]) -> Result<Tensor> {
        let first = parts.first().ok_or_else(|| Error::BadTensor("concat_rows of no tensors".into()))?;
        let dims = first.shape.dims();
        if dims.is_empty() {
            return Err(Error::BadTensor(format!("concat_rows of a scalar {}", first.ty())));
        }
        for p in parts {
            if p.dtype() != first.dtype() || p.shape.rank() != dims.len() || p.shape.dims()[1..] != dims[1..] {
                return Err(Error::BadTensor(format!("concat_rows of {} and {}: rows differ", first.ty(), p.ty())));
            }
        }
        let mut shape = dims.to_vec();
        shape[0] = parts.iter().map(|p| p.shape.dims()[0]).sum();
        if let TensorData::Q8(_) = first.data.as_ref() {
            let (mut values, mut scales) = (Vec::new(), Vec::new());
            for p in parts {
                if let TensorData::Q8(q) = p.data.as_ref() {
                    values.extend_from_slice(q.values());
                    scales.extend_from_slice(q.scales());
                }
            }
            return Tensor::q8(shape, &values, &scales);
        }
        let bytes: Vec<u8> = parts.iter().flat_map(|p| p.as_bytes().iter().copied()).collect();
        Tensor::from_bytes(&TensorType::new(first.dtype(), shape), &bytes)
    }

    /// The values widened to f32 (integers converted by value).
    pub fn to_f32(&self) -> Vec<f32> {
        match self.data.as_ref() {
            TensorData::F32(v) => v.clone(),
            TensorData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f32).collect(),
            TensorData::U32(v) => v.iter().map(|&x| x as f32).collect(),
            TensorData::Q8(q) => q.to_f32(),
        }
    }

    /// The values as f32 like [`Tensor::to_f32`], but borrowed when the tensor already is f32:
    /// evaluations read weights this way, so a large weight is not copied on every use.
    pub fn to_f32_cow(&self) -> Cow<'_, [f32]> {
        match self.data.as_ref() {
            TensorData::F32(v) => Cow::Borrowed(v),
            _ => Cow::Owned(self.to_f32()),
        }
    }

    /// The same values as an f32 tensor of the same shape (exact for f16 and f32).
    pub fn f32_widened(&self) -> Tensor {
        Tensor { shape: self.shape.clone(), data: Arc::new(TensorData::F32(self.to_f32())) }
    }

    /// Integer values as i64 (floats truncated toward zero).
    pub fn to_i64(&self) -> Vec<i64> {
        match self.data.as_ref() {
            TensorData::F32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::F16(v) => v.iter().map(|x| x.to_f32() as i64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::U32(v) => v.iter().map(|&x| x as i64).collect(),
            TensorData::Q8(q) => q.to_f32().into_iter().map(|x| x as i64).collect(),
        }
    }

    /// Borrow f32 data, if the tensor is f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self.data.as_ref() {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// Borrow u32 data, if the tensor is u32.
    pub fn as_u32(&self) -> Option<&[u32]> {
        match self.data.as_ref() {
            TensorData::U32(v) => Some(v),
            _ => None,
        }
    }

    /// Borrow i32 data, if the tensor is i32.
    pub fn as_i32(&self) -> Option<&[i32]> {
        match self.data.as_ref() {
            TensorData::I32(v) => Some(v),
            _ => None,
        }
    }

    /// The raw little-endian bytes of the data.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self.data.as_ref() {
            TensorData::F32(v) => bytemuck::cast_slice(v).to_vec(),
            TensorData::F16(v) => bytemuck::cast_slice(v).to_vec(),
            TensorData::I32(v) => bytemuck::cast_slice(v).to_vec(),
            TensorData::U32(v) => bytemuck::cast_slice(v).to_vec(),
            TensorData::Q8(q) => q.as_bytes().to_vec(),
        }
    }

    /// The raw little-endian bytes of the data, borrowed (no copy, unlike [`Tensor::to_bytes`]).
    pub fn as_bytes(&self) -> &[u8] {
        match self.data.as_ref() {
            TensorData::F32(v) => bytemuck::cast_slice(v),
            TensorData::F16(v) => bytemuck::cast_slice(v),
            TensorData::I32(v) => bytemuck::cast_slice(v),
            TensorData::U32(v) => bytemuck::cast_slice(v),
            TensorData::Q8(q) => q.as_bytes(),
        }
    }

    /// A tensor of type `ty` from raw little-endian bytes.
    pub fn from_bytes(ty: &TensorType, bytes: &[u8]) -> Result<Self> {
        if bytes.len() != ty.byte_size() {
            return Err(Error::BadTensor(format!("{ty} needs {} bytes, got {}", ty.byte_size(), bytes.len())));
        }
        let data = match ty.dtype {
            DType::F32 => TensorData::F32(bytemuck::pod_collect_to_vec(bytes)),
            DType::F16 => TensorData::F16(bytemuck::pod_collect_to_vec(bytes)),
            DType::I32 => TensorData::I32(bytemuck::pod_collect_to_vec(bytes)),
            DType::U32 => TensorData::U32(bytemuck::pod_collect_to_vec(bytes)),
            DType::Q8 => TensorData::Q8(Q8Data::from_bytes(bytes, ty.numel(), ty.q8_rows())?),
        };
        Tensor::new(ty.shape.clone(), data)
    }

    /// Checks that the tensor has type `ty`; `what` names it in the error.
    pub fn expect_type(&self, ty: &TensorType, what: &str) -> Result<()> {
        if &self.ty() != ty {
            return Err(Error::BadArgument(format!("{what}: expected {ty}, got {}", self.ty())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_and_errors() {
        let t = Tensor::from_f32(DType::F16, [3], vec![1.0, -2.5, 65504.0]).unwrap();
        let back = Tensor::from_bytes(&t.ty(), &t.to_bytes()).unwrap();
        assert_eq!(back.to_f32(), vec![1.0, -2.5, 65504.0]);
        assert!(Tensor::f32([2, 2], vec![1.0; 3]).is_err());
        let err = Tensor::from_bytes(&TensorType::new(DType::F32, [2]), &[0u8; 7]).unwrap_err();
        assert_eq!(err.to_string(), "bad tensor: f32[2] needs 8 bytes, got 7");
        assert_eq!(t.as_bytes(), t.to_bytes().as_slice());
    }

    #[test]
    fn clones_share_their_elements_and_reshapes_keep_them() {
        let t = Tensor::from_f32(DType::F16, [2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let clone = t.clone();
        assert_eq!(clone, t);
        assert!(std::ptr::eq(clone.as_bytes().as_ptr(), t.as_bytes().as_ptr()), "a clone copied the elements");
        let reshaped = clone.reshaped([3, 2]).unwrap();
        assert!(std::ptr::eq(reshaped.as_bytes().as_ptr(), t.as_bytes().as_ptr()));
        assert_eq!((reshaped.shape().dims(), t.shape().dims()), (&[3, 2][..], &[2, 3][..]));
    }

    #[test]
    fn rows_concatenate_in_order_with_their_q8_scales() {
        let a = Tensor::from_f32(DType::F16, [1, 2], vec![1.0, 2.0]).unwrap();
        let b = Tensor::from_f32(DType::F16, [2, 2], vec![3.0, 4.0, 5.0, 6.0]).unwrap();
        let ab = Tensor::concat_rows(&[&a, &b]).unwrap();
        assert_eq!((ab.ty(), ab.to_f32()), (TensorType::new(DType::F16, [3, 2]), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
        let qa = Tensor::q8([1, 2], &[1, -2], &[0.5]).unwrap();
        let qb = Tensor::q8([2, 2], &[3, 4, 5, 6], &[1.0, 2.0]).unwrap();
        assert_eq!(Tensor::concat_rows(&[&qa, &qb]).unwrap().to_f32(), vec![0.5, -1.0, 3.0, 4.0, 10.0, 12.0]);
        let wide = Tensor::from_f32(DType::F16, [1, 3], vec![0.0; 3]).unwrap();
        let err = Tensor::concat_rows(&[&a, &wide]).unwrap_err();
        assert_eq!(err.to_string(), "bad tensor: concat_rows of f16[1,2] and f16[1,3]: rows differ");
        assert!(Tensor::concat_rows(&[&a, &qa]).is_err());
    }

    #[test]
    fn f32_values_are_borrowed_only_from_f32_tensors() {
        let t = Tensor::f32([2], vec![1.5, -2.0]).unwrap();
        let v = t.to_f32_cow();
        assert!(matches!(v, Cow::Borrowed(_)));
        assert_eq!(v.as_ptr(), t.as_f32().unwrap().as_ptr());
        // 0.1 widens from f16 as 0.0999755859375, the value `to_f32` gives.
        let h = Tensor::from_f32(DType::F16, [2], vec![0.1, 3.0]).unwrap();
        let v = h.to_f32_cow();
        assert!(matches!(v, Cow::Owned(_)));
        assert_eq!(*v, [0.099_975_586, 3.0]);
        assert_eq!(*Tensor::i32([1], vec![-7]).unwrap().to_f32_cow(), [-7.0]);
    }
}
