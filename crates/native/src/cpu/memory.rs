//! Where values live during a run, and typed slices of them.
//!
//! Every value the plan stores has a [`Region`]: bytes of the arena, of a persistent buffer,
//! of a weight or of a constant. A run fixes the base address of each buffer once
//! ([`Bases`]) and steps view their regions as slices. The compile step proves what makes
//! that sound: an output region never overlaps an input region, except an elementwise
//! output that is exactly one of its inputs, which the kernel then reads through the output
//! ([`super::compile::Operand::Output`]).

use susurrus_core::tensor::Tensor;

/// A buffer of the executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    Arena,
    /// A persistent buffer, by index into the executable's state list.
    State(usize),
    /// A weight, by index into the executable's weights.
    Param(usize),
    /// A constant, by index into the executable's constants.
    Const(usize),
}

/// Bytes `offset..offset + bytes` of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub buf: Buf,
    pub offset: usize,
    pub bytes: usize,
}

impl Region {
    pub fn overlaps(&self, other: &Region) -> bool {
        self.buf == other.buf
            && self.bytes > 0
            && other.bytes > 0
            && self.offset < other.offset + other.bytes
            && other.offset < self.offset + self.bytes
    }

    /// Whether values here may be written (weights and constants are shared and read-only).
    pub fn writable(&self) -> bool {
        matches!(self.buf, Buf::Arena | Buf::State(_))
    }
}

/// The base address of every buffer for one run. Built from the executable's buffers with
/// their lengths, so that every region is checked against its buffer once, at compile time
/// ([`Bases::contains`]).
pub struct Bases {
    pub arena: (*mut u8, usize),
    pub states: Vec<(*mut u8, usize)>,
    pub params: Vec<(*const u8, usize)>,
    pub consts: Vec<(*const u8, usize)>,
}

// SAFETY: `Bases` only hands out slices under the contract of `slice`/`slice_mut`; the
// steps that share it across the pool's threads write disjoint parts (see each kernel).
unsafe impl Send for Bases {}
// SAFETY: as above.
unsafe impl Sync for Bases {}

/// A pointer that may cross to the worker threads of a parallel loop, each of which writes
/// a disjoint part of what it points to.
#[derive(Clone, Copy)]
pub struct SendPtr<T>(pub *mut T);
// SAFETY: only used for disjoint writes from scoped parallel loops, see each use.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole `SendPtr`, not its field).
    pub fn get(self) -> *mut T {
        self.0
    }
}

impl Bases {
    fn base(&self, r: Region) -> (*mut u8, usize) {
        match r.buf {
            Buf::Arena => self.arena,
            Buf::State(i) => self.states[i],
            Buf::Param(i) => (self.params[i].0.cast_mut(), self.params[i].1),
            Buf::Const(i) => (self.consts[i].0.cast_mut(), self.consts[i].1),
        }
    }

    /// Whether `r` lies inside its buffer.
    pub fn contains(&self, r: Region) -> bool {
        r.offset.checked_add(r.bytes).is_some_and(|end| end <= self.base(r).1)
    }

    fn ptr(&self, r: Region) -> *mut u8 {
        // SAFETY: `contains(r)` was checked when the step was compiled.
        unsafe { self.base(r).0.add(r.offset) }
    }

    /// The region as `T`s.
    ///
    /// # Safety
    /// `r` lies in its buffer, is aligned for `T`, and nothing writes it while the slice lives.
    pub unsafe fn slice<'a, T: bytemuck::Pod>(&self, r: Region) -> &'a [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr(r).cast::<T>(), r.bytes / size_of::<T>()) }
    }

    /// The region as mutable `T`s.
    ///
    /// # Safety
    /// As [`Bases::slice`], the region is writable, and no other slice of it lives.
    pub unsafe fn slice_mut<'a, T: bytemuck::Pod>(&self, r: Region) -> &'a mut [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(r).cast::<T>(), r.bytes / size_of::<T>()) }
    }
}

/// A weight or constant's bytes, for [`Bases`].
pub fn tensor_base(t: &Tensor) -> (*const u8, usize) {
    let bytes = t.as_bytes();
    (bytes.as_ptr(), bytes.len())
}
