//! The fast CPU backend: the same plans as every backend, run with multi-threaded SIMD
//! kernels for the ops that carry the work (linear layers, attention, convolutions, norms,
//! elementwise programs, layout moves) and the core's reference evaluation for the rest.
//!
//! Compiling turns a plan into a list of `compile::Step`s with every operand a byte region
//! of the place the link layer gave it (the one arena the program's plans share, a weight, a
//! constant or a persistent buffer); a run copies the inputs into the arena, runs the steps
//! in order on a thread pool owned by the backend, and copies the requested outputs out.
//! Nothing is allocated per step except by reference steps (small ones: token selection
//! bookkeeping) and attention's score blocks.
//!
//! Weights stay as the model stores them (f16 for the released checkpoints): decoder steps
//! read them as f16 and widen on the fly; larger products widen a weight into scratch memory
//! first.

mod compile;
mod kernels;
mod memory;
mod pool;
pub mod simd;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use susurrus_core::exec::link::{Block, Leaf, Link, LinkedPlan, Needs, Place, StateBuffer, codec};
use susurrus_core::exec::{
    BlockingBackend, BlockingExecutable, Chain, Executable, Weights, check_chain, check_run_args,
};
use susurrus_core::ir::NodeId;
use susurrus_core::ops::{EvalCtx, Op};
use susurrus_core::plan::{Plan, PlanOptions};
use susurrus_core::tensor::Tensor;
use susurrus_core::{Error, Result};

use kernels::Step;
use kernels::{Kernel, Scratch};
use memory::{Bases, Region, tensor_base};
use pool::Pool;

/// The fast CPU backend.
pub struct FastCpuBackend {
    pool: Pool,
    profile: Option<Profile>,
}

/// Time spent per op, summed over runs (the core's, shared with CUDA and wgpu).
pub use susurrus_core::exec::Profile;

impl FastCpuBackend {
    /// A backend running on `threads` threads (default: one per core).
    pub fn new(threads: Option<usize>) -> Result<Self> {
        Ok(FastCpuBackend { pool: Pool::new(threads)?, profile: None })
    }

    /// Records the time of every step into `profile` (one clock read per step).
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = Some(profile);
        self
    }

    /// The threads kernels run on.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }
}

impl BlockingBackend for FastCpuBackend {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn compile_linked_now(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>> {
        self.build_linked(plans, weights)
    }
}

/// The memory the executables of one program share: one arena ([`Link::shared_arena`]) and
/// the persistent buffers. A run moves out what it uses and moves it back.
type Shared = Rc<RefCell<Buffers>>;

struct Buffers {
    /// The arena's blocks; `None` while a run holds it.
    arena: Option<Vec<Vec<u32>>>,
    /// Persistent buffers by link index, as 4-byte words (f16 ones rounded up to a whole
    /// word); `None` while a run holds one.
    states: Vec<Option<Vec<u32>>>,
}

impl FastCpuBackend {
    /// Places the program with the default plan options (f16 values as f16) and builds every
    /// plan's executable around its leaves (weights held once) and persistent buffers.
    fn build_linked(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>> {
        let needs = Needs { backend: self.name(), plan: PlanOptions::default(), wide_f16_leaves: false };
        let link = Link::new(plans, weights, &needs)?;
        let leaves: Vec<Arc<Tensor>> = link.leaves.iter().map(Leaf::shared).collect();
        let shared: Shared = Rc::new(RefCell::new(Buffers {
            arena: Some(link.shared_arena().iter().map(|&bytes| vec![0u32; bytes.div_ceil(4)]).collect()),
            states: link.states.iter().map(|s| Some(vec![0u32; s.bytes().div_ceil(4)])).collect(),
        }));
        link.plans.iter().map(|linked| self.build(&link, linked, &leaves, &shared)).collect()
    }

    fn build(
        &self,
        link: &Link,
        linked: &LinkedPlan,
        leaves: &[Arc<Tensor>],
        shared: &Shared,
    ) -> Result<Box<dyn Executable>> {
        let plan = linked.plan.as_ref();
        let mut inputs = Vec::new();
        for id in plan.graph.ids() {
            if let Op::Input(i) = &plan.graph.node(id).op {
                inputs.push((i.name.clone(), linked.place(id)));
            }
        }
        let mut outputs = HashMap::new();
        for (name, id) in plan.graph.outputs() {
            outputs.insert(name.clone(), (*id, linked.place(*id)));
        }
        let exe = FastCpuExecutable {
            plan: plan.clone(),
            arena_words: linked.arena.iter().map(|&bytes| bytes.div_ceil(4)).collect(),
            arena: Vec::new(),
            leaves: leaves.to_vec(),
            own_states: linked.states.iter().map(|&i| (i, link.states[i].clone())).collect(),
            states: vec![Vec::new(); link.states.len()],
            shared: Rc::clone(shared),
            steps: compile::steps(linked),
            inputs,
            outputs,
            scratch: Scratch::default(),
            pool: self.pool.clone(),
            profile: self.profile.clone(),
        };
        exe.check_regions()?;
        Ok(Box::new(exe))
    }
}

/// A plan compiled for the fast CPU backend.
struct FastCpuExecutable {
    plan: Plan,
    /// The 4-byte words of each of this plan's arena blocks (the shared arena's are at least
    /// as large).
    arena_words: Vec<usize>,
    /// During a run, the program's arena (moved out of `shared` and back), empty otherwise:
    /// blocks of 4-byte words, so every offset (a multiple of 256) is aligned for every dtype.
    arena: Vec<Vec<u32>>,
    /// The program's weights and constants, by link index.
    leaves: Vec<Arc<Tensor>>,
    /// The persistent buffers this plan declares, with their link index.
    own_states: Vec<(usize, StateBuffer)>,
    /// By link index: this plan's persistent buffers during a run (moved out of `shared` and
    /// back), empty otherwise.
    states: Vec<Vec<u32>>,
    shared: Shared,
    steps: Vec<Step>,
    /// Each input's place, where a run copies it (its type is checked by `check_run_args`).
    inputs: Vec<(String, Place)>,
    outputs: HashMap<String, (NodeId, Place)>,
    scratch: Scratch,
    pool: Pool,
    profile: Option<Profile>,
}

impl FastCpuExecutable {
    /// The blocks' base addresses for this run.
    fn bases(&mut self) -> Bases {
        let bytes = |v: &mut Vec<u32>| (v.as_mut_ptr().cast::<u8>(), v.len() * 4);
        Bases {
            arena: self.arena.iter_mut().map(bytes).collect(),
            states: self.states.iter_mut().map(bytes).collect(),
            leaves: self.leaves.iter().map(|t| tensor_base(t)).collect(),
        }
    }

    /// Checks once that every region of every step lies inside its block, so runs can
    /// index without checks. This plan's states are checked with their declared sizes; no
    /// region may lie in another plan's.
    fn check_regions(&self) -> Result<()> {
        let mut states = vec![(std::ptr::null_mut(), 0); self.states.len()];
        for (i, s) in &self.own_states {
            states[*i].1 = s.bytes().div_ceil(4) * 4;
        }
        let bases = Bases {
            arena: self.arena_words.iter().map(|&words| (std::ptr::null_mut(), words * 4)).collect(),
            states,
            leaves: self.leaves.iter().map(|t| (std::ptr::null(), t.as_bytes().len())).collect(),
        };
        let regions = self.steps.iter().flat_map(|s| s.input_regions.iter().copied().chain([s.out]));
        let io = self.inputs.iter().map(|i| Region::at(i.1)).chain(self.outputs.values().map(|o| Region::at(o.1)));
        for r in regions.chain(io) {
            if !bases.contains(r) || r.offset % 4 != 0 {
                return Err(Error::Backend(format!("cpu: region {r:?} lies outside its buffer")));
            }
        }
        Ok(())
    }

    /// Moves the arena and this plan's persistent buffers out of `shared` for a run (an error
    /// when another run holds them; nothing is taken then).
    fn take_buffers(&mut self) -> Result<()> {
        let mut shared = self.shared.borrow_mut();
        let busy = |what: &str| Error::Backend(format!("cpu: {what} is in use by another run"));
        if shared.arena.is_none() {
            return Err(busy("the arena"));
        }
        if let Some((_, s)) = self.own_states.iter().find(|(i, _)| shared.states.get(*i).is_none_or(Option::is_none)) {
            return Err(busy(&format!("persistent buffer '{}'", s.name)));
        }
        self.arena = shared.arena.take().unwrap_or_default();
        for (i, _) in &self.own_states {
            self.states[*i] = shared.states[*i].take().unwrap_or_default();
        }
        Ok(())
    }

    fn return_buffers(&mut self) {
        let mut shared = self.shared.borrow_mut();
        shared.arena = Some(std::mem::take(&mut self.arena));
        for (i, _) in &self.own_states {
            if let Some(slot) = shared.states.get_mut(*i) {
                *slot = Some(std::mem::take(&mut self.states[*i]));
            }
        }
    }

    fn execute(&mut self, inputs: &HashMap<String, Tensor>, scalars: &[u32]) -> Result<()> {
        for (name, place) in &self.inputs {
            let Block::Arena(k) = place.block else {
                return Err(Error::Backend(format!("cpu: input '{name}' is not in the arena")));
            };
            let bytes = codec::stored_bytes(&inputs[name], place.f16_words);
            let arena: &mut [u8] = bytemuck::cast_slice_mut(&mut self.arena[k]);
            arena[place.offset..place.offset + bytes.len()].copy_from_slice(&bytes);
        }
        let bases = self.bases();
        let threads = self.pool.threads();
        let (steps, plan, scratch, profile) = (&self.steps, &self.plan, &mut self.scratch, &self.profile);
        self.pool.install(|| {
            for step in steps {
                let started = profile.as_ref().map(|_| Instant::now());
                let op = &plan.graph.node(step.node).op;
                match step.kernel {
                    Kernel::Reference => reference(step, op, &bases, scalars)?,
                    _ => kernels::run(step, &bases, scalars, scratch, threads)?,
                }
                if let (Some(p), Some(t)) = (profile, started) {
                    let how = if matches!(step.kernel, Kernel::Reference) { "reference" } else { "fast" };
                    p.add(format!("{} {} ({how})", op.name(), step.out_type), t.elapsed());
                }
            }
            Ok(())
        })
    }

    fn read_outputs(&mut self, outputs: &[&str]) -> Result<HashMap<String, Tensor>> {
        let bases = self.bases();
        let mut out = HashMap::new();
        for &name in outputs {
            let (id, place) = self.outputs[name];
            // SAFETY: the region was checked at compile time; nothing writes during the read.
            let bytes = unsafe { bases.slice::<u8>(Region::at(place)) };
            out.insert(name.to_string(), codec::decode(bytes, self.plan.graph.ty(id), place.f16_words)?);
        }
        Ok(out)
    }
}

/// Runs `op`'s reference evaluation on copies of the step's inputs and stores the result
/// (a KV write's result is its whole buffer).
fn reference(step: &Step, op: &Op, bases: &Bases, scalars: &[u32]) -> Result<()> {
    let args = step
        .input_regions
        .iter()
        .zip(&step.input_types)
        // SAFETY: regions were checked at compile time; these reads end before the write.
        .map(|(r, ty)| Tensor::from_bytes(ty, unsafe { bases.slice::<u8>(*r) }))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&Tensor> = args.iter().collect();
    let empty = HashMap::new();
    let ctx = EvalCtx { inputs: &empty, weights: &empty, states: &empty, scalars };
    let value = op.eval(&refs, &ctx)?;
    if value.ty() != step.out_type {
        return Err(Error::InvalidGraph(format!(
            "%{} ({}) evaluated to {} but is typed {}",
            step.node.0,
            op.name(),
            value.ty(),
            step.out_type
        )));
    }
    if !step.out.writable() {
        return Ok(());
    }
    // SAFETY: the region was checked at compile time and the input copies are made.
    unsafe { bases.slice_mut::<u8>(step.out) }.copy_from_slice(value.as_bytes());
    Ok(())
}

impl BlockingExecutable for FastCpuExecutable {
    fn run_now(
        &mut self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
        outputs: &[&str],
    ) -> Result<HashMap<String, Tensor>> {
        check_run_args(&self.plan.graph, inputs, outputs)?;
        let scalar_values = self.plan.graph.scalar_values(scalars)?;
        self.take_buffers()?;
        let ran = self.execute(inputs, &scalar_values).and_then(|()| self.read_outputs(outputs));
        self.return_buffers();
        ran
    }

    fn read_state_now(&mut self, name: &str) -> Result<Tensor> {
        let (i, s) = self.own_states.iter().find(|(_, s)| s.name == name).ok_or_else(|| {
            Error::BadArgument(format!("graph '{}' has no persistent buffer '{name}'", self.plan.graph.name()))
        })?;
        let shared = self.shared.borrow();
        let words = shared
            .states
            .get(*i)
            .and_then(Option::as_ref)
            .ok_or_else(|| Error::Backend(format!("cpu: persistent buffer '{name}' is missing")))?;
        codec::decode(bytemuck::cast_slice(words), &s.ty, s.f16_words)
    }

    fn run_chain_now(&mut self, chain: Chain) -> Result<Vec<HashMap<String, Tensor>>> {
        check_chain(&self.plan.graph, &chain)?;
        self.chain_on_host_now(chain)
    }
}
