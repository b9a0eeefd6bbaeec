//! Running a compiled plan: inputs and runtime scalars go up through pinned staging memory,
//! the recorded work runs, and only the requested outputs come back, each copied
//! asynchronously into pinned memory of its own before the one synchronisation of the run.
//!
//! The first run launches the work step by step; the second records it once as a CUDA graph
//! and every later run replays that graph. Kernels read runtime scalars (a decoder step's
//! position) from device memory that each run refreshes, so the recording stays valid.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::rc::Rc;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaGraph, CudaStream, result, sys};
use susurrus_core::exec::link::codec;
use susurrus_core::exec::{BlockingExecutable, Chain, check_chain, check_run_args};
use susurrus_core::ir::{Graph, NodeId, TensorType};
use susurrus_core::{Error, Result, Tensor};

use super::blas::Blas;
use super::compile::Shared;
use super::device::{DeviceBuffer, PinnedBuffer, driver};
use super::lower::{CublasGemm, KernelLaunch};
use susurrus_core::exec::Profile;

/// One unit of recorded work.
pub(super) enum Step {
    Kernel {
        function: CudaFunction,
        /// The parameter struct's bytes, in 8-byte words (the driver copies them at launch).
        params: Vec<u64>,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        /// The node it computes, for error messages.
        node: NodeId,
        name: &'static str,
    },
    Gemm {
        gemm: CublasGemm,
        node: NodeId,
    },
}

impl Step {
    fn node(&self) -> NodeId {
        match self {
            Step::Kernel { node, .. } | Step::Gemm { node, .. } => *node,
        }
    }

    pub fn kernel(function: CudaFunction, k: &KernelLaunch, node: NodeId) -> Step {
        let mut params = vec![0u64; k.params.len().div_ceil(8).max(1)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut params)[..k.params.len()].copy_from_slice(&k.params);
        Step::Kernel {
            function,
            params,
            grid: k.grid,
            block: k.block,
            shared_bytes: k.shared_bytes,
            node,
            name: k.name,
        }
    }
}

pub(super) struct Input {
    pub name: String,
    pub address: u64,
    /// f16 values go up as f32 words.
    pub f16_words: bool,
    pub staging_offset: usize,
    /// Nothing else is ever stored in this input's arena bytes (see `compile::input_is_kept`).
    pub kept: bool,
    /// A run has copied it to the device.
    pub uploaded: bool,
}

pub(super) struct Output {
    pub ty: TensorType,
    pub address: u64,
    /// Bytes the value takes on the device, and whether f16 values are f32 words there.
    pub bytes: usize,
    pub f16_words: bool,
    pub staging: PinnedBuffer,
}

/// What a chain of runs ([`BlockingExecutable::run_chain_now`]) copies through: every run's
/// scalar table and outputs in pinned memory (each run's copies read and write their own
/// range while the stream runs ahead), and the fed values on the device.
pub(super) struct ChainMemory {
    pinned: PinnedBuffer,
    carry: DeviceBuffer,
}

/// A plan compiled for one CUDA device.
pub(super) struct CudaExecutable {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub blas: Rc<Blas>,
    pub graph: Graph,
    pub shared: Rc<RefCell<Shared>>,
    /// The plan's arena followed by its runtime scalars.
    pub _arena: DeviceBuffer,
    pub scalars_address: u64,
    pub scalar_staging: PinnedBuffer,
    pub input_staging: PinnedBuffer,
    pub inputs: Vec<Input>,
    pub outputs: HashMap<String, Output>,
    pub steps: Vec<Step>,
    /// The work recorded as a CUDA graph (from the second run on).
    pub recorded: Option<CudaGraph>,
    pub eager_runs: usize,
    /// Memory of the longest chain of runs so far, kept for the next.
    pub chain: Option<ChainMemory>,
    /// Time per op is added here when profiling (`susurrus bench --profile`).
    pub profile: Option<Profile>,
}

impl CudaExecutable {
    fn cu_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// Copies the inputs and scalars of a run to the device (enqueued on the stream). The
    /// caller has checked the inputs with `check_run_args`.
    fn upload(&mut self, inputs: &HashMap<String, Tensor>, scalars: &HashMap<String, u32>) -> Result<()> {
        let values = self.graph.scalar_values(scalars)?;
        self.ctx.bind_to_thread().map_err(|e| driver("binding the context", e))?;
        // The previous run's copies out of the staging memory must be done before it is
        // overwritten.
        self.stream.synchronize().map_err(|e| driver("waiting for the previous run", e))?;
        let staging = self.scalar_staging.as_mut_slice();
        for (i, v) in values.iter().enumerate() {
            staging[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        let stream = self.cu_stream();
        if !values.is_empty() {
            // SAFETY: pinned memory of at least this size; the device table holds the link's
            // maximum, which the graph does not exceed.
            unsafe {
                result::memcpy_htod_async(
                    self.scalars_address,
                    &self.scalar_staging.as_slice()[..values.len() * 4],
                    stream,
                )
            }
            .map_err(|e| driver("copying the runtime scalars", e))?;
        }
        for input in &mut self.inputs {
            let bytes = codec::stored_bytes(&inputs[&input.name], input.f16_words);
            let at = input.staging_offset;
            let staging = &mut self.input_staging.as_mut_slice()[at..at + bytes.len()];
            // The staging memory holds what the last run uploaded: an input whose arena bytes
            // nothing else overwrites need not go up again unchanged (a decoder step's
            // sampling noise, 200 KB, stays the same for a whole window).
            if input.kept && input.uploaded && *staging == *bytes {
                continue;
            }
            staging.copy_from_slice(&bytes);
            // SAFETY: the staging range was sized for this input at compile time and the
            // device address holds its words.
            unsafe {
                result::memcpy_htod_async(input.address, &self.input_staging.as_slice()[at..at + bytes.len()], stream)
            }
            .map_err(|e| driver(&format!("copying input '{}'", input.name), e))?;
            input.uploaded = true;
        }
        Ok(())
    }

    /// Enqueues every step, one by one.
    fn launch_steps(&self) -> Result<()> {
        self.launch(&self.steps)
    }

    /// Enqueues `steps`.
    fn launch(&self, steps: &[Step]) -> Result<()> {
        let stream = self.cu_stream();
        for step in steps {
            match step {
                Step::Kernel { function, params, grid, block, shared_bytes, node, name } => {
                    let mut args = [params.as_ptr() as *mut c_void];
                    // SAFETY: the parameter bytes match the kernel's struct (checked by the
                    // host-side tests) and every address in them was allocated at compile time.
                    unsafe {
                        result::launch_kernel(
                            function.cu_function(),
                            (grid[0], grid[1], grid[2]),
                            (block[0], block[1], block[2]),
                            *shared_bytes,
                            stream,
                            &mut args,
                        )
                    }
                    .map_err(|e| driver(&format!("launching {name} for %{}", node.0), e))?;
                }
                // SAFETY: the product's addresses were resolved against allocated blocks.
                Step::Gemm { gemm, .. } => unsafe { self.blas.gemm(gemm)? },
            }
        }
        Ok(())
    }

    /// Enqueues the steps of each node between two timing events and, once the stream is
    /// done, adds each node's time to the profile under its op and type.
    fn launch_profiled(&self, profile: &Profile) -> Result<()> {
        let timed = || -> std::result::Result<_, cudarc::driver::DriverError> {
            self.stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        };
        let mut marks = vec![(None, timed().map_err(|e| driver("recording an event", e))?)];
        let mut rest = &self.steps[..];
        while let Some(first) = rest.first() {
            let node = first.node();
            let count = rest.iter().take_while(|s| s.node() == node).count();
            self.launch(&rest[..count])?;
            marks.push((Some(node), timed().map_err(|e| driver("recording an event", e))?));
            rest = &rest[count..];
        }
        self.finish()?;
        for pair in marks.windows(2) {
            let (Some(node), end) = &pair[1] else { continue };
            let ms = pair[0].1.elapsed_ms(end).map_err(|e| driver("reading an event", e))?;
            let label = format!("{} {}", self.graph.node(*node).op.name(), self.graph.ty(*node));
            profile.add(label, std::time::Duration::from_secs_f64(f64::from(ms) / 1e3));
        }
        Ok(())
    }

    /// Enqueues the plan's work: step by step on the first run, then recorded once as a CUDA
    /// graph and replayed. With a profile, every run goes step by step between events.
    fn enqueue(&mut self) -> Result<()> {
        if let Some(profile) = &self.profile {
            return self.launch_profiled(profile);
        }
        if self.recorded.is_none() && self.eager_runs > 0 {
            self.stream
                .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                .map_err(|e| driver("starting a graph capture", e))?;
            let launched = self.launch_steps();
            let ended = self.stream.end_capture(sys::CUgraphInstantiate_flags(0));
            launched?;
            self.recorded = ended.map_err(|e| driver(&format!("recording '{}' as a graph", self.graph.name()), e))?;
            if let Some(g) = &self.recorded {
                g.upload().map_err(|e| driver(&format!("uploading the graph of '{}'", self.graph.name()), e))?;
            }
        }
        match &self.recorded {
            Some(g) => g.launch().map_err(|e| driver(&format!("replaying '{}'", self.graph.name()), e)),
            None => {
                self.eager_runs += 1;
                self.launch_steps()
            }
        }
    }

    /// Waits for the stream; an error here is one a kernel or copy of this run met.
    fn finish(&self) -> Result<()> {
        self.stream.synchronize().map_err(|e| driver(&format!("running '{}'", self.graph.name()), e))
    }
}

impl CudaExecutable {
    /// [`BlockingExecutable::run_chain_now`] on the stream: between two runs, the next run's
    /// scalar table and the inputs not fed (where other values reuse their bytes) go up, and
    /// the fed outputs are copied into their inputs through a carry buffer (a source may
    /// share arena bytes with a destination); every run's outputs come down into their own
    /// pinned range; one synchronisation at the end.
    fn chain(&mut self, chain: Chain) -> Result<Vec<HashMap<String, Tensor>>> {
        check_chain(&self.graph, &chain)?;
        let mut feeds = Vec::with_capacity(chain.feeds.len());
        for &(from, to) in chain.feeds {
            let out =
                self.outputs.get(from).ok_or_else(|| Error::BadArgument(format!("graph has no output '{from}'")))?;
            let (i, input) = self
                .inputs
                .iter()
                .enumerate()
                .find(|(_, i)| i.name == to)
                .ok_or_else(|| Error::BadArgument(format!("graph has no input '{to}'")))?;
            if input.f16_words != out.f16_words {
                return Err(Error::Backend(format!("cuda: output '{from}' and input '{to}' are stored differently")));
            }
            feeds.push((out.address, input.address, out.bytes, i));
        }
        let tables = chain.scalars.iter().map(|s| self.graph.scalar_values(s)).collect::<Result<Vec<_>>>()?;
        let table_bytes = tables[0].len() * 4;
        let per_run: usize = chain.outputs.iter().map(|&name| self.outputs[name].bytes).sum();
        let pinned_bytes = chain.scalars.len() * (table_bytes + per_run);
        let carry_bytes: usize = feeds.iter().map(|f| f.2).sum();
        // Taken out while the runs use it (and dropped with an error).
        let mut memory = match self.chain.take() {
            Some(m) if m.pinned.bytes >= pinned_bytes && m.carry.bytes >= carry_bytes => m,
            _ => ChainMemory {
                pinned: PinnedBuffer::new(&self.ctx, pinned_bytes)?,
                carry: DeviceBuffer::zeroed(&self.ctx, carry_bytes, "fed values")?,
            },
        };
        self.upload(chain.inputs, &chain.scalars[0])?;
        let stream = self.cu_stream();
        // Inputs not fed whose arena bytes other values reuse go up again for every run,
        // from the staging memory the first run's upload filled.
        let again: Vec<(u64, usize, usize)> = self
            .inputs
            .iter()
            .enumerate()
            .filter(|(i, input)| !input.kept && !feeds.iter().any(|f| f.3 == *i))
            .map(|(_, input)| {
                let bytes = codec::stored_bytes(&chain.inputs[&input.name], input.f16_words).len();
                (input.address, input.staging_offset, bytes)
            })
            .collect();
        let outputs_at = chain.scalars.len() * table_bytes;
        for (k, table) in tables.iter().enumerate() {
            memory.pinned.as_mut_slice()[k * table_bytes..(k + 1) * table_bytes]
                .copy_from_slice(bytemuck::cast_slice(table));
        }
        let carry = memory.carry.ptr;
        for k in 0..chain.scalars.len() {
            if k > 0 && table_bytes > 0 {
                let table = &memory.pinned.as_slice()[k * table_bytes..(k + 1) * table_bytes];
                // SAFETY: pinned memory untouched until the synchronisation below; the device
                // table holds the graph's scalars.
                unsafe { result::memcpy_htod_async(self.scalars_address, table, stream) }
                    .map_err(|e| driver("copying a chained run's scalars", e))?;
            }
            if k > 0 {
                let mut at = 0;
                for &(src, _, bytes, _) in &feeds {
                    // SAFETY: both ranges were allocated for values of `bytes` bytes.
                    unsafe { result::memcpy_dtod_async(carry + at, src, bytes, stream) }
                        .map_err(|e| driver("carrying a fed value", e))?;
                    at += bytes as u64;
                }
                let mut at = 0;
                for &(_, dst, bytes, _) in &feeds {
                    // SAFETY: as above.
                    unsafe { result::memcpy_dtod_async(dst, carry + at, bytes, stream) }
                        .map_err(|e| driver("feeding a value", e))?;
                    at += bytes as u64;
                }
            }
            if k > 0 {
                for &(address, at, bytes) in &again {
                    let staged = &self.input_staging.as_slice()[at..at + bytes];
                    // SAFETY: the staging range holds this input since the upload above and
                    // the device address its words.
                    unsafe { result::memcpy_htod_async(address, staged, stream) }
                        .map_err(|e| driver("copying a chained run's input", e))?;
                }
            }
            self.enqueue()?;
            let mut at = outputs_at + k * per_run;
            for &name in chain.outputs {
                let out = &self.outputs[name];
                let dst = &mut memory.pinned.as_mut_slice()[at..at + out.bytes];
                // SAFETY: the device address holds the value; the pinned range is this run's.
                unsafe { result::memcpy_dtoh_async(dst, out.address, stream) }
                    .map_err(|e| driver(&format!("reading output '{name}'"), e))?;
                at += out.bytes;
            }
        }
        self.finish()?;
        // The fed inputs' device bytes are no longer what the staging memory holds.
        for &(_, _, _, i) in &feeds {
            self.inputs[i].uploaded = false;
        }
        let mut at = outputs_at;
        let mut results = Vec::with_capacity(chain.scalars.len());
        for _ in chain.scalars {
            let mut values = HashMap::new();
            for &name in chain.outputs {
                let out = &self.outputs[name];
                let bytes = &memory.pinned.as_slice()[at..at + out.bytes];
                values.insert(name.to_string(), codec::decode(bytes, &out.ty, out.f16_words)?);
                at += out.bytes;
            }
            results.push(values);
        }
        self.chain = Some(memory);
        Ok(results)
    }
}

impl BlockingExecutable for CudaExecutable {
    fn run_now(
        &mut self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
        outputs: &[&str],
    ) -> Result<HashMap<String, Tensor>> {
        check_run_args(&self.graph, inputs, outputs)?;
        self.upload(inputs, scalars)?;
        self.enqueue()?;
        let stream = self.cu_stream();
        for &name in outputs {
            let out = self
                .outputs
                .get_mut(name)
                .ok_or_else(|| Error::BadArgument(format!("graph has no output '{name}'")))?;
            // SAFETY: the pinned buffer holds `bytes`; the device address holds the value.
            unsafe { result::memcpy_dtoh_async(&mut out.staging.as_mut_slice()[..out.bytes], out.address, stream) }
                .map_err(|e| driver(&format!("reading output '{name}'"), e))?;
        }
        self.finish()?;
        let mut values = HashMap::new();
        for &name in outputs {
            let out = &self.outputs[name];
            values.insert(name.to_string(), codec::decode(out.staging.as_slice(), &out.ty, out.f16_words)?);
        }
        Ok(values)
    }

    fn read_state_now(&mut self, name: &str) -> Result<Tensor> {
        let declared =
            self.graph.nodes().iter().any(|n| matches!(&n.op, susurrus_core::ops::Op::State(s) if s.name == name));
        if !declared {
            return Err(Error::BadArgument(format!("graph '{}' has no persistent buffer '{name}'", self.graph.name())));
        }
        let shared = self.shared.borrow();
        let (offset, state) = shared
            .state_table
            .get(name)
            .ok_or_else(|| Error::Backend(format!("cuda: persistent buffer '{name}' is missing")))?;
        self.finish()?;
        let mut bytes = vec![0u8; state.bytes()];
        // SAFETY: the states block holds this buffer at `offset`; the stream is idle.
        unsafe { result::memcpy_dtoh_sync(&mut bytes, shared.states.ptr + *offset as u64) }
            .map_err(|e| driver(&format!("reading persistent buffer '{name}'"), e))?;
        codec::decode(&bytes, &state.ty, state.f16_words)
    }

    fn run_repeatedly_now(
        &mut self,
        inputs: &HashMap<String, Tensor>,
        scalars: &HashMap<String, u32>,
        times: usize,
    ) -> Result<()> {
        check_run_args(&self.graph, inputs, &[])?;
        self.upload(inputs, scalars)?;
        for _ in 0..times {
            self.enqueue()?;
        }
        self.finish()
    }

    fn feeds_on_device(&self) -> bool {
        self.profile.is_none()
    }

    fn run_chain_now(&mut self, chain: Chain) -> Result<Vec<HashMap<String, Tensor>>> {
        if self.profile.is_some() {
            // A profile times one run's launches at a time.
            check_chain(&self.graph, &chain)?;
            return self.chain_on_host_now(chain);
        }
        self.chain(chain)
    }
}
