//! Adapter and device set-up, and the backend object that owns them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::compile::compile_linked;
use super::kernel::{BindingKind, PipelineKey};
use susurrus_core::error::{Error, Result};
use susurrus_core::exec::{Backend, BoxFuture, Executable, Profile, Weights};
use susurrus_core::plan::{Plan, PlanOptions};

/// Choices made when the device is created.
#[derive(Clone, Debug)]
pub struct WgpuOptions {
    /// Use `shader-f16` when the adapter has it (f16 weights read natively). Off forces the
    /// path every adapter supports (f16 unpacked from pairs of `u32`).
    pub allow_f16: bool,
    /// Use the adapter's matrix units (cooperative matrices, see [`matrix_units`]) for matrix
    /// products when it has them and `allow_f16` is on. Off keeps the products in f32 on
    /// the same device (the GPU suite runs both).
    pub allow_matrix_units: bool,
    /// Use the adapter's subgroup operations (`Features::SUBGROUP`) in the axis kernels'
    /// lane folds when it has them and the kernels are the GPU ones. Off keeps the folds in
    /// workgroup memory, as in a browser, where wgpu cannot ask for subgroups (the GPU suite
    /// runs both). Matrix units bring subgroups of their own.
    pub allow_subgroups: bool,
    /// Prefer a software adapter (tests that must not depend on the machine's GPU).
    pub force_fallback_adapter: bool,
    /// Split the arena into buffers of at most this many bytes even when the device allows
    /// more (to reproduce a browser's 128 MiB binding limit natively, or to test the split).
    pub max_buffer_bytes: Option<usize>,
    /// Use the kernels written for GPUs even on a CPU adapter (lavapipe, SwiftShader), which
    /// otherwise gets the `*_cpu` kernel variants (see `kernels/README.md`). Tests set it so
    /// that both kernel families run on the software adapters CI has.
    pub force_gpu_kernels: bool,
    /// Ask the device for WebGPU's default buffer limits (128 MiB per storage binding, 256 MiB
    /// per buffer) instead of all the adapter offers: what a page gets where the browser
    /// grants no more, with the device itself refusing anything larger.
    pub default_buffer_limits: bool,
    /// Time every dispatch with timestamp queries and add it to this profile (`susurrus bench
    /// --profile`); an adapter without timestamp queries is then an error.
    pub profile: Option<Profile>,
    /// Keep the driver's compiled pipelines in this folder (one file per adapter, wgpu's
    /// `PipelineCache`) where the backend has such a cache (Vulkan), and start from it. Drivers
    /// with a disk cache of their own gain little; those without (mobile) skip every compile
    /// after the first run. Default: `~/.cache/susurrus/pipelines` natively. A folder that
    /// cannot be written is an error when pipelines are stored.
    pub pipeline_cache: Option<std::path::PathBuf>,
    /// Open the first adapter whose name contains this (ignoring case) instead of the one
    /// wgpu prefers; none matching is an error naming the adapters there are. Default:
    /// `WGPU_ADAPTER_NAME` natively (wgpu's own convention), none in the browser.
    pub adapter_name: Option<String>,
}

/// WebGPU's default `maxStorageBufferBindingSize`.
pub const DEFAULT_MAX_STORAGE_BINDING: u64 = 128 << 20;
/// WebGPU's default `maxBufferSize`.
pub const DEFAULT_MAX_BUFFER: u64 = 256 << 20;

impl Default for WgpuOptions {
    fn default() -> Self {
        WgpuOptions {
            allow_f16: true,
            allow_matrix_units: true,
            allow_subgroups: true,
            force_fallback_adapter: false,
            max_buffer_bytes: None,
            force_gpu_kernels: false,
            default_buffer_limits: false,
            profile: None,
            pipeline_cache: default_pipeline_cache(),
            adapter_name: default_adapter_name(),
        }
    }
}

/// `WGPU_ADAPTER_NAME`, when set and not empty (natively).
fn default_adapter_name() -> Option<String> {
    if cfg!(target_arch = "wasm32") {
        return None;
    }
    std::env::var("WGPU_ADAPTER_NAME").ok().filter(|name| !name.trim().is_empty())
}

/// The wgpu instance every native and browser backend starts from: Vulkan, Metal, DX12 and
/// the browser's WebGPU (`WGPU_BACKEND` narrows or changes them), not OpenGL. The kernels are
/// written for the first four; and OpenGL's start-up (EGL) probes for a Wayland display,
/// which prints `error: XDG_RUNTIME_DIR is invalid or not set` wherever that variable is unset
/// (containers, cron jobs), on every run.
pub fn instance() -> wgpu::Instance {
    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    descriptor.backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::PRIMARY);
    wgpu::Instance::new(descriptor)
}

/// The adapter `options` ask for: the first one whose name contains
/// [`WgpuOptions::adapter_name`], else the one wgpu prefers for high performance.
pub async fn choose_adapter(instance: &wgpu::Instance, options: &WgpuOptions) -> Result<wgpu::Adapter> {
    let Some(wanted) = &options.adapter_name else {
        return instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: options.force_fallback_adapter,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| Error::Backend(format!("no GPU adapter found: {e}")));
    };
    let adapters = instance.enumerate_adapters(wgpu::Backends::all()).await;
    let needle = wanted.to_lowercase();
    let names: Vec<String> = adapters.iter().map(|a| a.get_info().name).collect();
    match adapters.into_iter().find(|a| a.get_info().name.to_lowercase().contains(&needle)) {
        Some(adapter) => Ok(adapter),
        None if names.is_empty() => {
            Err(Error::Backend(format!("adapter name {wanted:?} (WGPU_ADAPTER_NAME): there is no adapter at all")))
        }
        None => Err(Error::Backend(format!(
            "adapter name {wanted:?} (WGPU_ADAPTER_NAME) matches none of the adapters here: {}",
            names.join(", ")
        ))),
    }
}

/// `$XDG_CACHE_HOME/susurrus/pipelines`, else `~/.cache/susurrus/pipelines` (natively).
fn default_pipeline_cache() -> Option<std::path::PathBuf> {
    if cfg!(target_arch = "wasm32") {
        return None;
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))?;
    Some(base.join("susurrus").join("pipelines"))
}

/// The most bytes one buffer of a device with `limits` may hold as this backend uses it (a
/// storage binding, at most a buffer): the size of its arena blocks, and of the row blocks of
/// weights larger than that ([`susurrus_core::passes::split_weights`]).
pub fn buffer_limit(limits: &wgpu::Limits) -> usize {
    aligned(limits.max_storage_buffer_binding_size.min(limits.max_buffer_size) as usize)
}

/// Subgroup width the matrix kernels are written for (`kernels/product_coop.wgsl`): a
/// workgroup of 128 invocations is four subgroups, each owning a quadrant of the output tile.
pub const MATRIX_SUBGROUP: u32 = 32;

/// Whether the matrix kernels can run on `adapter`: it offers cooperative matrices (wgpu's
/// experimental feature: Vulkan's `VK_KHR_cooperative_matrix`, tensor cores on NVIDIA) with
/// the configuration they use, 16 x 16 x 16 with f16 inputs and f32 accumulators, on
/// subgroups of exactly [`MATRIX_SUBGROUP`] lanes, and `shader-f16` and subgroups.
pub fn matrix_units(adapter: &wgpu::Adapter) -> bool {
    let needed =
        wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SUBGROUP | wgpu::Features::SHADER_F16;
    let info = adapter.get_info();
    adapter.features().contains(needed)
        && info.subgroup_min_size == MATRIX_SUBGROUP
        && info.subgroup_max_size == MATRIX_SUBGROUP
        && adapter.cooperative_matrix_properties().iter().any(|c| {
            (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
                && c.ab_type == wgpu::CooperativeScalarType::F16
                && c.cr_type == wgpu::CooperativeScalarType::F32
        })
}

/// Rounded down to the arena alignment, so offsets stay aligned in every block.
fn aligned(bytes: usize) -> usize {
    bytes / susurrus_core::plan::ARENA_ALIGN * susurrus_core::plan::ARENA_ALIGN
}

/// Pipelines and layouts shared by every plan compiled on one device.
#[derive(Default)]
pub(super) struct PipelineCache {
    pub pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
    pub layouts: HashMap<Vec<BindingKind>, (wgpu::BindGroupLayout, wgpu::PipelineLayout)>,
}

/// The driver's pipeline cache and the file it is kept in ([`WgpuOptions::pipeline_cache`]).
pub(super) struct StoredPipelines {
    pub cache: wgpu::PipelineCache,
    pub file: std::path::PathBuf,
    /// A digest of the data the file holds (as read, or as last written): a compile whose
    /// pipelines all came from the file leaves the data as it was, and writing it again would
    /// cost every start-up a few milliseconds per megabyte.
    pub on_disk: Mutex<Option<u64>>,
}

/// A digest of pipeline cache data, to tell whether it changed.
pub(super) fn digest(data: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut hasher);
    hasher.finish()
}

impl StoredPipelines {
    /// Writes the cache's data to its file when it differs from what the file holds: to a
    /// temporary file beside it, then renamed over it, so a reader never sees half a file. A
    /// folder that cannot be written is an error naming it, and leaves no temporary file
    /// behind.
    pub fn store(&self) -> Result<()> {
        let Some(data) = self.cache.get_data() else { return Ok(()) };
        let mut on_disk = self.on_disk.lock().map_err(|_| Error::Backend("pipeline cache poisoned".into()))?;
        let new = digest(&data);
        if *on_disk == Some(new) {
            return Ok(());
        }
        let fail = |what: &str, e: std::io::Error| {
            Error::Backend(format!("cannot {what} the pipeline cache {}: {e}", self.file.display()))
        };
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail("create the folder of", e))?;
        }
        // Unique to this process and call: backends of one process may store side by side.
        static STORES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = STORES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let temp = self.file.with_extension(format!("tmp{}-{n}", std::process::id()));
        if let Err(e) = std::fs::write(&temp, &data).and_then(|()| std::fs::rename(&temp, &self.file)) {
            let _ = std::fs::remove_file(&temp);
            return Err(fail("write", e));
        }
        *on_disk = Some(new);
        Ok(())
    }
}

/// A wgpu device ready to compile plans.
pub struct WgpuBackend {
    /// Kept alive with the device: in the browser a collected instance loses the device.
    _instance: wgpu::Instance,
    _adapter: wgpu::Adapter,
    pub(super) device: wgpu::Device,
    pub(super) queue: wgpu::Queue,
    pub(super) info: wgpu::AdapterInfo,
    pub(super) f16: bool,
    /// Matrix products run on cooperative matrices ([`matrix_units`]).
    pub(super) matrix: bool,
    /// The axis kernels fold lanes on subgroups at least this wide
    /// ([`WgpuOptions::allow_subgroups`]).
    pub(super) subgroups: Option<u32>,
    /// Kernels choose their CPU-adapter variants (the adapter is a CPU and
    /// [`WgpuOptions::force_gpu_kernels`] is off).
    pub(super) cpu_kernels: bool,
    /// The GPU kernels were forced on a CPU adapter (named apart in reports).
    forced_gpu_kernels: bool,
    pub(super) limits: wgpu::Limits,
    pub(super) max_buffer_bytes: Option<usize>,
    /// Set by the device-lost callback: every later call fails with `Error::DeviceLost`.
    pub(super) lost: Arc<Mutex<Option<String>>>,
    /// The first GPU error no error scope caught, reported by the next call.
    pub(super) errors: Arc<Mutex<Option<String>>>,
    pub(super) cache: Mutex<PipelineCache>,
    /// The driver's pipeline cache on disk, where the backend has one.
    pub(super) pipeline_cache: Option<StoredPipelines>,
    /// Where dispatch times go when profiling ([`WgpuOptions::profile`]).
    pub(super) profile: Option<Profile>,
    /// What the device was opened with, to open another the same way ([`Backend::reopen`]).
    options: WgpuOptions,
}

impl WgpuBackend {
    /// The default adapter (high performance) with default options.
    pub async fn new() -> Result<Self> {
        WgpuBackend::with_options(&WgpuOptions::default()).await
    }

    /// An adapter and device chosen with `options`. Fails with a clear error when there is
    /// no adapter or the device cannot be created.
    pub async fn with_options(options: &WgpuOptions) -> Result<Self> {
        let instance = instance();
        let adapter = choose_adapter(&instance, options).await?;
        let f16 = options.allow_f16 && adapter.features().contains(wgpu::Features::SHADER_F16);
        let mut features = if f16 { wgpu::Features::SHADER_F16 } else { wgpu::Features::empty() };
        let matrix = f16 && options.allow_matrix_units && matrix_units(&adapter);
        if matrix {
            features |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SUBGROUP;
        }
        if options.profile.is_some() {
            if !adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
                return Err(Error::Backend(format!(
                    "profiling needs timestamp queries, which the adapter {} does not offer",
                    adapter.get_info().name
                )));
            }
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let info = adapter.get_info();
        let cpu_adapter = info.device_type == wgpu::DeviceType::Cpu;
        let cpu_kernels = cpu_adapter && !options.force_gpu_kernels;
        let subgroups = (options.allow_subgroups
            && !cpu_kernels
            && adapter.features().contains(wgpu::Features::SUBGROUP)
            && info.subgroup_min_size.is_power_of_two())
        .then_some(info.subgroup_min_size);
        if subgroups.is_some() {
            features |= wgpu::Features::SUBGROUP;
        }
        let cache_file = match (&options.pipeline_cache, wgpu::util::pipeline_cache_key(&info)) {
            (Some(dir), Some(key)) if adapter.features().contains(wgpu::Features::PIPELINE_CACHE) => {
                features |= wgpu::Features::PIPELINE_CACHE;
                Some(dir.join(key))
            }
            _ => None,
        };
        let mut limits = adapter.limits();
        if options.default_buffer_limits {
            limits.max_storage_buffer_binding_size =
                limits.max_storage_buffer_binding_size.min(DEFAULT_MAX_STORAGE_BINDING);
            limits.max_buffer_size = limits.max_buffer_size.min(DEFAULT_MAX_BUFFER);
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("susurrus"),
                required_features: features,
                required_limits: limits.clone(),
                experimental_features: if matrix {
                    // SAFETY: wgpu asks callers of its experimental features to accept that
                    // their implementation may still have bugs. Cooperative matrices are asked
                    // for only where the adapter lists the configuration the matrix kernels
                    // use, the kernels are validated by naga, and the GPU suite checks their
                    // results against the reference on every run.
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                // Smaller memory blocks: on an H100 the same speed as `Performance`'s, with 50 MiB
                // less host memory, and start-up and exit (allocating and freeing the blocks)
                // 20-40 ms shorter.
                memory_hints: wgpu::MemoryHints::MemoryUsage,
                trace: wgpu::Trace::Off,
            })
            .await
            .map_err(|e| Error::Backend(format!("cannot open a device on {}: {e}", info.name)))?;
        let lost = Arc::new(Mutex::new(None));
        let flag = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut l) = flag.lock() {
                *l = Some(format!("{reason:?}: {message}"));
            }
        });
        // wgpu panics on errors no scope catches; keep the first one for the next call to
        // report instead.
        let errors = Arc::new(Mutex::new(None));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut first) = sink.lock() {
                first.get_or_insert_with(|| e.to_string());
            }
        }));
        let pipeline_cache = cache_file.map(|file| {
            let data = std::fs::read(&file).ok();
            // SAFETY: the data is what `PipelineCache::get_data` wrote for an adapter with this
            // key, or anything else in that file: wgpu checks its header (adapter, driver,
            // version, size and hash of the data) and, with `fallback`, starts empty when the
            // data does not fit.
            let cache = unsafe {
                device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                    label: Some("susurrus pipelines"),
                    data: data.as_deref(),
                    fallback: true,
                })
            };
            let on_disk = Mutex::new(data.as_deref().map(digest));
            StoredPipelines { cache, file, on_disk }
        });
        Ok(WgpuBackend {
            _instance: instance,
            _adapter: adapter,
            device,
            queue,
            info,
            f16,
            matrix,
            subgroups,
            cpu_kernels,
            forced_gpu_kernels: cpu_adapter && options.force_gpu_kernels,
            limits,
            max_buffer_bytes: options.max_buffer_bytes,
            lost,
            errors,
            cache: Mutex::new(PipelineCache::default()),
            pipeline_cache,
            profile: options.profile.clone(),
            options: options.clone(),
        })
    }

    /// The adapter's name, driver and backend, for reports.
    pub fn adapter(&self) -> String {
        format!("{} ({:?}, {})", self.info.name, self.info.backend, self.info.driver)
    }

    /// True when f16 weights are read with native `shader-f16`.
    pub fn has_f16(&self) -> bool {
        self.f16
    }

    /// True when matrix products run on the adapter's matrix units ([`matrix_units`]).
    pub fn has_matrix_units(&self) -> bool {
        self.matrix
    }

    /// The narrowest subgroup the axis kernels' lane folds run on, when they use subgroups.
    pub fn subgroups(&self) -> Option<u32> {
        self.subgroups
    }

    /// True when the adapter is software (lavapipe, SwiftShader, WARP): the same work runs
    /// tens of times slower than on the CPU backend with the same cores.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// True when kernels use their CPU-adapter variants.
    pub fn cpu_kernels(&self) -> bool {
        self.cpu_kernels
    }

    /// The device, e.g. to read its internal counters in tests, or to destroy it (a test of
    /// what follows a lost device).
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The plan options this device needs: arena buffers within one binding's limit, f16
    /// activations widened to f32 words.
    pub fn plan_options(&self) -> PlanOptions {
        let device_max = buffer_limit(&self.limits);
        PlanOptions {
            max_buffer_bytes: self.max_buffer_bytes.map_or(device_max, |m| aligned(m.min(device_max))),
            f16_bytes: 4,
        }
    }

    /// `Error::DeviceLost` once the device is gone; the first uncaught GPU error otherwise.
    pub(super) fn check_alive(&self) -> Result<()> {
        check_alive(&self.lost, &self.errors)
    }
}

/// `Error::DeviceLost` once the device is gone, else the first GPU error no scope caught
/// (taken, so it is reported once).
pub(super) fn check_alive(lost: &Mutex<Option<String>>, errors: &Mutex<Option<String>>) -> Result<()> {
    match lost.lock() {
        Ok(l) => {
            if let Some(why) = &*l {
                return Err(Error::DeviceLost(why.clone()));
            }
        }
        Err(_) => return Err(Error::DeviceLost("device state poisoned".into())),
    }
    match errors.lock().map(|mut e| e.take()) {
        Ok(Some(e)) => Err(Error::Backend(format!("the GPU reported an error: {e}"))),
        Ok(None) => Ok(()),
        Err(_) => Err(Error::Backend("GPU error state poisoned".into())),
    }
}

impl Backend for WgpuBackend {
    fn name(&self) -> &'static str {
        match (self.f16, self.forced_gpu_kernels, self.subgroups.is_some()) {
            _ if self.matrix => "wgpu-f16-matrix",
            (true, true, true) => "wgpu-f16-gpu-kernels-subgroups",
            (true, true, false) => "wgpu-f16-gpu-kernels",
            (true, false, true) => "wgpu-f16-subgroups",
            (true, false, false) => "wgpu-f16",
            (false, true, true) => "wgpu-gpu-kernels-subgroups",
            (false, true, false) => "wgpu-gpu-kernels",
            (false, false, true) => "wgpu-subgroups",
            (false, false, false) => "wgpu",
        }
    }

    fn compile_linked<'a>(
        &'a self,
        plans: Vec<&'a Plan>,
        weights: &'a Weights,
    ) -> BoxFuture<'a, Vec<Box<dyn Executable>>> {
        Box::pin(async move { compile_linked(self, &plans, weights).await })
    }

    fn f16_products(&self) -> bool {
        self.matrix
    }

    /// Without matrix units (whose products round to f16), on the same device; the pipelines
    /// it compiles are kept apart, in memory only.
    fn with_f32_products(&self) -> Option<Box<dyn Backend>> {
        self.matrix.then(|| {
            Box::new(WgpuBackend {
                _instance: self._instance.clone(),
                _adapter: self._adapter.clone(),
                device: self.device.clone(),
                queue: self.queue.clone(),
                info: self.info.clone(),
                f16: self.f16,
                matrix: false,
                subgroups: self.subgroups,
                cpu_kernels: self.cpu_kernels,
                forced_gpu_kernels: self.forced_gpu_kernels,
                limits: self.limits.clone(),
                max_buffer_bytes: self.max_buffer_bytes,
                lost: self.lost.clone(),
                errors: self.errors.clone(),
                cache: Mutex::new(PipelineCache::default()),
                pipeline_cache: None,
                profile: None,
                options: WgpuOptions {
                    allow_matrix_units: false,
                    pipeline_cache: None,
                    profile: None,
                    ..self.options.clone()
                },
            }) as Box<dyn Backend>
        })
    }

    /// The adapter asked for again and a device opened on it with the same options: after a
    /// loss the old adapter may be gone too (a browser's adapter opens one device only).
    fn reopen(&self) -> BoxFuture<'_, Box<dyn Backend>> {
        Box::pin(async move { Ok(Box::new(WgpuBackend::with_options(&self.options).await?) as Box<dyn Backend>) })
    }

    fn lose_device(&self) -> Result<()> {
        self.device.destroy();
        Ok(())
    }
}
