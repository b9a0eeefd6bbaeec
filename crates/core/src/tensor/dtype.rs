//! Element types and tensor types.

use std::fmt;

use super::shape::Shape;

/// Element type of a tensor.
///
/// Floats compute in f32 everywhere; `F16` is a storage type (weights, activations on GPUs
/// with `shader-f16`). Integers carry token ids, indices and masks.
///
/// `Q8` is a storage type of weights only (int8 models): int8 values with one f32 scale per
/// index of the first axis, the value being `q * scale` (see [`super::Q8Data`] for the bytes).
/// A row of a linear layer's weight, an embedding row and a convolution's output channel
/// each get their own scale, as CTranslate2 quantizes them. Only a few ops read it (a
/// product's right operand, a gather's table, a convolution's weight, a cast), always
/// dequantizing on the fly; no computed value is `Q8`, so it never lives in an arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F16,
    I32,
    U32,
    Q8,
}

impl DType {
    /// Bytes per element (for `Q8` without its scales: [`TensorType::byte_size`] adds them).
    pub fn size(self) -> usize {
        match self {
            DType::Q8 => 1,
            DType::F16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
        }
    }

    /// True for `F32` and `F16`, the dtypes values are computed in.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16)
    }

    /// True for the dtypes a weight operand may have: the floats and `Q8`.
    pub fn is_weight_float(self) -> bool {
        self.is_float() || self == DType::Q8
    }

    /// True for `I32` and `U32`.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::U32)
    }

    /// Lower-case name used by the printer (`f32`, `f16`, `i32`, `u32`, `q8`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::Q8 => "q8",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The static type of a value in the graph: element type and shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorType {
    pub fn new(dtype: DType, shape: impl Into<Shape>) -> Self {
        TensorType { dtype, shape: shape.into() }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// Size in bytes, or `None` when it does not fit in `usize`. Graphs reject such types, so
    /// [`TensorType::numel`] and [`TensorType::byte_size`] never overflow on a built graph.
    pub fn checked_byte_size(&self) -> Option<usize> {
        let values = self.shape.dims().iter().try_fold(self.dtype.size(), |acc, &d| acc.checked_mul(d))?;
        if self.dtype == DType::Q8 {
            values.div_ceil(4).checked_mul(4)?.checked_add(self.q8_rows().checked_mul(4)?)
        } else {
            Some(values)
        }
    }

    /// Size of the tensor's data in bytes (`Q8`: the values padded to 4 bytes, then the scales).
    pub fn byte_size(&self) -> usize {
        if self.dtype == DType::Q8 {
            self.numel().div_ceil(4) * 4 + self.q8_rows() * 4
        } else {
            self.numel() * self.dtype.size()
        }
    }

    /// How many scales a `Q8` tensor of this shape has: one per index of its first axis.
    pub fn q8_rows(&self) -> usize {
        self.shape.dims().first().copied().unwrap_or(1)
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}
