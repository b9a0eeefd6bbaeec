//! [`Link::new`](super::Link::new): leaves and persistent buffers of the whole program first
//! seen, then every node of every plan placed, in plan and node order.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::codec;
use super::{Block, Leaf, LeafValue, Link, LinkedPlan, MAX_RUNTIME_SCALARS, Needs, Place, StateBuffer};
use crate::error::{Error, Result};
use crate::exec::Weights;
use crate::ir::{DType, NodeId, TensorType};
use crate::ops::{Const, Op, Param};
use crate::passes::split_weights::{BufferLimit, WeightRows, split_weights};
use crate::plan::{Plan, Storage, plan_with};
use crate::tensor::Tensor;

pub(super) fn link<'w>(plans: &[&'w Plan], weights: &'w Weights, needs: &Needs) -> Result<Link<'w>> {
    let f16_words = match needs.plan.f16_bytes {
        2 => false,
        4 => true,
        n => {
            return Err(Error::Backend(format!(
                "{}: an f16 value cannot take {n} bytes (2 as f16, 4 as an f32 word)",
                needs.backend
            )));
        }
    };
    if needs.plan.max_buffer_bytes == 0 {
        return Err(Error::Backend(format!("{}: arena blocks cannot be empty", needs.backend)));
    }
    let states = states(plans, f16_words)?;
    let mut linker = Linker {
        needs,
        weights,
        f16_words,
        state_index: states.iter().enumerate().map(|(i, s)| (s.name.clone(), i)).collect(),
        states,
        leaves: Vec::new(),
        weight_leaf: HashMap::new(),
        rows: HashMap::new(),
    };
    let plans = plans.iter().map(|plan| linker.plan(plan)).collect::<Result<_>>()?;
    // No block above the limit: weights were split into rows, arenas into blocks; a constant
    // or persistent buffer that large has no split.
    let limit = needs.plan.max_buffer_bytes;
    let leaves = linker.leaves.iter().map(|l| (l.label(), l.bytes()));
    let states = linker.states.iter().map(|s| (s.name.as_str(), s.bytes()));
    if let Some((name, bytes)) = leaves.chain(states).find(|&(_, bytes)| bytes > limit) {
        return Err(Error::Unsupported {
            op: format!("'{name}' of {bytes} bytes, more than one buffer's {limit},"),
            backend: needs.backend.to_string(),
        });
    }
    Ok(Link { leaves: linker.leaves, states: linker.states, plans })
}

/// The persistent buffers of `plans` in the order they are first declared, or an error naming
/// a buffer that two plans declare with different types.
fn states(plans: &[&Plan], f16_words: bool) -> Result<Vec<StateBuffer>> {
    let mut states: Vec<StateBuffer> = Vec::new();
    for plan in plans {
        for node in plan.graph.nodes() {
            let Op::State(s) = &node.op else { continue };
            match states.iter().find(|known| known.name == s.name) {
                Some(known) if known.ty != s.ty => {
                    return Err(Error::BadArgument(format!(
                        "persistent buffer '{}' is {} in one graph and {} in '{}'",
                        s.name,
                        known.ty,
                        s.ty,
                        plan.graph.name()
                    )));
                }
                Some(_) => {}
                None => states.push(StateBuffer {
                    name: s.name.clone(),
                    ty: s.ty.clone(),
                    f16_words: f16_words && s.ty.dtype == DType::F16,
                }),
            }
        }
    }
    Ok(states)
}

/// The weight `p` names, checked against its declared type.
fn supplied_weight<'w>(weights: &'w Weights, p: &Param) -> Result<&'w Tensor> {
    let w = weights.get(&p.name).ok_or_else(|| Error::BadArgument(format!("weight '{}' was not supplied", p.name)))?;
    w.expect_type(&p.ty, &format!("weight '{}'", p.name))?;
    Ok(w)
}

/// Bytes of each arena block: `bytes` cut at every multiple of `limit`, at least one block.
fn arena_blocks(bytes: usize, limit: usize) -> Vec<usize> {
    let blocks = bytes.div_ceil(limit).max(1);
    (0..blocks).map(|k| (bytes - k * limit).min(limit)).collect()
}

/// The program's leaves and persistent buffers while plans are placed.
struct Linker<'n, 'w> {
    needs: &'n Needs,
    weights: &'w Weights,
    /// f16 values of arenas and persistent buffers are f32 words.
    f16_words: bool,
    states: Vec<StateBuffer>,
    state_index: HashMap<String, usize>,
    leaves: Vec<Leaf<'w>>,
    weight_leaf: HashMap<String, usize>,
    /// The row blocks of weights too large for one block, by block name.
    rows: HashMap<String, WeightRows>,
}

impl<'w> Linker<'_, 'w> {
    fn plan(&mut self, given: &'w Plan) -> Result<LinkedPlan<'w>> {
        let g = &given.graph;
        if g.scalars().len() > MAX_RUNTIME_SCALARS {
            return Err(Error::Unsupported {
                op: format!(
                    "graph '{}' with {} runtime scalars (at most {MAX_RUNTIME_SCALARS})",
                    g.name(),
                    g.scalars().len()
                ),
                backend: self.needs.backend.to_string(),
            });
        }
        let wide = self.needs.wide_f16_leaves;
        let stored = |ty: &TensorType| codec::stored_size(ty, wide && ty.dtype == DType::F16);
        let limit =
            BufferLimit { backend: self.needs.backend, bytes: self.needs.plan.max_buffer_bytes, stored: &stored };
        let plan = match split_weights(g, &limit)? {
            Some((split, rows)) => {
                self.rows.extend(rows.into_iter().map(|r| (r.name.clone(), r)));
                Cow::Owned(plan_with(split, &self.needs.plan)?)
            }
            None if given.options == self.needs.plan => Cow::Borrowed(given),
            None => Cow::Owned(plan_with(g.clone(), &self.needs.plan)?),
        };
        let arena = arena_blocks(plan.report.arena_bytes, plan.options.max_buffer_bytes);
        let mut places: Vec<Place> = Vec::with_capacity(g.len());
        let mut states = Vec::new();
        for id in plan.graph.ids() {
            let node = plan.graph.node(id);
            let place = match (&plan.storage[id.index()], &node.op) {
                (Storage::Arena { offset, size }, _) => self.arena_place(&plan, &arena, id, *offset, *size)?,
                (Storage::Param(_), Op::Param(p)) => self.weight(p)?,
                (Storage::Const(c), Op::Const(value)) if *c == id => self.constant(value),
                (Storage::State(name), Op::State(_)) => {
                    let index = *self
                        .state_index
                        .get(name)
                        .ok_or_else(|| Error::InvalidGraph(format!("persistent buffer '{name}' was not linked")))?;
                    states.push(index);
                    let s = &self.states[index];
                    Place {
                        block: Block::State(index),
                        offset: 0,
                        bytes: s.bytes(),
                        dtype: s.ty.dtype,
                        f16_words: s.f16_words,
                    }
                }
                // Views and cache writes share their input's bytes.
                _ => {
                    let input =
                        node.inputs.first().and_then(|i| places.get(i.index())).copied().ok_or_else(|| {
                            Error::InvalidGraph(format!("%{} ({}) has no storage", id.0, node.op.name()))
                        })?;
                    Place { dtype: node.ty.dtype, ..input }
                }
            };
            places.push(place);
        }
        Ok(LinkedPlan { plan, arena, places, states })
    }

    /// The place of an arena value, checked to lie inside one block.
    fn arena_place(&self, plan: &Plan, arena: &[usize], id: NodeId, offset: usize, size: usize) -> Result<Place> {
        let ty = plan.graph.ty(id);
        let here = || format!("graph '{}': %{}", plan.graph.name(), id.0);
        let want = plan.options.value_bytes(ty);
        if size != want {
            return Err(Error::InvalidGraph(format!("{}: a {ty} value of {want} bytes is given {size}", here())));
        }
        let limit = plan.options.max_buffer_bytes;
        let (block, within) = (offset / limit, offset % limit);
        let fits = matches!((arena.get(block), within.checked_add(size)), (Some(&b), Some(end)) if end <= b);
        if !fits {
            return Err(Error::InvalidGraph(format!(
                "{}: bytes {offset}..{} do not lie in one arena block of {limit} bytes",
                here(),
                offset.saturating_add(size)
            )));
        }
        let dtype = ty.dtype;
        Ok(Place {
            block: Block::Arena(block),
            offset: within,
            bytes: size,
            dtype,
            f16_words: self.f16_words && dtype == DType::F16,
        })
    }

    /// The place of weight `p`, a new leaf the first time its name is seen (rows cut from the
    /// supplied weight, once, for a block of a split one).
    fn weight(&mut self, p: &Param) -> Result<Place> {
        if let Some(&leaf) = self.weight_leaf.get(&p.name) {
            // Every plan's declaration is checked against what the leaf holds.
            self.leaves[leaf].tensor().expect_type(&p.ty, &format!("weight '{}'", p.name))?;
            return Ok(self.leaf_place(leaf));
        }
        let (value, dtype) = match self.rows.get(&p.name) {
            Some(rows) => {
                let whole = self
                    .weights
                    .get(&rows.of)
                    .ok_or_else(|| Error::BadArgument(format!("weight '{}' was not supplied", rows.of)))?;
                let tensor = rows.cut(whole)?;
                tensor.expect_type(&p.ty, &format!("weight '{}'", p.name))?;
                let dtype = tensor.dtype();
                (LeafValue::Rows { name: p.name.clone(), tensor: Arc::new(tensor) }, dtype)
            }
            None => {
                let tensor = supplied_weight(self.weights, p)?;
                (LeafValue::Weight { name: p.name.clone(), tensor }, tensor.dtype())
            }
        };
        let leaf = self.push_leaf(value, dtype);
        self.weight_leaf.insert(p.name.clone(), leaf);
        Ok(self.leaf_place(leaf))
    }

    /// The place of a constant: a leaf of its own.
    fn constant(&mut self, c: &Const) -> Place {
        let leaf = self.push_leaf(LeafValue::Const(Arc::clone(&c.value)), c.value.dtype());
        self.leaf_place(leaf)
    }

    fn push_leaf(&mut self, value: LeafValue<'w>, dtype: DType) -> usize {
        let f16_words = self.needs.wide_f16_leaves && dtype == DType::F16;
        self.leaves.push(Leaf { value, f16_words });
        self.leaves.len() - 1
    }

    fn leaf_place(&self, leaf: usize) -> Place {
        let l = &self.leaves[leaf];
        Place {
            block: Block::Leaf(leaf),
            offset: 0,
            bytes: l.bytes(),
            dtype: l.tensor().dtype(),
            f16_words: l.f16_words,
        }
    }
}
