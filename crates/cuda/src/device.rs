//! Opening the device: the driver, a context and stream, the kernel modules compiled with
//! NVRTC for the device's architecture, and cuBLAS. Device and pinned host memory owned by
//! the backend's executables. Every failure is an [`Error`] saying what was missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, DriverError, result, sys};
use cudarc::nvrtc::Ptx;
use susurrus_core::{Error, Result};

use super::blas::Blas;
use super::kernel_cache::KernelCache;
use super::lower::Precision;
use super::{nvrtc, source};
use susurrus_core::exec::Profile;

/// What [`CudaBackend::new`] opens.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// The device ordinal (0 = first GPU).
    pub device: usize,
    pub precision: Precision,
    /// Where compiled kernels are kept between runs ([`KernelCache`]); `None` compiles them on
    /// every start. The default is [`KernelCache::default_dir`].
    pub kernel_cache: Option<PathBuf>,
}

impl Default for CudaOptions {
    /// The first GPU, f16 products, kernels kept in [`KernelCache::default_dir`].
    fn default() -> Self {
        CudaOptions { device: 0, precision: Precision::default(), kernel_cache: KernelCache::default_dir() }
    }
}

/// The kernel modules for `arch` (CUBINs, one per kernel file): each from the cache in
/// `cache_dir` when it holds it and the driver loads it, else compiled with NVRTC — the missing
/// ones side by side, on a thread each — and stored there (a cache that cannot be written only
/// costs the next start its compile).
fn load_kernels(ctx: &Arc<CudaContext>, arch: &str, cache_dir: Option<&Path>) -> Result<Vec<Arc<CudaModule>>> {
    let cache = cache_dir.map(KernelCache::at);
    let version = if cache.is_some() { nvrtc::version()? } else { String::new() };
    let options = nvrtc::options(arch);
    let load = |cubin: Vec<u8>| ctx.load_module(Ptx::from_binary(cubin));
    let sources = source::file_sources();
    let mut modules: Vec<Option<Arc<CudaModule>>> = Vec::with_capacity(sources.len());
    let mut keys = Vec::with_capacity(sources.len());
    for (_, text) in &sources {
        let mut settings = vec![arch, version.as_str()];
        settings.extend(options.iter().map(String::as_str));
        let key = KernelCache::key(text, &settings);
        let cached = cache.as_ref().and_then(|c| c.load(&key)).and_then(|cubin| load(cubin).ok());
        modules.push(cached);
        keys.push(key);
    }
    let compiled: Vec<(usize, Result<Vec<u8>>)> = std::thread::scope(|scope| {
        let jobs: Vec<_> = (0..sources.len())
            .filter(|&i| modules[i].is_none())
            .map(|i| {
                let text = &sources[i].1;
                (i, scope.spawn(move || nvrtc::compile(text, arch)))
            })
            .collect();
        jobs.into_iter()
            .map(|(i, job)| {
                let name = sources[i].0;
                let panicked = || Error::Backend(format!("cuda: compiling kernels/{name} panicked"));
                (i, job.join().map_err(|_| panicked()).and_then(|r| r))
            })
            .collect()
    });
    for (i, cubin) in compiled {
        let cubin = cubin?;
        if let Some(cache) = &cache {
            let _ = cache.store(&keys[i], &cubin);
        }
        let what = format!("loading the kernels of kernels/{}", sources[i].0);
        modules[i] = Some(load(cubin).map_err(|e| driver(&what, e))?);
    }
    Ok(modules.into_iter().flatten().collect())
}

/// A driver error as an [`Error`] saying what was being done. The sticky errors (a fault in
/// a kernel, an uncorrectable ECC error, a GPU gone from the bus or reset) are
/// [`Error::DeviceLost`]: the context is unusable from then on.
pub(super) fn driver(what: &str, e: DriverError) -> Error {
    use sys::CUresult::*;
    match e.0 {
        CUDA_ERROR_OUT_OF_MEMORY => Error::Backend(format!("cuda: out of device memory {what}")),
        code @ (CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_LAUNCH_FAILED
        | CUDA_ERROR_LAUNCH_TIMEOUT
        | CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_INVALID_ADDRESS_SPACE
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_ASSERT
        | CUDA_ERROR_ECC_UNCORRECTABLE
        | CUDA_ERROR_DEVICE_UNAVAILABLE
        | CUDA_ERROR_CONTEXT_IS_DESTROYED
        | CUDA_ERROR_UNKNOWN) => Error::DeviceLost(format!("cuda: {what} failed: {code:?}")),
        code => Error::Backend(format!("cuda: {what} failed: {code:?}")),
    }
}

/// An open device with its compiled kernels.
pub struct CudaBackend {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    /// The kernels, a module per kernel file.
    modules: Vec<Arc<CudaModule>>,
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
    pub(super) blas: Rc<Blas>,
    pub(super) precision: Precision,
    device_name: String,
    arch: String,
    pub(super) profile: Option<Profile>,
}

impl CudaBackend {
    /// Opens device `options.device`. Fails with an error naming what is missing: the driver
    /// library, a device, NVRTC or cuBLAS (with NVRTC's log when the kernels do not compile).
    /// A library too old for a function this backend calls is an error too (the loader
    /// panics on a missing symbol; the panic is caught here).
    pub fn new(options: &CudaOptions) -> Result<Self> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Self::open(options))).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown failure");
            Err(Error::Backend(format!("cuda: the CUDA libraries could not be used: {what}")))
        })
    }

    fn open(options: &CudaOptions) -> Result<Self> {
        // SAFETY: only tries to open the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Backend(
                "cuda: no NVIDIA driver: the CUDA driver library (libcuda.so) was not found".into(),
            ));
        }
        result::init().map_err(|e| driver("initialising the driver", e))?;
        let count = CudaContext::device_count().map_err(|e| driver("counting devices", e))?;
        if count <= 0 {
            return Err(Error::Backend("cuda: the driver found no CUDA device".into()));
        }
        if options.device >= count as usize {
            return Err(Error::Backend(format!(
                "cuda: there is no device {} (the driver found {count})",
                options.device
            )));
        }
        let ctx = CudaContext::new(options.device).map_err(|e| driver("opening the device", e))?;
        // Launches take raw addresses; the context need not track buffer use with events
        // (which stream capture would record as well).
        // SAFETY: this backend synchronises its one stream itself.
        unsafe { ctx.disable_event_tracking() };
        let device_name = ctx.name().map_err(|e| driver("reading the device name", e))?;
        let (major, minor) = ctx.compute_capability().map_err(|e| driver("reading the compute capability", e))?;
        let arch = format!("sm_{major}{minor}");
        let modules = load_kernels(&ctx, &arch, options.kernel_cache.as_deref())?;
        // Stream capture needs a stream of its own (the legacy default stream cannot capture).
        let stream = ctx.new_stream().map_err(|e| driver("creating a stream", e))?;
        let blas = Rc::new(Blas::new(&ctx, &stream)?);
        Ok(CudaBackend {
            ctx,
            stream,
            modules,
            functions: Mutex::new(HashMap::new()),
            blas,
            precision: options.precision,
            device_name,
            arch,
            profile: None,
        })
    }

    /// This backend's device, stream, kernels and cuBLAS handle with `precision`.
    pub fn with_precision(&self, precision: Precision) -> CudaBackend {
        CudaBackend {
            ctx: self.ctx.clone(),
            stream: self.stream.clone(),
            modules: self.modules.clone(),
            functions: Mutex::new(self.functions.lock().map(|f| f.clone()).unwrap_or_default()),
            blas: self.blas.clone(),
            precision,
            device_name: self.device_name.clone(),
            arch: self.arch.clone(),
            profile: None,
        }
    }

    /// Times every op of every run into `profile` (runs then launch op by op between timing
    /// events instead of replaying a CUDA graph).
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = Some(profile);
        self
    }

    /// The device's name as the driver reports it.
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// The architecture the kernels were compiled for (`sm_90`).
    pub fn arch(&self) -> &str {
        &self.arch
    }

    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Runs the trapping kernel of `kernels/device.cu` and waits for it: from then on
    /// every call on this context fails with a sticky error ([`Error::DeviceLost`]).
    pub(super) fn trap(&self) -> Result<()> {
        let function = self.function("lose_device")?;
        self.ctx.bind_to_thread().map_err(|e| driver("binding the context", e))?;
        // SAFETY: a kernel without parameters, on this backend's stream.
        unsafe {
            result::launch_kernel(function.cu_function(), (1, 1, 1), (1, 1, 1), 0, self.stream.cu_stream(), &mut [])
        }
        .map_err(|e| driver("launching lose_device", e))?;
        match self.stream.synchronize() {
            Err(e) => match driver("running lose_device", e) {
                Error::DeviceLost(_) => Ok(()),
                other => Err(other),
            },
            Ok(()) => Err(Error::Backend("cuda: the trapping kernel ran to its end".into())),
        }
    }

    /// The kernel `name`, from whichever module defines it.
    pub(super) fn function(&self, name: &'static str) -> Result<CudaFunction> {
        let mut functions = self.functions.lock().map_err(|_| Error::Backend("cuda: kernel table poisoned".into()))?;
        if let Some(f) = functions.get(name) {
            return Ok(f.clone());
        }
        let f = self
            .modules
            .iter()
            .find_map(|m| m.load_function(name).ok())
            .ok_or_else(|| Error::Backend(format!("cuda: no kernel module defines '{name}'")))?;
        functions.insert(name, f.clone());
        Ok(f)
    }
}

/// One device allocation, freed on drop.
pub(super) struct DeviceBuffer {
    pub ptr: u64,
    pub bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    /// `bytes` (at least 256) of zeroed device memory; `what` names it in an error.
    pub fn zeroed(ctx: &Arc<CudaContext>, bytes: usize, what: &str) -> Result<Self> {
        let bytes = bytes.max(256);
        ctx.bind_to_thread().map_err(|e| driver("binding the context", e))?;
        let mib = bytes as f64 / (1 << 20) as f64;
        // SAFETY: a plain allocation of the bound context; freed in Drop.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            let free = ctx.mem_get_info().map(|(f, t)| format!(" ({} of {} MiB free)", f >> 20, t >> 20));
            driver(&format!("allocating {mib:.1} MiB for {what}{}", free.unwrap_or_default()), e)
        })?;
        let buffer = DeviceBuffer { ptr, bytes, ctx: Arc::clone(ctx) };
        // SAFETY: `ptr` holds `bytes` bytes.
        unsafe { result::memset_d8_sync(ptr, 0, bytes) }.map_err(|e| driver(&format!("clearing {what}"), e))?;
        Ok(buffer)
    }

    /// Copies `data` to byte `offset` (synchronously: compile-time uploads).
    pub fn upload(&self, offset: usize, data: &[u8]) -> Result<()> {
        if offset + data.len() > self.bytes {
            return Err(Error::Backend(format!(
                "cuda: an upload of {} bytes at {offset} overflows its buffer",
                data.len()
            )));
        }
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the range was checked against the allocation.
        unsafe { result::memcpy_htod_sync(self.ptr + offset as u64, data) }.map_err(|e| driver("uploading", e))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `zeroed` and not freed before. A failure cannot be reported
            // from drop; the context is going away with it then.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Page-locked host memory: what asynchronous copies to and from the device go through.
pub(super) struct PinnedBuffer {
    ptr: *mut u8,
    pub bytes: usize,
    ctx: Arc<CudaContext>,
}

impl PinnedBuffer {
    pub fn new(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
        let bytes = bytes.max(4);
        ctx.bind_to_thread().map_err(|e| driver("binding the context", e))?;
        // SAFETY: a plain page-locked allocation; freed in Drop.
        let ptr = unsafe { result::malloc_host(bytes, 0) }
            .map_err(|e| driver(&format!("allocating {bytes} bytes of pinned host memory"), e))?;
        Ok(PinnedBuffer { ptr: ptr.cast(), bytes, ctx: Arc::clone(ctx) })
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `bytes` bytes were allocated; the device writes them only between a copy's
        // launch and the stream synchronisation that precedes every read.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above; `&mut self` excludes other host access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `new` and not freed before.
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}
