//! Device memory of a linked program. The link layer (`susurrus_core::exec::link`) decides
//! where every value lives; here its blocks are packed into a few device allocations: the
//! leaves (weights and constants of every plan, uploaded once) in one, the persistent buffers
//! in another, and per plan its arena blocks followed by the run's runtime-scalar table.
//! Addresses are allocation bases plus these offsets, so lowering can be checked without a GPU.

use susurrus_core::DType;
use susurrus_core::exec::link::{Block, Leaf, Link, Place, SCALAR_TABLE_BYTES, StateBuffer};

use super::params::kind;

/// Alignment of every block in its allocation (cuBLAS and vector loads like 16 bytes; the
/// planner aligns arena values to 256).
pub const ALIGN: usize = 256;

/// How the kernels read the elements of `place`: f16 values of the arena and of persistent
/// buffers are f32 words, and so are f16 weights and constants with `Precision::F32`.
pub fn stored_kind(place: &Place) -> u32 {
    match place.dtype {
        DType::F16 if !place.f16_words => kind::F16,
        DType::F32 | DType::F16 => kind::F32,
        DType::I32 => kind::I32,
        DType::U32 => kind::U32,
        DType::Q8 => kind::Q8,
    }
}

/// Offsets of blocks of these sizes packed one after another, each at a multiple of
/// [`ALIGN`], and the bytes they take.
fn pack(sizes: impl IntoIterator<Item = usize>) -> (Vec<usize>, usize) {
    let mut end = 0;
    let offsets = sizes
        .into_iter()
        .map(|bytes| {
            let at = end;
            end = (at + bytes).next_multiple_of(ALIGN);
            at
        })
        .collect();
    (offsets, end)
}

/// Where the link's blocks lie in the program's device allocations.
pub struct ProgramLayout {
    /// Offset of each leaf in the weights allocation, and the bytes they take.
    pub leaves: Vec<usize>,
    pub leaves_bytes: usize,
    /// Offset of each persistent buffer in the states allocation, and the bytes they take.
    pub states: Vec<usize>,
    pub states_bytes: usize,
    /// Per plan: the offsets of its arena blocks in its arena allocation, and the bytes they
    /// take (where the runtime-scalar table starts).
    pub arenas: Vec<(Vec<usize>, usize)>,
}

impl ProgramLayout {
    pub fn new(link: &Link) -> Self {
        let (leaves, leaves_bytes) = pack(link.leaves.iter().map(Leaf::bytes));
        let (states, states_bytes) = pack(link.states.iter().map(StateBuffer::bytes));
        let arenas = link.plans.iter().map(|p| pack(p.arena.iter().copied())).collect();
        ProgramLayout { leaves, leaves_bytes, states, states_bytes, arenas }
    }

    /// Bytes of plan `plan`'s arena allocation: its arena blocks, then the scalar table.
    pub fn arena_allocation(&self, plan: usize) -> usize {
        self.arenas[plan].1 + SCALAR_TABLE_BYTES
    }

    /// The device address of `place`, a place of plan `plan`.
    pub fn address(&self, bases: &Bases, plan: usize, place: &Place) -> u64 {
        let (base, block) = match place.block {
            Block::Leaf(i) => (bases.weights, self.leaves[i]),
            Block::State(i) => (bases.states, self.states[i]),
            Block::Arena(k) => (bases.arenas[plan], self.arenas[plan].0[k]),
        };
        base + (block + place.offset) as u64
    }

    /// The device address of plan `plan`'s runtime-scalar table.
    pub fn scalars(&self, bases: &Bases, plan: usize) -> u64 {
        bases.arenas[plan] + self.arenas[plan].1 as u64
    }
}

/// Device base addresses of a program's allocations.
#[derive(Clone, Debug)]
pub struct Bases {
    pub weights: u64,
    pub states: u64,
    pub arenas: Vec<u64>,
}
