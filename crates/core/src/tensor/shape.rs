//! Static shapes and numpy-style broadcasting.

use std::fmt;

/// A static tensor shape (row-major, contiguous). A rank-0 shape is a scalar.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    pub fn new(dims: impl Into<Vec<usize>>) -> Self {
        Shape(dims.into())
    }

    pub fn scalar() -> Self {
        Shape(Vec::new())
    }

    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }

    /// Size of the last axis (1 for a scalar).
    pub fn last(&self) -> usize {
        self.0.last().copied().unwrap_or(1)
    }

    /// Row-major strides in elements.
    pub fn strides(&self) -> Vec<usize> {
        let mut strides = vec![1; self.0.len()];
        for i in (0..self.0.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.0[i + 1];
        }
        strides
    }

    /// The numpy broadcast of two shapes, or `None` when they are incompatible.
    pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
        let rank = a.rank().max(b.rank());
        let mut out = vec![0; rank];
        for (i, o) in out.iter_mut().enumerate() {
            let da = dim_from_end(a, rank - 1 - i);
            let db = dim_from_end(b, rank - 1 - i);
            *o = match (da, db) {
                (x, y) if x == y => x,
                (1, y) => y,
                (x, 1) => x,
                _ => return None,
            };
        }
        Some(Shape(out))
    }

    /// True when `self` broadcasts to `target` without changing `target`.
    pub fn broadcasts_to(&self, target: &Shape) -> bool {
        Shape::broadcast(self, target).as_ref() == Some(target)
    }

    /// `(outer, n, inner)`: the products of the dimensions before `axis`, `axis`'s own and the
    /// products of those after it, the view every op along one axis works on (reductions,
    /// argmax) and every backend lowers to.
    pub fn split_at_axis(&self, axis: usize) -> (usize, usize, usize) {
        (self.0[..axis].iter().product(), self.0[axis], self.0[axis + 1..].iter().product())
    }

    /// Strides to read `self` as if it had shape `target` (0 on broadcast axes).
    /// The caller guarantees `self.broadcasts_to(target)`.
    pub fn broadcast_strides(&self, target: &Shape) -> Vec<usize> {
        let own = self.strides();
        let offset = target.rank() - self.rank();
        (0..target.rank()).map(|i| if i < offset || self.0[i - offset] == 1 { 0 } else { own[i - offset] }).collect()
    }
}

/// The flat offset, in units of `strides`, of element `linear` of a row-major tensor of shape
/// `dims` read through broadcast `strides` (from [`Shape::broadcast_strides`]). The references
/// (permute, matmul batches, attention masks) and the backends' lowerings share it.
pub fn broadcast_offset(linear: usize, dims: &[usize], strides: &[usize]) -> usize {
    let mut rest = linear;
    let mut offset = 0;
    for (&d, &s) in dims.iter().zip(strides).rev() {
        offset += (rest % d) * s;
        rest /= d;
    }
    offset
}

/// Dimension `k` counted from the end (0 = last), 1 when the shape is shorter.
fn dim_from_end(s: &Shape, k: usize) -> usize {
    if k < s.rank() { s.0[s.rank() - 1 - k] } else { 1 }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}

impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_follows_numpy_rules() {
        let s = |v: &[usize]| Shape::from(v);
        assert_eq!(Shape::broadcast(&s(&[4, 1, 3]), &s(&[5, 3])), Some(s(&[4, 5, 3])));
        assert_eq!(Shape::broadcast(&s(&[]), &s(&[2, 2])), Some(s(&[2, 2])));
        assert_eq!(Shape::broadcast(&s(&[2, 3]), &s(&[3, 2])), None);
        assert_eq!(s(&[1, 3]).broadcast_strides(&s(&[2, 4, 3])), vec![0, 0, 1]);
        assert_eq!(s(&[2, 3, 4]).strides(), vec![12, 4, 1]);
    }
}
