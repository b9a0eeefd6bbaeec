//! Where every value of a linked program lives on the device, before any memory exists:
//! one block for the weights and constants of all plans, one for the persistent buffers,
//! and per plan one arena block (the plan's arena, then the run's runtime scalars). Addresses
//! are block bases plus these offsets, so lowering can be checked without a GPU.

use std::collections::HashMap;

use susurrus_core::ir::{NodeId, TensorType};
use susurrus_core::ops::Op;
use susurrus_core::plan::{Plan, Storage};
use susurrus_core::{DType, Error, Result, Tensor};

use super::lower::Precision;
use super::params::kind;

/// Alignment of every placed tensor (cuBLAS and vector loads like 16 bytes; the planner
/// aligns arena values to 256).
pub const ALIGN: usize = 256;

/// Most runtime scalars a graph may declare (the scalars area after each arena).
pub const MAX_SCALARS: usize = 64;

/// A device block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Block {
    Weights,
    States,
    /// The arena of plan `i` of the program.
    Arena(usize),
}

/// A value's place: `offset` bytes into `block`, elements stored as [`kind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub block: Block,
    pub offset: usize,
    pub kind: u32,
}

/// The bytes of a tensor uploaded to (or read from) the device: f16 values of the arena and
/// of persistent buffers are f32 words; weights and constants keep f16 with
/// [`Precision::F16`] and are widened with [`Precision::F32`].
pub fn stored_kind(dtype: DType, leaf_weight: bool, precision: Precision) -> u32 {
    match dtype {
        DType::F16 if leaf_weight && precision == Precision::F16 => kind::F16,
        DType::F32 | DType::F16 => kind::F32,
        DType::I32 => kind::I32,
        DType::U32 => kind::U32,
    }
}

/// `t`'s bytes stored as `k`.
pub fn encode(t: &Tensor, k: u32) -> Vec<u8> {
    match (t.dtype(), k) {
        (DType::F16, kind::F32) => bytemuck::cast_slice(&t.to_f32()).to_vec(),
        _ => t.to_bytes(),
    }
}

/// The tensor of type `ty` stored in `bytes` as 32-bit words (arena and persistent buffers).
pub fn decode_words(bytes: &[u8], ty: &TensorType) -> Result<Tensor> {
    let need = ty.numel() * 4;
    let bytes = bytes
        .get(..need)
        .ok_or_else(|| Error::Backend(format!("cuda: read {} bytes of a {ty} value, need {need}", bytes.len())))?;
    match ty.dtype {
        DType::F16 => Tensor::from_f32(DType::F16, ty.shape.clone(), bytemuck::pod_collect_to_vec(bytes)),
        _ => Tensor::from_bytes(ty, bytes),
    }
}

/// Bytes a type takes as 32-bit words.
pub fn word_bytes(ty: &TensorType) -> usize {
    ty.numel() * 4
}

/// A weight or constant to upload into the weights block.
pub struct Upload {
    pub offset: usize,
    pub bytes: Vec<u8>,
}

/// The placement of a linked program.
pub struct ProgramLayout {
    pub weights_bytes: usize,
    pub uploads: Vec<Upload>,
    pub states_bytes: usize,
    /// Persistent buffers by name: offset in the states block and type.
    pub states: HashMap<String, (usize, TensorType)>,
    /// Per plan: every node's place (views share their input's).
    pub places: Vec<Vec<Place>>,
    /// Per plan: arena bytes (the scalars follow at this offset).
    pub arena_bytes: Vec<usize>,
}

impl ProgramLayout {
    pub fn new(plans: &[&Plan], weights: &HashMap<String, Tensor>, precision: Precision) -> Result<Self> {
        let mut layout = ProgramLayout {
            weights_bytes: 0,
            uploads: Vec::new(),
            states_bytes: 0,
            states: HashMap::new(),
            places: Vec::new(),
            arena_bytes: Vec::new(),
        };
        let mut params: HashMap<String, Place> = HashMap::new();
        for (i, plan) in plans.iter().enumerate() {
            let places = layout.place_plan(i, plan, weights, precision, &mut params)?;
            layout.places.push(places);
            layout.arena_bytes.push(plan.report.arena_bytes.next_multiple_of(ALIGN));
        }
        Ok(layout)
    }

    fn add_upload(&mut self, bytes: Vec<u8>) -> usize {
        let offset = self.weights_bytes;
        self.weights_bytes = (offset + bytes.len()).next_multiple_of(ALIGN);
        self.uploads.push(Upload { offset, bytes });
        offset
    }

    fn place_plan(
        &mut self,
        index: usize,
        plan: &Plan,
        weights: &HashMap<String, Tensor>,
        precision: Precision,
        params: &mut HashMap<String, Place>,
    ) -> Result<Vec<Place>> {
        let g = &plan.graph;
        let mut places: Vec<Option<Place>> = vec![None; g.len()];
        for id in g.ids() {
            let node = g.node(id);
            let place = match (&plan.storage[id.index()], &node.op) {
                (Storage::Arena { offset, .. }, _) => Place {
                    block: Block::Arena(index),
                    offset: *offset,
                    kind: stored_kind(node.ty.dtype, false, precision),
                },
                (Storage::Param(name), Op::Param(p)) => match params.get(name) {
                    Some(place) => *place,
                    None => {
                        let w = susurrus_core::exec::supplied_weight(weights, p)?;
                        let k = stored_kind(p.ty.dtype, true, precision);
                        let place = Place { block: Block::Weights, offset: self.add_upload(encode(w, k)), kind: k };
                        params.insert(name.clone(), place);
                        place
                    }
                },
                (Storage::Const(c), Op::Const(value)) if *c == id => {
                    let k = stored_kind(node.ty.dtype, true, precision);
                    Place { block: Block::Weights, offset: self.add_upload(encode(&value.value, k)), kind: k }
                }
                (Storage::State(name), Op::State(s)) => {
                    let offset = match self.states.get(name) {
                        Some((offset, _)) => *offset,
                        None => {
                            let offset = self.states_bytes;
                            self.states_bytes = (offset + word_bytes(&s.ty)).next_multiple_of(ALIGN);
                            self.states.insert(name.clone(), (offset, s.ty.clone()));
                            offset
                        }
                    };
                    Place { block: Block::States, offset, kind: stored_kind(s.ty.dtype, false, precision) }
                }
                // Views and cache writes share their input's storage.
                _ => {
                    let input =
                        node.inputs.first().and_then(|i| places[i.index()]).ok_or_else(|| {
                            Error::InvalidGraph(format!("%{} ({}) has no storage", id.0, node.op.name()))
                        })?;
                    let k =
                        if input.kind == kind::F16 { kind::F16 } else { stored_kind(node.ty.dtype, false, precision) };
                    Place { kind: k, ..input }
                }
            };
            places[id.index()] = Some(place);
        }
        places
            .into_iter()
            .enumerate()
            .map(|(i, p)| p.ok_or_else(|| Error::InvalidGraph(format!("%{i} has no storage"))))
            .collect()
    }
}

/// Device base addresses of a program's blocks.
#[derive(Clone, Debug)]
pub struct Bases {
    pub weights: u64,
    pub states: u64,
    pub arenas: Vec<u64>,
}

impl Bases {
    pub fn address(&self, place: &Place) -> u64 {
        let base = match place.block {
            Block::Weights => self.weights,
            Block::States => self.states,
            Block::Arena(i) => self.arenas[i],
        };
        base + place.offset as u64
    }
}

/// The place of node `id` of plan `plan` in `layout`.
pub fn place(layout: &ProgramLayout, plan: usize, id: NodeId) -> Place {
    layout.places[plan][id.index()]
}
