//! Element types and tensor types.

use std::fmt;

use super::shape::Shape;

/// Element type of a tensor.
///
/// Floats compute in f32 everywhere; `F16` is a storage type (weights, activations on GPUs
/// with `shader-f16`). Integers carry token ids, indices and masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F16,
    I32,
    U32,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
        }
    }

    /// True for `F32` and `F16`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16)
    }

    /// True for `I32` and `U32`.
    pub fn is_int(self) -> bool {
        !self.is_float()
    }

    /// Lower-case name used by the printer (`f32`, `f16`, `i32`, `u32`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::U32 => "u32",
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
        self.shape.dims().iter().try_fold(self.dtype.size(), |acc, &d| acc.checked_mul(d))
    }

    /// Size of the tensor's data in bytes.
    pub fn byte_size(&self) -> usize {
        self.numel() * self.dtype.size()
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, self.shape)
    }
}
