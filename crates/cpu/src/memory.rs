//! Typed slices of values during a run.
//!
//! Every value has a [`Region`]: the bytes its link place names in a block (an arena block,
//! a persistent buffer, a weight or a constant; see `susurrus_core::exec::link`). A run fixes
//! the base address of each block once ([`Bases`]) and steps view their regions as slices.
//! The compile step proves what makes that sound: an output region never overlaps an input
//! region, except an elementwise output that is exactly one of its inputs, which the kernel
//! then reads through the output ([`Operand::Output`]).

use susurrus_core::exec::link::{Block, Place};
use susurrus_core::tensor::Tensor;

/// Bytes `offset..offset + bytes` of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub buf: Block,
    pub offset: usize,
    pub bytes: usize,
}

impl Region {
    /// The bytes of `place` (stored as the dtype's own bytes: this backend keeps f16 as f16).
    pub fn at(place: Place) -> Region {
        Region { buf: place.block, offset: place.offset, bytes: place.bytes }
    }

    pub fn overlaps(&self, other: &Region) -> bool {
        self.buf == other.buf
            && self.bytes > 0
            && other.bytes > 0
            && self.offset < other.offset + other.bytes
            && other.offset < self.offset + self.bytes
    }

    /// Whether values here may be written (weights and constants are shared and read-only).
    pub fn writable(&self) -> bool {
        self.buf.writable()
    }
}

/// The base address of every block for one run, by link index. Built from the executable's
/// blocks with their lengths, so that every region is checked against its block once, at
/// compile time ([`Bases::contains`]).
pub struct Bases {
    pub arena: Vec<(*mut u8, usize)>,
    pub states: Vec<(*mut u8, usize)>,
    pub leaves: Vec<(*const u8, usize)>,
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
    fn base(&self, r: Region) -> Option<(*mut u8, usize)> {
        match r.buf {
            Block::Arena(k) => self.arena.get(k).copied(),
            Block::State(i) => self.states.get(i).copied(),
            Block::Leaf(i) => self.leaves.get(i).map(|&(p, len)| (p.cast_mut(), len)),
        }
    }

    /// Whether `r` lies inside its block.
    pub fn contains(&self, r: Region) -> bool {
        let end = r.offset.checked_add(r.bytes);
        self.base(r).is_some_and(|(_, len)| end.is_some_and(|end| end <= len))
    }

    fn ptr(&self, r: Region) -> *mut u8 {
        match self.base(r) {
            // SAFETY: `contains(r)` was checked when the step was compiled.
            Some((base, _)) => unsafe { base.add(r.offset) },
            None => unreachable!("every region was checked against its block at compile time"),
        }
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

/// Where a step reads an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    At(Region),
    /// The input is the output's own region (an elementwise op computed in place): the
    /// kernel reads element `i` through the output before writing it.
    Output,
}
