//! The CPU reference executor: runs a plan on a real arena with the ops' CPU references.
//!
//! It is deliberately plain: every value is read from the storage the planner gave it
//! (arena bytes, a weight, a constant or a persistent buffer), evaluated with
//! [`Op::eval`](crate::ops::Op::eval) and written back to its storage. Because intermediate
//! values exist only in the arena, a memory plan that lets two live values overlap gives
//! wrong numbers here, so comparing this executor with the interpreter
//! ([`crate::ir::evaluate`]) tests the planner too.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use super::{Backend, BoxFuture, Executable, Weights, check_supported, linked_states};
use crate::error::{Error, Result};
use crate::ir::{NodeId, TensorType};
use crate::ops::{EvalCtx, Op};
use crate::plan::{Plan, Storage};
use crate::tensor::Tensor;

/// The reference backend: supports every op.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn supports(&self, _op: &Op) -> bool {
        true
    }

    fn compile_linked<'a>(
        &'a self,
        plans: Vec<&'a Plan>,
        weights: &'a Weights,
    ) -> BoxFuture<'a, Vec<Box<dyn Executable>>> {
        Box::pin(std::future::ready(self.build_linked(&plans, weights)))
    }
}

impl CpuBackend {
    /// Builds every plan's executable around one set of persistent buffers.
    fn build_linked(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>> {
        let shared: Shared =
            Rc::new(RefCell::new(linked_states(plans)?.into_iter().map(|(n, ty)| (n, Tensor::zeros(&ty))).collect()));
        plans.iter().map(|plan| self.build(plan, weights, &shared)).collect()
    }

    /// Takes the weights and constants, and allocates the arena.
    fn build(&self, plan: &Plan, weights: &Weights, shared: &Shared) -> Result<Box<dyn Executable>> {
        check_supported(self, plan)?;
        let mut own_weights = HashMap::new();
        let mut consts = HashMap::new();
        let mut state_names = Vec::new();
        for id in plan.graph.ids() {
            match &plan.graph.node(id).op {
                Op::Param(p) => {
                    let w = weights
                        .get(&p.name)
                        .ok_or_else(|| Error::BadArgument(format!("weight '{}' was not supplied", p.name)))?;
                    w.expect_type(&p.ty, &format!("weight '{}'", p.name))?;
                    own_weights.insert(p.name.clone(), w.clone());
                }
                Op::Const(c) => {
                    consts.insert(id, Arc::clone(&c.value));
                }
                Op::State(s) => {
                    state_names.push(s.name.clone());
                }
                _ => {}
            }
        }
        // The arena is u32 words so that every offset (a multiple of 256) is 4-byte aligned.
        let arena = vec![0u32; plan.report.arena_bytes.div_ceil(4)];
        Ok(Box::new(CpuExecutable {
            plan: plan.clone(),
            arena,
            weights: own_weights,
            consts,
            states: HashMap::new(),
            state_names,
            shared: Rc::clone(shared),
        }))
    }
}

/// The persistent buffers of executables compiled together.
type Shared = Rc<RefCell<HashMap<String, Tensor>>>;

/// A plan prepared for the CPU: weights and constants held once, one arena allocated at
/// compile time that never grows, and the persistent buffers.
struct CpuExecutable {
    plan: Plan,
    arena: Vec<u32>,
    weights: HashMap<String, Tensor>,
    consts: HashMap<NodeId, Arc<Tensor>>,
    /// The persistent buffers this plan uses, taken out of `shared` for the length of a run
    /// (a move, not a copy) and put back after it.
    states: HashMap<String, Tensor>,
    state_names: Vec<String>,
    shared: Shared,
}

/// `t` seen as type `ty`: the same data, reshaped when a view (reshape) of it is read.
fn view<'a>(t: &'a Tensor, ty: &TensorType) -> Result<Cow<'a, Tensor>> {
    if &t.ty() == ty { Ok(Cow::Borrowed(t)) } else { Ok(Cow::Owned(t.clone().reshaped(ty.shape.clone())?)) }
}

/// An error for storage the executable should hold but does not (a plan and executable
/// that disagree, never user input).
fn not_held(what: &str, name: &str) -> Error {
    Error::Backend(format!("cpu executable holds no {what} '{name}'"))
}

impl CpuExecutable {
    fn arena_bytes(&self, offset: usize, size: usize) -> &[u8] {
        &bytemuck::cast_slice(&self.arena)[offset..offset + size]
    }

    /// The current value of node `id`, read from its storage.
    fn read(&self, id: NodeId) -> Result<Cow<'_, Tensor>> {
        let ty = self.plan.graph.ty(id);
        match &self.plan.storage[id.index()] {
            Storage::Arena { offset, size } => {
                Ok(Cow::Owned(Tensor::from_bytes(ty, self.arena_bytes(*offset, *size))?))
            }
            Storage::Param(name) => view(self.weights.get(name).ok_or_else(|| not_held("weight", name))?, ty),
            Storage::Const(c) => {
                view(self.consts.get(c).ok_or_else(|| not_held("constant", &format!("%{}", c.0)))?, ty)
            }
            Storage::State(name) => view(self.states.get(name).ok_or_else(|| not_held("persistent buffer", name))?, ty),
        }
    }

    /// Stores `value` as node `id`'s value. Weights and constants are read-only: a view of
    /// them already reads the right bytes, so only arena values and KV-cache writes store.
    fn write(&mut self, id: NodeId, value: &Tensor) -> Result<()> {
        match &self.plan.storage[id.index()] {
            Storage::Arena { offset, size } => {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.arena);
                bytes[*offset..*offset + *size].copy_from_slice(&value.to_bytes());
            }
            Storage::State(name) if matches!(self.plan.graph.node(id).op, Op::KvWrite(_)) => {
                let state = self.states.get_mut(name).ok_or_else(|| not_held("persistent buffer", name))?;
                *state = value.clone().reshaped(state.shape().clone())?;
            }
            Storage::Param(_) | Storage::Const(_) | Storage::State(_) => {}
        }
        Ok(())
    }

    /// Checks the run's arguments before anything is touched, so a bad call changes nothing.
    fn check_args(&self, inputs: &HashMap<String, Tensor>, outputs: &[&str]) -> Result<Vec<NodeId>> {
        let g = &self.plan.graph;
        let mut declared = Vec::new();
        for node in g.nodes() {
            if let Op::Input(i) = &node.op {
                let t = inputs
                    .get(&i.name)
                    .ok_or_else(|| Error::BadArgument(format!("input '{}' was not supplied", i.name)))?;
                t.expect_type(&i.ty, &format!("input '{}'", i.name))?;
                declared.push(i.name.as_str());
            }
        }
        let mut given: Vec<&String> = inputs.keys().collect();
        given.sort();
        if let Some(unknown) = given.into_iter().find(|k| !declared.contains(&k.as_str())) {
            return Err(Error::BadArgument(format!("input '{unknown}' is not used by graph '{}'", g.name())));
        }
        outputs
            .iter()
            .map(|&name| {
                g.outputs()
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|&(_, id)| id)
                    .ok_or_else(|| Error::BadArgument(format!("graph '{}' has no output '{name}'", g.name())))
            })
            .collect()
    }

    fn run_now(
        &mut self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
        outputs: &[&str],
    ) -> Result<HashMap<String, Tensor>> {
        let wanted = self.check_args(inputs, outputs)?;
        let scalar_values = self.plan.graph.scalar_values(scalars)?;
        let empty = HashMap::new();
        let ctx = EvalCtx { inputs: &empty, weights: &empty, states: &empty, scalars: &scalar_values };
        self.take_states()?;
        let ran = self.execute(inputs, &ctx);
        self.return_states();
        ran?;
        let mut out = HashMap::new();
        for (&name, id) in outputs.iter().zip(wanted) {
            out.insert(name.to_string(), self.read(id)?.into_owned());
        }
        Ok(out)
    }

    /// Moves this plan's persistent buffers out of the shared set for a run.
    fn take_states(&mut self) -> Result<()> {
        let mut shared = self.shared.borrow_mut();
        for name in &self.state_names {
            let t = shared.remove(name).ok_or_else(|| not_held("persistent buffer", name))?;
            self.states.insert(name.clone(), t);
        }
        Ok(())
    }

    /// Puts the persistent buffers back, for the next run of any linked executable.
    fn return_states(&mut self) {
        self.shared.borrow_mut().extend(self.states.drain());
    }

    /// Copies the inputs in, then runs every non-leaf node in schedule order.
    fn execute(&mut self, inputs: &HashMap<String, Tensor>, ctx: &EvalCtx) -> Result<()> {
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
                    let args = node.inputs.iter().map(|&i| self.read(i)).collect::<Result<Vec<_>>>()?;
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

impl Executable for CpuExecutable {
    fn run<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        outputs: &'a [&'a str],
    ) -> BoxFuture<'a, HashMap<String, Tensor>> {
        Box::pin(async move { self.run_now(inputs, scalars, outputs) })
    }

    fn read_state<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Tensor> {
        Box::pin(async move {
            self.shared.borrow().get(name).filter(|_| self.state_names.iter().any(|n| n == name)).cloned().ok_or_else(
                || Error::BadArgument(format!("graph '{}' has no persistent buffer '{name}'", self.plan.graph.name())),
            )
        })
    }

    fn run_repeatedly<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        times: usize,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for _ in 0..times {
                self.run_now(inputs, scalars, &[])?;
            }
            Ok(())
        })
    }
}
