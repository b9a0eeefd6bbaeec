//! Backends: compile a [`Plan`] once, run it many times.
//!
//! The trait is small on purpose. A backend compiles a plan into an [`Executable`] that holds
//! the uploaded weights, the arena and the persistent buffers; every backend lowers every op
//! (its lowering is an exhaustive match), and what one cannot run at some size is an error
//! naming the op when the plan compiles. `run` returns a future of only the outputs asked for: in the browser GPU readback
//! is asynchronous, natively callers block on it (e.g. with `pollster`). Nothing here has a
//! default that silently does nothing.
//!
//! Where every value lives is decided once for all backends by [`link`]; a backend allocates
//! the blocks it names, uploads the leaves and lowers its ops on the places.
//!
//! Two adapters spare implementers the forwarding: a backend whose work finishes before it
//! returns implements [`BlockingBackend`] / [`BlockingExecutable`] and gets the traits from
//! blanket impls; a wrapper that changes one thing about another backend (paces its runs,
//! fails them on purpose) says what in a [`Wrap`] and is a [`Wrapped`] backend.

pub mod cpu;
pub mod index;
pub mod link;
mod profile;
mod wrap;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use crate::error::{Error, Result};
use crate::ops::Op;
use crate::plan::Plan;
use crate::tensor::Tensor;
pub use crate::tensor::Weights;
pub use profile::Profile;
pub use wrap::{Call, Wrap, Wrapped, WrappedExecutable};

/// A boxed future returned by executables (not `Send`: browser futures are not).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + 'a>>;

/// A device that can run plans.
pub trait Backend {
    /// Short name for messages and tables (`cpu`, `wgpu`, ...).
    fn name(&self) -> &'static str;
    /// Prepares `plans` to run as one program: uploads weights and constants, allocates each
    /// plan's arena and the persistent buffers, where [`link::Link`] places them. The
    /// executables (one per plan, in order) share the weights, uploaded once, and the
    /// persistent buffers, by name: what one writes the next reads (an encoder graph fills the
    /// cross-attention keys that the decoder graphs read). Fails with an error naming the op
    /// when one cannot run as planned (a limit of the device) or a graph with too many runtime
    /// scalars, or with [`Error::BadArgument`] when a weight is missing or mistyped, or when
    /// two plans declare one persistent buffer with different types.
    fn compile_linked<'a>(
        &'a self,
        plans: Vec<&'a Plan>,
        weights: &'a Weights,
    ) -> BoxFuture<'a, Vec<Box<dyn Executable>>>;

    /// True when matrix products (matmul, matmul + bias, conv1d, attention) round their
    /// inputs to f16 and accumulate in f32, as matrix units do (the wgpu backend on
    /// cooperative matrices); false when they compute in f32 from the values as stored.
    fn f16_products(&self) -> bool {
        false
    }

    /// The same device with every matrix product in f32 arithmetic, for a network whose
    /// thresholds need the reference's precision (the VAD network's probabilities); `None`
    /// where the products already are f32.
    fn with_f32_products(&self) -> Option<Box<dyn Backend>> {
        None
    }

    /// A new device of the same kind, chosen as this one was, for when this one is lost
    /// ([`Error::DeviceLost`]: a driver reset, a browser reclaiming the GPU, `destroy()`):
    /// what a transcription compiles its program on again to resume. A backend whose device
    /// cannot be lost (the CPU executors) answers with an error saying so.
    fn reopen(&self) -> BoxFuture<'_, Box<dyn Backend>> {
        let name = self.name();
        Box::pin(std::future::ready(Err(Error::Backend(format!("the {name} backend cannot open its device again")))))
    }

    /// Loses the device on purpose, as a driver reset would (wgpu: `Device::destroy`; CUDA:
    /// a kernel that traps): how the device-loss suites force one in the middle of a
    /// transcription, in the library and through the command. A backend whose device cannot
    /// be lost (the CPU executors) answers with an error saying so.
    fn lose_device(&self) -> Result<()> {
        Err(Error::Backend(format!("the {} backend has no device to lose", self.name())))
    }

    /// Prepares one plan to run (see [`Backend::compile_linked`]).
    fn compile<'a>(&'a self, plan: &'a Plan, weights: &'a Weights) -> BoxFuture<'a, Box<dyn Executable>> {
        Box::pin(async move {
            let mut executables = self.compile_linked(vec![plan], weights).await?;
            executables.pop().ok_or_else(|| Error::Backend(format!("{} compiled no executable", self.name())))
        })
    }
}

/// A compiled plan.
pub trait Executable {
    /// Runs the plan with these inputs and runtime scalars and returns the named outputs.
    /// Inputs and scalars are checked against the graph (missing, unknown or mistyped ones
    /// are [`Error::BadArgument`]); persistent buffers keep what the run wrote.
    fn run<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        outputs: &'a [&'a str],
    ) -> BoxFuture<'a, HashMap<String, Tensor>>;

    /// The current contents of the persistent buffer `name`.
    fn read_state<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Tensor>;

    /// Runs the plan `times` times back to back without reading outputs, and resolves when
    /// the device has finished: what benchmarks time.
    fn run_repeatedly<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        times: usize,
    ) -> BoxFuture<'a, ()>;

    /// Runs the plan once per entry of `chain.scalars`, back to back, each run's `feeds`
    /// outputs becoming the next run's inputs, and returns every run's `outputs`. A GPU
    /// queues all the runs without waiting and reads everything back once: a decoder
    /// step's chosen token feeds the next step without a round trip through the host. Checked
    /// like [`Executable::run`], and every feed must join an output and an input of one type.
    fn run_chain<'a>(&'a mut self, chain: Chain<'a>) -> BoxFuture<'a, Vec<HashMap<String, Tensor>>>;

    /// The kernel launches one run makes (wgpu: its dispatches), where the backend records
    /// them ahead; what a decoder step's fusion and splitting change. `None` elsewhere.
    fn launches(&self) -> Option<usize> {
        None
    }

    /// True when [`Executable::run_chain`] feeds runs on the device (a GPU, one readback),
    /// false when it runs them one by one through the host ([`chain_on_host`]), where a chain
    /// saves nothing and runs past a stopping point are wasted.
    fn feeds_on_device(&self) -> bool {
        false
    }
}

/// Runs of one plan chained through their outputs ([`Executable::run_chain`]).
#[derive(Clone, Copy, Debug)]
pub struct Chain<'a> {
    /// The inputs of the first run (and of every later run, but for the fed ones).
    pub inputs: &'a HashMap<String, Tensor>,
    /// Each run's runtime scalars, in order: one entry per run.
    pub scalars: &'a [HashMap<String, u32>],
    /// `(output, input)` pairs: a run's `output` is the next run's `input`.
    pub feeds: &'a [(&'a str, &'a str)],
    /// The outputs read back from every run.
    pub outputs: &'a [&'a str],
}

/// Checks a chain against `graph` before anything runs: the first run's arguments as
/// [`check_run_args`] does, at least one run, and each feed from a declared output to a
/// declared input of the same type. Returns the feeds' `(output, input)` nodes.
pub fn check_chain(graph: &crate::ir::Graph, chain: &Chain) -> Result<Vec<(crate::ir::NodeId, crate::ir::NodeId)>> {
    check_run_args(graph, chain.inputs, chain.outputs)?;
    if chain.scalars.is_empty() {
        return Err(Error::BadArgument(format!("a chain of runs of graph '{}' needs at least one run", graph.name())));
    }
    chain
        .feeds
        .iter()
        .map(|&(from, to)| {
            let out = graph.outputs().iter().find(|(name, _)| name == from).map(|&(_, id)| id).ok_or_else(|| {
                Error::BadArgument(format!("graph '{}' has no output '{from}' to feed", graph.name()))
            })?;
            let input = graph
                .ids()
                .find(|&id| matches!(&graph.node(id).op, Op::Input(i) if i.name == to))
                .ok_or_else(|| Error::BadArgument(format!("graph '{}' has no input '{to}' to feed", graph.name())))?;
            if graph.ty(out) != graph.ty(input) {
                return Err(Error::BadArgument(format!(
                    "output '{from}' ({}) cannot feed input '{to}' ({})",
                    graph.ty(out),
                    graph.ty(input)
                )));
            }
            Ok((out, input))
        })
        .collect()
}

/// The outputs a chain's runs must produce: the wanted ones and the feeds' sources.
fn chain_outputs<'a>(chain: &Chain<'a>) -> Vec<&'a str> {
    let mut wanted = chain.outputs.to_vec();
    wanted.extend(chain.feeds.iter().map(|&(from, _)| from).filter(|from| !chain.outputs.contains(from)));
    wanted
}

/// Moves one run's fed outputs into the next run's inputs and keeps only the wanted outputs.
fn feed_on_host(chain: &Chain, out: &mut HashMap<String, Tensor>, inputs: &mut HashMap<String, Tensor>) {
    for &(from, to) in chain.feeds {
        if let Some(t) = out.get(from) {
            inputs.insert(to.to_string(), t.clone());
        }
    }
    out.retain(|name, _| chain.outputs.contains(&name.as_str()));
}

/// [`Executable::run_chain`] run by run, fed through the host: for executables whose runs
/// cannot be recorded together (profiled runs); blocking ones (the CPU backends) have
/// [`BlockingExecutable::chain_on_host_now`]. The caller has checked the chain with
/// [`check_chain`].
pub async fn chain_on_host(exe: &mut dyn Executable, chain: Chain<'_>) -> Result<Vec<HashMap<String, Tensor>>> {
    let wanted = chain_outputs(&chain);
    let mut inputs = chain.inputs.clone();
    let mut results = Vec::with_capacity(chain.scalars.len());
    for scalars in chain.scalars {
        let mut out = exe.run(&inputs, scalars, &wanted).await?;
        feed_on_host(&chain, &mut out, &mut inputs);
        results.push(out);
    }
    Ok(results)
}

/// Checks a run's arguments against `graph` before anything is touched, so a bad call
/// changes nothing: every input supplied with its declared type, none unknown, every wanted
/// output declared. Returns the wanted outputs' nodes, in order.
pub fn check_run_args(
    graph: &crate::ir::Graph,
    inputs: &HashMap<String, Tensor>,
    outputs: &[&str],
) -> Result<Vec<crate::ir::NodeId>> {
    let mut declared = Vec::new();
    for node in graph.nodes() {
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
        return Err(Error::BadArgument(format!("input '{unknown}' is not used by graph '{}'", graph.name())));
    }
    outputs
        .iter()
        .map(|&name| {
            graph
                .outputs()
                .iter()
                .find(|(n, _)| n == name)
                .map(|&(_, id)| id)
                .ok_or_else(|| Error::BadArgument(format!("graph '{}' has no output '{name}'", graph.name())))
        })
        .collect()
}

/// A backend whose compilation finishes before it returns (the CPU backends, CUDA): it says
/// this much and gets [`Backend`] from the blanket impl, so no backend writes the boxing.
pub trait BlockingBackend {
    /// See [`Backend::name`].
    fn name(&self) -> &'static str;
    /// See [`Backend::compile_linked`].
    fn compile_linked_now(&self, plans: &[&Plan], weights: &Weights) -> Result<Vec<Box<dyn Executable>>>;
    /// See [`Backend::with_f32_products`].
    fn with_f32_products(&self) -> Option<Box<dyn Backend>> {
        None
    }
    /// See [`Backend::reopen`].
    fn reopen_now(&self) -> Result<Box<dyn Backend>> {
        Err(Error::Backend(format!("the {} backend cannot open its device again", BlockingBackend::name(self))))
    }
    /// See [`Backend::lose_device`].
    fn lose_device(&self) -> Result<()> {
        Err(Error::Backend(format!("the {} backend has no device to lose", BlockingBackend::name(self))))
    }
}

impl<B: BlockingBackend> Backend for B {
    fn name(&self) -> &'static str {
        BlockingBackend::name(self)
    }

    fn compile_linked<'a>(
        &'a self,
        plans: Vec<&'a Plan>,
        weights: &'a Weights,
    ) -> BoxFuture<'a, Vec<Box<dyn Executable>>> {
        Box::pin(std::future::ready(self.compile_linked_now(&plans, weights)))
    }

    fn with_f32_products(&self) -> Option<Box<dyn Backend>> {
        BlockingBackend::with_f32_products(self)
    }

    fn reopen(&self) -> BoxFuture<'_, Box<dyn Backend>> {
        Box::pin(std::future::ready(self.reopen_now()))
    }

    fn lose_device(&self) -> Result<()> {
        BlockingBackend::lose_device(self)
    }
}

/// An executable whose runs finish before they return (the CPU backends, CUDA, which
/// synchronises with its stream): it implements these and gets [`Executable`] from the
/// blanket impl.
pub trait BlockingExecutable {
    /// See [`Executable::run`].
    fn run_now(
        &mut self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
        outputs: &[&str],
    ) -> Result<HashMap<String, Tensor>>;
    /// See [`Executable::read_state`].
    fn read_state_now(&mut self, name: &str) -> Result<Tensor>;
    /// See [`Executable::run_repeatedly`]; by default [`BlockingExecutable::run_now`] `times`
    /// times, reading no outputs (a backend that can upload the inputs once does better).
    fn run_repeatedly_now(
        &mut self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
        times: usize,
    ) -> Result<()> {
        for _ in 0..times {
            self.run_now(inputs, scalars, &[])?;
        }
        Ok(())
    }
    /// See [`Executable::run_chain`].
    fn run_chain_now(&mut self, chain: Chain) -> Result<Vec<HashMap<String, Tensor>>>;
    /// See [`Executable::feeds_on_device`].
    fn feeds_on_device(&self) -> bool {
        false
    }

    /// [`BlockingExecutable::run_chain_now`] run by run, fed through the host (see
    /// [`chain_on_host`]); the caller has checked the chain.
    fn chain_on_host_now(&mut self, chain: Chain) -> Result<Vec<HashMap<String, Tensor>>> {
        let wanted = chain_outputs(&chain);
        let mut inputs = chain.inputs.clone();
        let mut results = Vec::with_capacity(chain.scalars.len());
        for scalars in chain.scalars {
            let mut out = self.run_now(&inputs, scalars, &wanted)?;
            feed_on_host(&chain, &mut out, &mut inputs);
            results.push(out);
        }
        Ok(results)
    }
}

impl<E: BlockingExecutable> Executable for E {
    fn run<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        outputs: &'a [&'a str],
    ) -> BoxFuture<'a, HashMap<String, Tensor>> {
        Box::pin(std::future::ready(self.run_now(inputs, scalars, outputs)))
    }

    fn read_state<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Tensor> {
        Box::pin(std::future::ready(self.read_state_now(name)))
    }

    fn run_repeatedly<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        times: usize,
    ) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(self.run_repeatedly_now(inputs, scalars, times)))
    }

    fn run_chain<'a>(&'a mut self, chain: Chain<'a>) -> BoxFuture<'a, Vec<HashMap<String, Tensor>>> {
        Box::pin(std::future::ready(self.run_chain_now(chain)))
    }

    fn feeds_on_device(&self) -> bool {
        BlockingExecutable::feeds_on_device(self)
    }
}
