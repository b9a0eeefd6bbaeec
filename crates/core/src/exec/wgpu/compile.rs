//! Plan -> device resources and the list of dispatches. Everything a run needs is created
//! here, once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use wgpu::util::DeviceExt;

use super::device::{PipelineCache, WgpuBackend};
use super::kernel::{BindingKind, Elem, MAX_RUNTIME_SCALARS, PipelineKey, module_source};
use super::lower::{KernelCtx, Lowering, lower};
use crate::error::{Error, Result};
use crate::exec::{Executable, Weights, linked_states};
use crate::ir::{DType, Graph, NodeId, TensorType};
use crate::ops::Op;
use crate::plan::{Plan, Storage, plan_with};
use crate::tensor::Tensor;

/// Bytes of one dispatch's parameter slot (WebGPU's minimum uniform offset alignment).
const UNIFORM_SLOT: u64 = 256;

/// A device buffer of the executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Buf {
    Arena(usize),
    Weight(usize),
    Const(usize),
    State(usize),
}

/// Where a tensor lives on the device: a range of a buffer and how its elements are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Loc {
    pub buf: Buf,
    pub offset: u64,
    /// Bytes, a multiple of 4 and at least 4 (what bindings and copies need).
    pub size: u64,
    pub elem: Elem,
}

/// One recorded kernel launch.
pub(super) struct Dispatch {
    pub pipeline: wgpu::ComputePipeline,
    pub bind_group: wgpu::BindGroup,
    pub uniform_offset: u32,
    pub workgroups: [u32; 3],
}

/// A value the caller can read back, with the staging buffer made for it at compile time.
pub(super) struct Readback {
    pub loc: Loc,
    pub ty: TensorType,
    pub staging: wgpu::Buffer,
}

/// A compiled plan on one device.
pub(super) struct WgpuExecutable {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub lost: Arc<Mutex<Option<String>>>,
    pub errors: Arc<Mutex<Option<String>>>,
    pub graph: Graph,
    pub buffers: HashMap<Buf, wgpu::Buffer>,
    pub runtime: wgpu::Buffer,
    /// Holds every dispatch's parameters; bound through the dispatches' bind groups.
    pub _uniforms: wgpu::Buffer,
    pub dispatches: Vec<Dispatch>,
    pub inputs: Vec<(String, TensorType, Loc)>,
    pub outputs: HashMap<String, Readback>,
    pub states: HashMap<String, Readback>,
}

fn pad4(n: u64) -> u64 {
    n.max(4).div_ceil(4) * 4
}

/// The bytes a tensor takes in a buffer of `elem` storage.
pub(super) fn encode(t: &Tensor, elem: Elem) -> Vec<u8> {
    let mut bytes = match (elem, t.dtype()) {
        (Elem::Word(DType::F16), _) => bytemuck::cast_slice(&t.to_f32()).to_vec(),
        _ => t.to_bytes(),
    };
    bytes.resize(pad4(bytes.len() as u64) as usize, 0);
    bytes
}

/// The tensor of type `ty` stored in `bytes` as `elem`.
pub(super) fn decode(bytes: &[u8], elem: Elem, ty: &TensorType) -> Result<Tensor> {
    match elem {
        Elem::Word(DType::F16) => {
            let words = &bytes[..ty.numel() * 4];
            Tensor::from_f32(DType::F16, ty.shape.clone(), bytemuck::pod_collect_to_vec(words))
        }
        _ => Tensor::from_bytes(ty, &bytes[..ty.byte_size()]),
    }
}

/// Device buffers that executables compiled together share: weights by name (uploaded
/// once) and persistent buffers by name.
#[derive(Default)]
struct Shared {
    weights: HashMap<String, (wgpu::Buffer, u64)>,
    states: HashMap<String, wgpu::Buffer>,
}

pub(super) async fn compile_linked(
    backend: &WgpuBackend,
    plans: &[&Plan],
    weights: &Weights,
) -> Result<Vec<Box<dyn Executable>>> {
    linked_states(plans)?;
    let mut shared = Shared::default();
    let mut out = Vec::with_capacity(plans.len());
    for plan in plans {
        out.push(compile(backend, plan, weights, &mut shared).await?);
    }
    Ok(out)
}

async fn compile(
    backend: &WgpuBackend,
    plan: &Plan,
    weights: &Weights,
    shared: &mut Shared,
) -> Result<Box<dyn Executable>> {
    backend.check_alive()?;
    let options = backend.plan_options();
    let replanned;
    let plan = if plan.options == options {
        plan
    } else {
        replanned = plan_with(plan.graph.clone(), &options)?;
        &replanned
    };
    let g = &plan.graph;
    if g.scalars().len() > MAX_RUNTIME_SCALARS {
        return Err(Error::Unsupported {
            op: format!("{} runtime scalars", g.scalars().len()),
            backend: format!("wgpu (at most {MAX_RUNTIME_SCALARS})"),
        });
    }
    let built = scoped(&backend.device, g.name(), || build(backend, plan, weights, shared)).await;
    if built.is_err() {
        // A rejected shader must not stay cached as if it were good.
        if let Ok(mut cache) = backend.cache.lock() {
            *cache = PipelineCache::default();
        }
    }
    let built = built??;
    backend.check_alive()?;
    Ok(Box::new(built))
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

fn build(backend: &WgpuBackend, plan: &Plan, weights: &Weights, shared: &mut Shared) -> Result<WgpuExecutable> {
    let device = &backend.device;
    let g = &plan.graph;
    let storage_usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
    let mut buffers = HashMap::new();

    let chunk = plan.options.max_buffer_bytes as u64;
    let arena_bytes = plan.report.arena_bytes as u64;
    let chunks = arena_bytes.div_ceil(chunk).max(1);
    for c in 0..chunks {
        let size = pad4((arena_bytes - c * chunk).min(chunk));
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("arena"),
            size,
            usage: storage_usage,
            mapped_at_creation: false,
        });
        buffers.insert(Buf::Arena(c as usize), buffer);
    }

    let weight_elem = if backend.f16 { Elem::F16Native } else { Elem::F16Packed };
    let leaf_elem = |ty: &TensorType| if ty.dtype == DType::F16 { weight_elem } else { Elem::Word(ty.dtype) };
    let mut locs: Vec<Option<Loc>> = vec![None; g.len()];
    let mut weight_index = HashMap::new();
    let mut state_index = HashMap::new();
    for id in g.ids() {
        let node = g.node(id);
        let loc = match (&plan.storage[id.index()], &node.op) {
            (Storage::Arena { offset, size }, _) => {
                let offset = *offset as u64;
                Loc {
                    buf: Buf::Arena((offset / chunk) as usize),
                    offset: offset % chunk,
                    size: pad4(*size as u64),
                    elem: Elem::Word(node.ty.dtype),
                }
            }
            (Storage::Param(name), Op::Param(p)) => {
                let w =
                    weights.get(name).ok_or_else(|| Error::BadArgument(format!("weight '{name}' was not supplied")))?;
                w.expect_type(&p.ty, &format!("weight '{name}'"))?;
                let next = weight_index.len();
                let index = *weight_index.entry(name.clone()).or_insert(next);
                let elem = leaf_elem(&p.ty);
                let (buffer, size) = shared
                    .weights
                    .entry(name.clone())
                    .or_insert_with(|| {
                        let bytes = encode(w, elem);
                        let buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                            label: Some(name),
                            contents: &bytes,
                            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                        });
                        (buffer, bytes.len() as u64)
                    })
                    .clone();
                buffers.insert(Buf::Weight(index), buffer);
                Loc { buf: Buf::Weight(index), offset: 0, size, elem }
            }
            (Storage::Const(c), Op::Const(value)) if *c == id => {
                let elem = leaf_elem(&node.ty);
                let bytes = encode(&value.value, elem);
                let buffer = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("const"),
                    contents: &bytes,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                });
                buffers.insert(Buf::Const(id.index()), buffer);
                Loc { buf: Buf::Const(id.index()), offset: 0, size: bytes.len() as u64, elem }
            }
            (Storage::State(name), Op::State(s)) => {
                let index = state_index.len();
                state_index.insert(name.clone(), (index, s.ty.clone()));
                let size = pad4(s.ty.numel() as u64 * 4);
                let buffer = shared
                    .states
                    .entry(name.clone())
                    .or_insert_with(|| {
                        device.create_buffer(&wgpu::BufferDescriptor {
                            label: Some(name),
                            size,
                            usage: storage_usage,
                            mapped_at_creation: false,
                        })
                    })
                    .clone();
                buffers.insert(Buf::State(index), buffer);
                Loc { buf: Buf::State(index), offset: 0, size, elem: Elem::Word(s.ty.dtype) }
            }
            // Views share their input's storage.
            _ => {
                let input = node
                    .inputs
                    .first()
                    .and_then(|i| locs[i.index()])
                    .ok_or_else(|| Error::InvalidGraph(format!("%{} ({}) has no storage", id.0, node.op.name())))?;
                Loc {
                    elem: if matches!(input.elem, Elem::Word(_)) { Elem::Word(node.ty.dtype) } else { input.elem },
                    ..input
                }
            }
        };
        locs[id.index()] = Some(loc);
    }
    let loc = |id: NodeId| locs[id.index()].ok_or_else(|| Error::InvalidGraph(format!("%{} has no storage", id.0)));

    let mut cache = backend.cache.lock().map_err(|_| Error::Backend("pipeline cache poisoned".into()))?;
    let mut specs = Vec::new();
    for &id in &plan.schedule {
        let node = g.node(id);
        let inputs: Vec<&TensorType> = node.inputs.iter().map(|&i| g.ty(i)).collect();
        let ctx = KernelCtx { inputs: &inputs, output: &node.ty, f16: backend.f16, cpu: backend.cpu_kernels };
        if let Lowering::Kernel(spec) = lower(&node.op, &ctx)? {
            specs.push((id, spec));
        }
    }
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
        size: (MAX_RUNTIME_SCALARS * 4) as u64,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });

    let mut dispatches = Vec::with_capacity(specs.len());
    for (k, (id, spec)) in specs.into_iter().enumerate() {
        let node = g.node(id);
        let out = loc(id)?;
        let mut ranges: Vec<Loc> = Vec::new();
        let mut input_binding = Vec::new();
        for &i in &node.inputs {
            let l = loc(i)?;
            // An input stored exactly where the output goes (in place, or a cache write) is
            // read through the output binding: WebGPU forbids aliasing writable bindings.
            let j = if l.buf == out.buf && l.offset == out.offset {
                usize::MAX
            } else if let Some(j) =
                ranges.iter().position(|r| r.buf == l.buf && r.offset == l.offset && r.size == l.size)
            {
                j
            } else {
                ranges.push(l);
                ranges.len() - 1
            };
            input_binding.push(j);
        }
        ranges.push(out);
        let out_binding = ranges.len() - 1;
        for j in &mut input_binding {
            if *j == usize::MAX {
                *j = out_binding;
            }
        }
        let bindings: Vec<BindingKind> = ranges
            .iter()
            .map(|r| BindingKind { elem: r.elem, writable: matches!(r.buf, Buf::Arena(_) | Buf::State(_)) })
            .collect();
        let key = PipelineKey {
            kernel: spec.name,
            defines: spec.defines.clone(),
            bindings: bindings.clone(),
            input_binding,
            output_dtype: node.ty.dtype,
            params_wgsl: spec.params_wgsl,
        };
        let pipeline = pipeline(device, &mut cache, &key, spec.source);
        let (layout, _) = &cache.layouts[&bindings];
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
            entries.push(wgpu::BindGroupEntry {
                binding: j as u32 + 2,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &buffers[&r.buf],
                    offset: r.offset,
                    size: wgpu::BufferSize::new(r.size),
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
    drop(cache);

    let staging = |size: u64, label: &str| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    };
    let mut inputs = Vec::new();
    for id in g.ids() {
        if let Op::Input(i) = &g.node(id).op {
            inputs.push((i.name.clone(), i.ty.clone(), loc(id)?));
        }
    }
    let mut outputs = HashMap::new();
    for (name, id) in g.outputs() {
        let l = loc(*id)?;
        outputs.insert(name.clone(), Readback { loc: l, ty: g.ty(*id).clone(), staging: staging(l.size, name) });
    }
    let mut states = HashMap::new();
    for (name, (index, ty)) in state_index {
        let l =
            Loc { buf: Buf::State(index), offset: 0, size: pad4(ty.numel() as u64 * 4), elem: Elem::Word(ty.dtype) };
        states.insert(name.clone(), Readback { loc: l, ty, staging: staging(l.size, &name) });
    }
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
        inputs,
        outputs,
        states,
    })
}

/// The pipeline for `key`, created (with its layout) on first use.
fn pipeline(
    device: &wgpu::Device,
    cache: &mut PipelineCache,
    key: &PipelineKey,
    source: &str,
) -> wgpu::ComputePipeline {
    if let Some(p) = cache.pipelines.get(key) {
        return p.clone();
    }
    let (_, pipeline_layout) = cache.layouts.entry(key.bindings.clone()).or_insert_with(|| {
        let mut entries = vec![uniform_entry(0, true), uniform_entry(1, false)];
        for (j, b) in key.bindings.iter().enumerate() {
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
        let layout =
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &entries });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        (layout, pipeline_layout)
    });
    let text = module_source(key, source);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(key.kernel),
        source: wgpu::ShaderSource::Wgsl(text.into()),
    });
    let p = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(key.kernel),
        layout: Some(pipeline_layout),
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    cache.pipelines.insert(key.clone(), p.clone());
    p
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
    use crate::exec::wgpu::WgpuOptions;

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
