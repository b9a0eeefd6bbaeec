//! Plan -> device resources and the list of dispatches. Everything a run needs is created
//! here, once.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use wgpu::util::DeviceExt;

use super::device::{PipelineCache, WgpuBackend};
use super::kernel::{BindingKind, Elem, InputAt, KernelSpec, PipelineKey, ScratchUse, module_source};
use super::lower::{KernelCtx, Lowering, lower};
use super::timing::Timing;
use susurrus_core::error::{Error, Result};
use susurrus_core::exec::link::{Block, Link, LinkedPlan, Needs, Place, SCALAR_TABLE_BYTES, codec};
use susurrus_core::exec::{Backend, Executable, Weights};
use susurrus_core::ir::{DType, Graph, NodeId, TensorType};
use susurrus_core::ops::Op;
use susurrus_core::plan::Plan;
use susurrus_core::tensor::Tensor;

/// Bytes of one dispatch's parameter slot (WebGPU's minimum uniform offset alignment).
const UNIFORM_SLOT: u64 = 256;

/// Arena blocks and persistent buffers: bound read-write, written by runs, read back.
const STORAGE_USAGE: wgpu::BufferUsages =
    wgpu::BufferUsages::STORAGE.union(wgpu::BufferUsages::COPY_DST).union(wgpu::BufferUsages::COPY_SRC);

/// Where a tensor lives on the device: a range of one of the executable's buffers (one per
/// block of the link) and how its elements are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Loc {
    pub buf: Block,
    pub offset: u64,
    /// Bytes, a multiple of 4 and at least 4 (what bindings and copies need).
    pub size: u64,
    pub elem: Elem,
}

impl Loc {
    /// The range of `place`, holding a value of type `ty`, stored as [`Elem::of`] says.
    fn of(place: Place, ty: &TensorType, f16: bool) -> Loc {
        let elem = Elem::of(&TensorType::new(place.dtype, ty.shape.clone()), place.f16_words, f16);
        Loc { buf: place.block, offset: place.offset as u64, size: pad4(place.bytes as u64), elem }
    }
}

/// What one storage binding of a dispatch covers: a value's range, or the executable's
/// scratch buffer (its first `size` bytes, f32 words).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Range {
    Value(Loc),
    Scratch(u64),
}

impl Range {
    fn elem(&self) -> Elem {
        match self {
            Range::Value(l) => l.elem,
            Range::Scratch(_) => Elem::Word(DType::F32),
        }
    }

    fn writable(&self) -> bool {
        match self {
            Range::Value(l) => l.buf.writable(),
            Range::Scratch(_) => true,
        }
    }

    /// Whether this value starts where `out` does (an input read through the output binding).
    fn starts_with(&self, out: &Range) -> bool {
        match (self, out) {
            (Range::Value(a), Range::Value(b)) => a.buf == b.buf && a.offset == b.offset,
            _ => false,
        }
    }
}

/// One recorded kernel launch.
pub(super) struct Dispatch {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub uniform_offset: u32,
    pub workgroups: [u32; 3],
}

/// A value the caller can read back, and the staging buffer it is read through, made the
/// first time it is read: most states are never read (a decoder's caches stay on the device),
/// and a staging buffer per value of every plan would be host-visible memory the size of
/// every cache, several times over, allocated at start-up and freed at exit.
pub(super) struct Readback {
    pub loc: Loc,
    pub ty: TensorType,
    /// The staging buffer's label.
    name: String,
    staging: OnceLock<wgpu::Buffer>,
}

impl Readback {
    fn new(loc: Loc, ty: TensorType, name: &str) -> Readback {
        Readback { loc, ty, name: name.to_string(), staging: OnceLock::new() }
    }

    /// The staging buffer, made on first use.
    pub fn staging(&self, device: &wgpu::Device) -> &wgpu::Buffer {
        self.staging.get_or_init(|| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(&self.name),
                size: self.loc.size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }
}

/// A compiled plan on one device.
pub(super) struct WgpuExecutable {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub lost: Arc<Mutex<Option<String>>>,
    pub errors: Arc<Mutex<Option<String>>>,
    pub graph: Graph,
    pub buffers: HashMap<Block, wgpu::Buffer>,
    pub runtime: wgpu::Buffer,
    /// Holds every dispatch's parameters; bound through the dispatches' bind groups.
    pub _uniforms: wgpu::Buffer,
    pub dispatches: Vec<Dispatch>,
    /// Working memory of multi-pass ops, bound through the dispatches' bind groups.
    pub _scratch: wgpu::Buffer,
    pub inputs: Vec<(String, TensorType, Loc)>,
    pub outputs: HashMap<String, Readback>,
    pub states: HashMap<String, Readback>,
    /// Timestamps of every dispatch, when the backend profiles.
    pub timing: Option<Timing>,
    /// The buffers the last chain of runs copied through, kept for the next.
    pub chain_buffers: Option<super::run::ChainBuffers>,
}

fn pad4(n: u64) -> u64 {
    n.max(4).div_ceil(4) * 4
}

/// The bytes `t` takes in a buffer of `elem` storage, padded to whole words.
pub(super) fn encode(t: &Tensor, elem: Elem) -> Vec<u8> {
    padded(&codec::stored_bytes(t, elem == Elem::Word(DType::F16)))
}

/// The tensor of type `ty` stored in `bytes` as `elem`.
pub(super) fn decode(bytes: &[u8], elem: Elem, ty: &TensorType) -> Result<Tensor> {
    codec::decode(bytes, ty, elem == Elem::Word(DType::F16))
}

/// `bytes` padded with zeros to whole words, at least one.
pub(super) fn padded(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.resize(pad4(bytes.len() as u64) as usize, 0);
    out
}

/// Device buffers that executables compiled together share: one per leaf of the link (a
/// weight or constant, uploaded once) and one per persistent buffer.
struct Shared {
    leaves: Vec<wgpu::Buffer>,
    states: Vec<wgpu::Buffer>,
    /// The one arena every plan of the program runs in ([`Link::shared_arena`]): the queue
    /// runs their submissions in order, and each run's outputs are copied out in its own.
    arena: Vec<wgpu::Buffer>,
}

impl Shared {
    fn new(device: &wgpu::Device, link: &Link) -> Result<Shared> {
        let leaves = link
            .leaves
            .iter()
            .map(|leaf| {
                let bytes = leaf.stored();
                // Mapped at creation (zeroed, so the padding is too) and written in place: one
                // copy of the weights, where `create_buffer_init` of padded bytes made two.
                let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(leaf.label()),
                    size: pad4(bytes.len() as u64),
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: true,
                });
                buffer
                    .get_mapped_range_mut(..)
                    .map_err(|e| Error::Backend(format!("mapping the buffer of {}: {e}", leaf.label())))?
                    .slice(..bytes.len())
                    .copy_from_slice(&bytes);
                buffer.unmap();
                Ok(buffer)
            })
            .collect::<Result<_>>()?;
        let states = link
            .states
            .iter()
            .map(|s| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(&s.name),
                    size: pad4(s.bytes() as u64),
                    usage: STORAGE_USAGE,
                    mapped_at_creation: false,
                })
            })
            .collect();
        let arena = link
            .shared_arena()
            .iter()
            .map(|&bytes| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("arena"),
                    size: pad4(bytes as u64),
                    usage: STORAGE_USAGE,
                    mapped_at_creation: false,
                })
            })
            .collect();
        Ok(Shared { leaves, states, arena })
    }
}

pub(super) async fn compile_linked(
    backend: &WgpuBackend,
    plans: &[&Plan],
    weights: &Weights,
) -> Result<Vec<Box<dyn Executable>>> {
    backend.check_alive()?;
    let needs = Needs { backend: backend.name(), plan: backend.plan_options(), wide_f16_leaves: false };
    let link = Link::new(plans, weights, &needs)?;
    let device = &backend.device;
    let mut staged = Vec::with_capacity(link.plans.len());
    for linked in &link.plans {
        staged.push(scoped(device, linked.plan.graph.name(), || stage(backend, linked)).await??);
    }
    // The pipelines of every plan at once (plans share many), created side by side while
    // this thread uploads the weights: the two are start-up's largest parts.
    let wanted: Vec<(&PipelineKey, &'static str)> =
        staged.iter().flat_map(|s| s.planned.iter().map(|(spec, _, _, key)| (key, spec.source))).collect();
    let driver_cache = backend.pipeline_cache.as_ref().map(|p| &p.cache);
    let made = scoped(device, "the weights, persistent buffers and pipelines", || -> Result<_> {
        let mut cache = lock_cache(backend)?;
        let before = cache.pipelines.len();
        let (pipelines, shared) =
            create_pipelines(device, driver_cache, &mut cache, &wanted, || Shared::new(device, &link));
        pipelines.inspect_err(|_| {
            // A rejected shader must not stay cached as if it were good.
            *cache = PipelineCache::default();
        })?;
        Ok((cache.pipelines.len() > before, shared))
    })
    .await;
    let (grown, shared) = match made {
        Ok(made) => made?,
        Err(e) => {
            // Caught by this thread's scopes: in a browser, a rejected shader.
            *lock_cache(backend)? = PipelineCache::default();
            return Err(e);
        }
    };
    let shared = shared?;
    // New pipelines went into the driver's cache: keep it for the next process (natively; a
    // browser's adapter has no such cache).
    if let (true, Some(stored)) = (grown, &backend.pipeline_cache) {
        stored.store()?;
    }
    let mut out: Vec<Box<dyn Executable>> = Vec::with_capacity(staged.len());
    for (linked, staged) in link.plans.iter().zip(staged) {
        let name = linked.plan.graph.name();
        let built = scoped(device, name, || finish(backend, linked, &shared, &*lock_cache(backend)?, staged)).await??;
        out.push(Box::new(built));
    }
    backend.check_alive()?;
    Ok(out)
}

fn lock_cache(backend: &WgpuBackend) -> Result<std::sync::MutexGuard<'_, PipelineCache>> {
    backend.cache.lock().map_err(|_| Error::Backend("pipeline cache poisoned".into()))
}

/// Runs `f` inside out-of-memory and validation error scopes and turns what they catch
/// (allocation failures, rejected shaders) into errors naming `what`.
async fn scoped<T>(device: &wgpu::Device, what: &str, f: impl FnOnce() -> T) -> Result<T> {
    let oom_scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation_scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let value = f();
    let validation = validation_scope.pop().await;
    let oom = oom_scope.pop().await;
    if let Some(e) = oom {
        return Err(Error::Backend(format!("out of GPU memory while compiling '{what}': {e}")));
    }
    if let Some(e) = validation {
        return Err(Error::Backend(format!("the GPU rejected '{what}': {e}")));
    }
    Ok(value)
}

/// One plan's device resources and dispatches, made up to their pipelines: what
/// [`compile_linked`] needs from every plan before it creates their pipelines together.
struct Staged {
    scratch: wgpu::Buffer,
    uniforms: wgpu::Buffer,
    runtime: wgpu::Buffer,
    specs_nodes: Vec<NodeId>,
    /// Each dispatch: its kernel, the ranges it binds, their kinds and its pipeline's key.
    planned: Vec<(KernelSpec, Vec<Range>, Vec<BindingKind>, PipelineKey)>,
}

fn stage(backend: &WgpuBackend, linked: &LinkedPlan) -> Result<Staged> {
    let device = &backend.device;
    let plan = &linked.plan;
    let g = &plan.graph;
    let loc = |id: NodeId| Loc::of(linked.place(id), g.ty(id), backend.f16);

    // `scalar` reads that only feed kernels (directly or through reshapes): those kernels read
    // the runtime scalar table themselves, and the read runs no kernel. A read that is an
    // output, or viewed by one, is still written to its place.
    let written: HashSet<NodeId> =
        g.outputs().iter().filter_map(|(_, id)| scalar_read(g, *id).map(|(read, _)| read)).collect();
    let scalar_of =
        |id: NodeId| scalar_read(g, id).filter(|(read, _)| !written.contains(read)).map(|(_, scalar)| scalar);
    let mut specs = Vec::new();
    let mut scratch_bytes = 0;
    for &id in &plan.schedule {
        // Views are their input's bytes already (a slice view is bound as its own range).
        if plan.views[id.index()] || (matches!(g.node(id).op, Op::ScalarRead(_)) && scalar_of(id).is_some()) {
            continue;
        }
        let node = g.node(id);
        let inputs: Vec<&TensorType> = node.inputs.iter().map(|&i| g.ty(i)).collect();
        let ctx = KernelCtx {
            inputs: &inputs,
            output: &node.ty,
            f16: backend.f16,
            cpu: backend.cpu_kernels,
            matrix: backend.matrix,
            subgroups: backend.subgroups,
        };
        match lower(&node.op, &ctx)? {
            Lowering::Nothing => {}
            Lowering::Kernel(spec) => specs.push((id, spec)),
            Lowering::Passes { scratch_bytes: bytes, kernels } => {
                scratch_bytes = scratch_bytes.max(bytes);
                specs.extend(kernels.into_iter().map(|spec| (id, spec)));
            }
        }
    }
    // Working memory of the multi-pass ops, shared: ops run one after another.
    let scratch = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("scratch"),
        size: pad4(scratch_bytes as u64),
        usage: STORAGE_USAGE,
        mapped_at_creation: false,
    });
    let scratch_range = Range::Scratch(pad4(scratch_bytes as u64));
    let mut params = vec![0u8; (specs.len().max(1) as u64 * UNIFORM_SLOT) as usize];
    for (k, (_, spec)) in specs.iter().enumerate() {
        let at = k * UNIFORM_SLOT as usize;
        params[at..at + spec.params.len()].copy_from_slice(&spec.params);
    }
    let uniforms = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("dispatch parameters"),
        contents: &params,
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let runtime = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("runtime scalars"),
        size: SCALAR_TABLE_BYTES as u64,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });

    let specs_nodes: Vec<NodeId> = specs.iter().map(|(id, _)| *id).collect();
    // Each dispatch's bindings and pipeline key first; then the pipelines missing from the
    // cache, created side by side; then the bind groups.
    let mut planned = Vec::with_capacity(specs.len());
    for (id, spec) in specs {
        let node = g.node(id);
        let out = if spec.scratch == ScratchUse::Writes { scratch_range } else { Range::Value(loc(id)) };
        let mut ranges: Vec<Range> = Vec::new();
        let mut input_at = Vec::new();
        // Each input's range, or the runtime scalar it is.
        let mut inputs: Vec<(Range, Option<u32>)> =
            node.inputs.iter().map(|&i| (Range::Value(loc(i)), scalar_of(i))).collect();
        if spec.scratch == ScratchUse::Reads {
            inputs.push((scratch_range, None));
        }
        for (l, scalar) in inputs {
            // An input stored exactly where the output goes (in place, or a cache write) is
            // read through the output binding: WebGPU forbids aliasing writable bindings.
            let at = match scalar {
                Some(n) => InputAt::Scalar(n),
                None if l.starts_with(&out) => InputAt::Binding(usize::MAX),
                None => InputAt::Binding(ranges.iter().position(|r| *r == l).unwrap_or_else(|| {
                    ranges.push(l);
                    ranges.len() - 1
                })),
            };
            input_at.push(at);
        }
        ranges.push(out);
        let out_binding = ranges.len() - 1;
        for at in &mut input_at {
            if *at == InputAt::Binding(usize::MAX) {
                *at = InputAt::Binding(out_binding);
            }
        }
        let bindings: Vec<BindingKind> =
            ranges.iter().map(|r| BindingKind { elem: r.elem(), writable: r.writable() }).collect();
        let key = PipelineKey {
            kernel: spec.name,
            prelude: spec.prelude,
            defines: spec.defines.clone(),
            bindings: bindings.clone(),
            inputs: input_at,
            output_dtype: if spec.scratch == ScratchUse::Writes { DType::F32 } else { node.ty.dtype },
            params_wgsl: spec.params_wgsl,
        };
        planned.push((spec, ranges, bindings, key));
    }
    Ok(Staged { scratch, uniforms, runtime, specs_nodes, planned })
}

/// The executable of a staged plan, once the pipelines of every plan are in `cache`.
fn finish(
    backend: &WgpuBackend,
    linked: &LinkedPlan,
    shared: &Shared,
    cache: &PipelineCache,
    staged: Staged,
) -> Result<WgpuExecutable> {
    let device = &backend.device;
    let plan = &linked.plan;
    let g = &plan.graph;
    let Staged { scratch, uniforms, runtime, specs_nodes, planned } = staged;
    let mut buffers = HashMap::new();
    for place in &linked.places {
        let buffer = match place.block {
            Block::Leaf(i) => &shared.leaves[i],
            Block::State(i) => &shared.states[i],
            Block::Arena(k) => &shared.arena[k],
        };
        buffers.entry(place.block).or_insert_with(|| buffer.clone());
    }
    let loc = |id: NodeId| Loc::of(linked.place(id), g.ty(id), backend.f16);
    let mut dispatches = Vec::with_capacity(planned.len());
    for (k, (spec, ranges, bindings, key)) in planned.into_iter().enumerate() {
        let (Some(pipeline), Some((layout, _))) = (cache.pipelines.get(&key), cache.layouts.get(&bindings)) else {
            return Err(Error::Backend(format!("the pipeline of '{}' was not created", spec.name)));
        };
        let pipeline = pipeline.clone();
        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &uniforms,
                    offset: 0,
                    size: wgpu::BufferSize::new(UNIFORM_SLOT),
                }),
            },
            wgpu::BindGroupEntry { binding: 1, resource: runtime.as_entire_binding() },
        ];
        for (j, r) in ranges.iter().enumerate() {
            let (buffer, offset, size) = match r {
                Range::Value(l) => (&buffers[&l.buf], l.offset, l.size),
                Range::Scratch(size) => (&scratch, 0, *size),
            };
            entries.push(wgpu::BindGroupEntry {
                binding: j as u32 + 2,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer,
                    offset,
                    size: wgpu::BufferSize::new(size),
                }),
            });
        }
        let bind_group =
            device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(spec.name), layout, entries: &entries });
        dispatches.push(Dispatch {
            pipeline,
            bind_group,
            uniform_offset: (k as u64 * UNIFORM_SLOT) as u32,
            workgroups: spec.workgroups,
        });
    }

    let mut inputs = Vec::new();
    let mut states = HashMap::new();
    for id in g.ids() {
        match &g.node(id).op {
            Op::Input(i) => inputs.push((i.name.clone(), i.ty.clone(), loc(id))),
            Op::State(s) => {
                states.insert(s.name.clone(), Readback::new(loc(id), s.ty.clone(), &s.name));
            }
            _ => {}
        }
    }
    let mut outputs = HashMap::new();
    for (name, id) in g.outputs() {
        outputs.insert(name.clone(), Readback::new(loc(*id), g.ty(*id).clone(), name));
    }
    let timing = backend.profile.as_ref().map(|profile| {
        let labels = specs_nodes.iter().map(|&id| format!("{} {}", g.node(id).op.name(), g.ty(id))).collect();
        Timing::new(device, &backend.queue, labels, profile.clone())
    });
    Ok(WgpuExecutable {
        device: device.clone(),
        queue: backend.queue.clone(),
        lost: backend.lost.clone(),
        errors: backend.errors.clone(),
        graph: g.clone(),
        buffers,
        runtime,
        _uniforms: uniforms,
        dispatches,
        _scratch: scratch,
        inputs,
        outputs,
        states,
        timing,
        chain_buffers: None,
    })
}

/// The `scalar` read whose value `id` is, itself or through reshapes (views of it), and the
/// index of the runtime scalar it reads.
fn scalar_read(g: &Graph, id: NodeId) -> Option<(NodeId, u32)> {
    match &g.node(id).op {
        Op::ScalarRead(s) => Some((id, s.scalar.0)),
        Op::Reshape(_) => scalar_read(g, g.node(id).inputs[0]),
        _ => None,
    }
}

/// Creates the pipelines of `wanted` that the cache lacks (with their layouts), through the
/// driver's pipeline cache where there is one, and runs `meanwhile` on this thread. Natively
/// they compile side by side, one thread per core: each is a WGSL translation and a driver
/// compile, the bulk of a program's start-up, and independent of the others. Each thread
/// catches its own pipelines' errors (wgpu's error scopes belong to the thread that pushes
/// them); in the browser they are created in turn, inside the caller's scopes.
fn create_pipelines<T>(
    device: &wgpu::Device,
    driver_cache: Option<&wgpu::PipelineCache>,
    cache: &mut PipelineCache,
    wanted: &[(&PipelineKey, &'static str)],
    meanwhile: impl FnOnce() -> T,
) -> (Result<()>, T) {
    let mut seen = HashSet::new();
    let missing: Vec<(&PipelineKey, &'static str)> =
        wanted.iter().filter(|(key, _)| !cache.pipelines.contains_key(*key) && seen.insert(*key)).copied().collect();
    for (key, _) in &missing {
        cache.layouts.entry(key.bindings.clone()).or_insert_with(|| layouts(device, &key.bindings));
    }
    let layouts = &cache.layouts;
    let create = |key: &PipelineKey, source: &str| {
        let module = shader_module(device, key.kernel, module_source(key, source));
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(key.kernel),
            layout: Some(&layouts[&key.bindings].1),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: driver_cache,
        })
    };
    #[cfg(not(target_arch = "wasm32"))]
    let (created, value): (Vec<wgpu::ComputePipeline>, T) = {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(missing.len().max(1));
        type Made = Result<Vec<(usize, wgpu::ComputePipeline)>>;
        let (mut done, value): (Vec<Made>, T) = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&(key, source)) = missing.get(i) else { return Ok(mine) };
                            let pipeline = pollster::block_on(scoped(device, key.kernel, || create(key, source)))?;
                            mine.push((i, pipeline));
                        }
                    })
                })
                .collect();
            let value = meanwhile();
            let done = workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| Err(Error::Backend("a pipeline compile thread panicked".into()))))
                .collect();
            (done, value)
        });
        let mut all = Vec::with_capacity(missing.len());
        for d in done.drain(..) {
            match d {
                Ok(d) => all.extend(d),
                Err(e) => return (Err(e), value),
            }
        }
        all.sort_by_key(|(i, _)| *i);
        (all.into_iter().map(|(_, p)| p).collect(), value)
    };
    #[cfg(target_arch = "wasm32")]
    let (created, value): (Vec<wgpu::ComputePipeline>, T) =
        (missing.iter().map(|&(key, source)| create(key, source)).collect(), meanwhile());
    for ((key, _), pipeline) in missing.iter().zip(created) {
        cache.pipelines.insert((*key).clone(), pipeline);
    }
    (Ok(()), value)
}

/// The bind group layout and pipeline layout of a dispatch with `bindings`: the dispatch's
/// parameter slot (a dynamic offset into one uniform buffer), the runtime scalars, then one
/// storage buffer per binding.
fn layouts(device: &wgpu::Device, bindings: &[BindingKind]) -> (wgpu::BindGroupLayout, wgpu::PipelineLayout) {
    let mut entries = vec![uniform_entry(0, true), uniform_entry(1, false)];
    for (j, b) in bindings.iter().enumerate() {
        entries.push(wgpu::BindGroupLayoutEntry {
            binding: j as u32 + 2,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only: !b.writable },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        });
    }
    let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &entries });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: None,
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    (layout, pipeline_layout)
}

fn uniform_entry(binding: u32, dynamic: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: dynamic,
            min_binding_size: None,
        },
        count: None,
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use crate::WgpuOptions;

    #[test]
    fn rejected_shaders_and_huge_buffers_are_errors() {
        let backend = pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())).unwrap();
        let device = &backend.device;
        let bad_shader = pollster::block_on(scoped(device, "broken kernel", || {
            device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl("fn main( { oops".into()),
            })
        }));
        let err = bad_shader.err().unwrap().to_string();
        assert!(err.starts_with("backend error: the GPU rejected 'broken kernel':"), "{err}");
        let huge = pollster::block_on(scoped(device, "huge arena", || {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: backend.limits.max_buffer_size.saturating_add(4),
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            })
        }));
        assert!(huge.is_err());
        // The device is still usable afterwards.
        backend.check_alive().unwrap();
    }
}

/// The shader module of a kernel, compiled without the loop bounds wgpu would add. wgpu's
/// default wraps every loop in a counter that stops it after 2^64 iterations, so that an
/// endless loop from untrusted code cannot be assumed away by a driver; the counter keeps
/// drivers from unrolling the loop, so arrays it indexes live in memory instead of registers
/// (the kernels' staging and accumulator loops ran several times slower with it on an H200).
/// Buffer bounds checks and integer division guards stay on.
fn shader_module(device: &wgpu::Device, label: &str, text: String) -> wgpu::ShaderModule {
    let desc = wgpu::ShaderModuleDescriptor { label: Some(label), source: wgpu::ShaderSource::Wgsl(text.into()) };
    let checks = wgpu::ShaderRuntimeChecks { force_loop_bounding: false, ..wgpu::ShaderRuntimeChecks::checked() };
    // SAFETY: turning off loop bounding requires that no shader loops forever. The modules
    // compiled here are the kernels of `kernels/`, never user code, with their placeholders
    // filled by the lowering: every loop counts up to a bound from a constant or from the
    // dispatch's parameters (sizes of the tensors the op reads) by a positive step.
    unsafe { device.create_shader_module_trusted(desc, checks) }
}
