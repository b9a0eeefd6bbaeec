//! The CPU reference executor: runs a plan on a real arena with the ops' CPU references.
//!
//! It is deliberately plain: every value is read from the place the link layer gave it
//! (arena bytes, a weight, a constant or a persistent buffer), evaluated with
//! [`Op::eval`](crate::ops::Op::eval) and written back to its place. Because intermediate
//! values exist only in the arena, a memory plan that lets two live values overlap gives
//! wrong numbers here, so comparing this executor with the interpreter
//! ([`crate::ir::evaluate`]) tests the planner too.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

use super::link::{Block, Leaf, Link, LinkedPlan, Needs, Place, codec};
use super::{BlockingBackend, BlockingExecutable, Chain, Executable, Weights, check_chain, check_run_args};
use crate::error::{Error, Result};
use crate::ir::{DType, NodeId, TensorType};
use crate::ops::{EvalCtx, Op};
use crate::plan::{Plan, PlanOptions, Storage};
use crate::tensor::Tensor;

/// The reference backend: runs every op with its reference evaluation.
#[derive(Clone, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend
    }
}

impl BlockingBackend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    /// Builds every plan's executable around the program's leaves (weights held once) and
    /// persistent buffers, placed by the link layer with the default plan options.
    fn compile_linked_now(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>> {
        let needs = Needs { backend: self.name(), plan: PlanOptions::default(), wide_f16_leaves: false };
        let link = Link::new(plans, weights, &needs)?;
        let leaves: Rc<[Arc<Tensor>]> = link.leaves.iter().map(Leaf::shared).collect();
        let shared: Shared = Rc::new(RefCell::new(link.states.iter().map(|s| Some(Tensor::zeros(&s.ty))).collect()));
        let mut widened = HashMap::new();
        link.plans.iter().map(|linked| self.build(&link, linked, weights, &leaves, &shared, &mut widened)).collect()
    }
}

impl CpuBackend {
    /// Widens f16 weights (into `widened`, shared by the linked executables) and allocates
    /// the arena's blocks.
    fn build(
        &self,
        link: &Link,
        linked: &LinkedPlan,
        weights: &Weights,
        leaves: &Rc<[Arc<Tensor>]>,
        shared: &Shared,
        widened: &mut HashMap<String, Arc<Tensor>>,
    ) -> Result<Box<dyn Executable>> {
        let plan = linked.plan.as_ref();
        let (wide_weights, wide_operands) = widen_f16_weights(plan, weights, widened);
        Ok(Box::new(CpuExecutable {
            plan: plan.clone(),
            places: linked.places.clone(),
            // u32 words, so that every offset (a multiple of 256) is 4-byte aligned.
            arena: linked.arena.iter().map(|&bytes| vec![0u32; bytes.div_ceil(4)]).collect(),
            leaves: Rc::clone(leaves),
            wide_weights,
            wide_operands,
            own_states: linked.states.iter().map(|&i| (i, link.states[i].name.clone())).collect(),
            states: HashMap::new(),
            shared: Rc::clone(shared),
        }))
    }
}

/// Input `.1` of node `.0`.
type Operand = (NodeId, usize);

/// f32 copies of the f16 weights, made once at compile time rather than by every evaluation
/// that reads them (the 384 x 51864 logits weight alone is 40 MB of f16), and the operands
/// (consumer, input position) that read the copy. Copies come from `widened` when a linked
/// executable made them already, and are added there otherwise.
///
/// Widening f16 is exact, and evaluations compute in f32 from the values alone, so an
/// operand reads the copy wherever its op infers the same output type from an f32 operand
/// there: a matmul's weight, a bias, a gamma. Where the dtype decides the result's type (a
/// gather's table gives an f16 output), the operand reads the f16 weight as declared.
fn widen_f16_weights(
    plan: &Plan,
    weights: &HashMap<String, Tensor>,
    widened: &mut HashMap<String, Arc<Tensor>>,
) -> (HashMap<String, Arc<Tensor>>, HashSet<Operand>) {
    let g = &plan.graph;
    let mut wide = HashMap::new();
    let mut operands = HashSet::new();
    for id in g.ids() {
        let node = g.node(id);
        if node.op.is_leaf() {
            continue;
        }
        for (pos, &input) in node.inputs.iter().enumerate() {
            let Storage::Param(name) = &plan.storage[input.index()] else { continue };
            let Some(w) = weights.get(name).filter(|w| w.dtype() == DType::F16 && w.shape() == &g.ty(input).shape)
            else {
                continue;
            };
            let mut tys: Vec<TensorType> = node.inputs.iter().map(|&i| g.ty(i).clone()).collect();
            tys[pos].dtype = DType::F32;
            if node.op.infer(&tys.iter().collect::<Vec<_>>()).ok().as_ref() == Some(&node.ty) {
                operands.insert((id, pos));
                let copy = widened.entry(name.clone()).or_insert_with(|| Arc::new(w.f32_widened()));
                wide.insert(name.clone(), Arc::clone(copy));
            }
        }
    }
    (wide, operands)
}

/// The persistent buffers of executables compiled together, by link index (`None` while a
/// run holds one).
type Shared = Rc<RefCell<Vec<Option<Tensor>>>>;

/// A plan prepared for the CPU: the program's weights and constants held once, an arena
/// allocated at compile time that never grows, and the persistent buffers.
struct CpuExecutable {
    plan: Plan,
    /// Every node's place, by node id.
    places: Vec<Place>,
    /// The arena's blocks.
    arena: Vec<Vec<u32>>,
    /// The program's weights and constants, by link index.
    leaves: Rc<[Arc<Tensor>]>,
    /// f32 copies of f16 weights, read by the operands in `wide_operands` (see
    /// [`widen_f16_weights`]).
    wide_weights: HashMap<String, Arc<Tensor>>,
    wide_operands: HashSet<Operand>,
    /// The persistent buffers this plan declares: link index and name.
    own_states: Vec<(usize, String)>,
    /// Those buffers, taken out of `shared` for the length of a run (a move, not a copy) and
    /// put back after it.
    states: HashMap<usize, Tensor>,
    shared: Shared,
}

/// `t` seen with `ty`'s shape: the same data, reshaped when a view (reshape) of it is read.
/// (Its dtype is `ty`'s, or f32 for a widened f16 weight.)
fn view<'a>(t: &'a Tensor, ty: &TensorType) -> Result<Cow<'a, Tensor>> {
    if t.shape() == &ty.shape { Ok(Cow::Borrowed(t)) } else { Ok(Cow::Owned(t.clone().reshaped(ty.shape.clone())?)) }
}

/// An error for storage the executable should hold but does not (a plan and executable
/// that disagree, never user input).
fn not_held(what: &str, name: &str) -> Error {
    Error::Backend(format!("cpu executable holds no {what} '{name}'"))
}

impl CpuExecutable {
    /// The persistent buffer `state` of this run.
    fn state(&self, state: usize) -> Result<&Tensor> {
        self.states.get(&state).ok_or_else(|| not_held("persistent buffer", &self.state_name(state)))
    }

    fn state_name(&self, state: usize) -> String {
        self.own_states.iter().find(|(i, _)| *i == state).map_or_else(|| format!("#{state}"), |(_, n)| n.clone())
    }

    /// The current value of node `id`, read from its place.
    fn read(&self, id: NodeId) -> Result<Cow<'_, Tensor>> {
        let ty = self.plan.graph.ty(id);
        let place = self.places[id.index()];
        match place.block {
            Block::Arena(b) => {
                let bytes: &[u8] = bytemuck::cast_slice(&self.arena[b]);
                Ok(Cow::Owned(codec::decode(&bytes[place.offset..place.offset + place.bytes], ty, place.f16_words)?))
            }
            Block::Leaf(i) => view(self.leaves.get(i).ok_or_else(|| not_held("leaf", &format!("#{i}")))?, ty),
            Block::State(i) => view(self.state(i)?, ty),
        }
    }

    /// Input `pos` of node `id`, which is node `input`: the f32 copy of an f16 weight where
    /// [`widen_f16_weights`] chose it, else [`CpuExecutable::read`].
    fn read_operand(&self, id: NodeId, pos: usize, input: NodeId) -> Result<Cow<'_, Tensor>> {
        if self.wide_operands.contains(&(id, pos))
            && let Storage::Param(name) = &self.plan.storage[input.index()]
        {
            let w = self.wide_weights.get(name).ok_or_else(|| not_held("widened weight", name))?;
            return view(w, self.plan.graph.ty(input));
        }
        self.read(input)
    }

    /// Stores `value` as node `id`'s value. Weights and constants are read-only: a view of
    /// them already reads the right bytes, so only arena values and KV-cache writes store.
    fn write(&mut self, id: NodeId, value: &Tensor) -> Result<()> {
        let place = self.places[id.index()];
        match place.block {
            Block::Arena(b) => {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.arena[b]);
                bytes[place.offset..place.offset + place.bytes]
                    .copy_from_slice(&codec::stored_bytes(value, place.f16_words));
            }
            Block::State(i) if matches!(self.plan.graph.node(id).op, Op::KvWrite(_)) => {
                let name = self.state_name(i);
                let state = self.states.get_mut(&i).ok_or_else(|| not_held("persistent buffer", &name))?;
                *state = value.clone().reshaped(state.shape().clone())?;
            }
            Block::Leaf(_) | Block::State(_) => {}
        }
        Ok(())
    }

    /// Moves this plan's persistent buffers out of the shared set for a run.
    fn take_states(&mut self) -> Result<()> {
        let mut shared = self.shared.borrow_mut();
        for (i, name) in &self.own_states {
            let t = shared.get_mut(*i).and_then(Option::take).ok_or_else(|| not_held("persistent buffer", name))?;
            self.states.insert(*i, t);
        }
        Ok(())
    }

    /// Puts the persistent buffers back, for the next run of any linked executable.
    fn return_states(&mut self) {
        let mut shared = self.shared.borrow_mut();
        for (i, t) in self.states.drain() {
            if let Some(slot) = shared.get_mut(i) {
                *slot = Some(t);
            }
        }
    }

    /// Copies the inputs in, then runs every non-leaf node in schedule order.
    fn execute(&mut self, inputs: &HashMap<String, Tensor>, ctx: &EvalCtx<'_>) -> Result<()> {
        for step in 0..self.plan.schedule.len() {
            let id = self.plan.schedule[step];
            if let Op::Input(i) = &self.plan.graph.node(id).op {
                let value = inputs.get(&i.name).ok_or_else(|| not_held("input", &i.name))?;
                self.write(id, value)?;
            }
        }
        for step in 0..self.plan.schedule.len() {
            let id = self.plan.schedule[step];
            let node = self.plan.graph.node(id);
            let value = match &node.op {
                Op::ScalarRead(s) => {
                    let v =
                        ctx.scalars.get(s.scalar.index()).ok_or_else(|| not_held("scalar", &s.scalar.0.to_string()))?;
                    Tensor::u32([], vec![*v])?
                }
                op if op.is_leaf() => continue,
                op => {
                    let args = node
                        .inputs
                        .iter()
                        .enumerate()
                        .map(|(pos, &i)| self.read_operand(id, pos, i))
                        .collect::<Result<Vec<_>>>()?;
                    let refs: Vec<&Tensor> = args.iter().map(|a| a.as_ref()).collect();
                    let value = op.eval(&refs, ctx)?;
                    if value.ty() != node.ty {
                        return Err(Error::InvalidGraph(format!(
                            "%{} ({}) evaluated to {} but is typed {}",
                            id.0,
                            op.name(),
                            value.ty(),
                            node.ty
                        )));
                    }
                    value
                }
            };
            self.write(id, &value)?;
        }
        Ok(())
    }
}

impl BlockingExecutable for CpuExecutable {
    fn run_now(
        &mut self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
        outputs: &[&str],
    ) -> Result<HashMap<String, Tensor>> {
        let wanted = check_run_args(&self.plan.graph, inputs, outputs)?;
        let scalar_values = self.plan.graph.scalar_values(scalars)?;
        let empty = HashMap::new();
        let ctx = EvalCtx { inputs: &empty, weights: &empty, states: &empty, scalars: &scalar_values };
        self.take_states()?;
        let ran = self.execute(inputs, &ctx).and_then(|()| {
            let mut out = HashMap::new();
            for (&name, id) in outputs.iter().zip(wanted) {
                out.insert(name.to_string(), self.read(id)?.into_owned());
            }
            Ok(out)
        });
        self.return_states();
        ran
    }

    fn read_state_now(&mut self, name: &str) -> Result<Tensor> {
        let own = self.own_states.iter().find(|(_, n)| n == name);
        own.and_then(|(i, _)| self.shared.borrow().get(*i).cloned().flatten()).ok_or_else(|| {
            Error::BadArgument(format!("graph '{}' has no persistent buffer '{name}'", self.plan.graph.name()))
        })
    }

    fn run_chain_now(&mut self, chain: Chain) -> Result<Vec<HashMap<String, Tensor>>> {
        check_chain(&self.plan.graph, &chain)?;
        self.chain_on_host_now(chain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Backend;
    use crate::ir::{Graph, evaluate};

    #[test]
    fn f16_weights_are_widened_only_where_the_dtype_does_not_type_the_result() {
        // One f16 table used as a matmul weight (read widened) and by a gather, whose output
        // is f16 because the table is (read as declared).
        let mut g = Graph::new("tied");
        let x = g.input("x", TensorType::new(DType::F32, [2, 3])).unwrap();
        let ids = g.input("ids", TensorType::new(DType::I32, [2])).unwrap();
        let table = g.param("table", TensorType::new(DType::F16, [4, 3])).unwrap();
        let logits = g.matmul_t(x, table).unwrap();
        let rows = g.gather(table, ids).unwrap();
        g.output("logits", logits).unwrap();
        g.output("rows", rows).unwrap();
        let plan = crate::plan::plan(g.clone()).unwrap();
        // 0.1 is 0.0999755859375 in f16: the widened copy must hold that value.
        let values = vec![0.1, 1.0, -2.0, 0.5, 0.25, 3.0, -1.0, 0.0, 2.0, 1.5, -0.5, 0.75];
        let weights = HashMap::from([("table".to_string(), Tensor::from_f32(DType::F16, [4, 3], values).unwrap())]);
        let inputs = HashMap::from([
            ("x".to_string(), Tensor::f32([2, 3], vec![1.0, 2.0, 3.0, -1.0, 0.5, 2.0]).unwrap()),
            ("ids".to_string(), Tensor::i32([2], vec![3, 0]).unwrap()),
        ]);

        let (wide, operands) = widen_f16_weights(&plan, &weights, &mut HashMap::new());
        assert_eq!(wide["table"].to_f32(), weights["table"].to_f32());
        assert_eq!(wide["table"].dtype(), DType::F32);
        let (matmul, gather) = (plan.graph.outputs()[0].1, plan.graph.outputs()[1].1);
        assert_eq!(operands, HashSet::from([(matmul, 1)]), "the gather ({gather:?}) reads the f16 table");

        let mut exe = pollster::block_on(CpuBackend::new().compile(&plan, &weights)).unwrap();
        let got = pollster::block_on(exe.run(&inputs, &HashMap::new(), &["logits", "rows"])).unwrap();
        let want = evaluate(&g, &inputs, &weights, &HashMap::new(), &HashMap::new()).unwrap();
        assert_eq!(got["logits"], want.outputs["logits"]);
        assert_eq!(got["rows"], want.outputs["rows"]);
        assert_eq!(got["rows"].dtype(), DType::F16);
        // Row 0 of x against row 0 of the table: 0.0999755859375 + 2 - 6.
        assert_eq!(got["logits"].to_f32()[0], 0.099_975_586 + 2.0 - 6.0);
    }
}
