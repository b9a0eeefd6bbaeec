//! Choosing and opening the backend a command runs on.

use std::path::PathBuf;

use susurrus_core::exec::Backend;
use susurrus_wgpu::{WgpuBackend, WgpuOptions};

use crate::error::Result;
use susurrus_cuda::{CudaBackend, CudaOptions};

/// The `--backend` choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// An NVIDIA GPU through CUDA when one opens, else a wgpu adapter when it is real
    /// hardware, else the fast CPU backend.
    Auto,
    /// The multi-threaded SIMD CPU backend.
    Cpu,
    /// wgpu (Vulkan, Metal, DX12) on the adapter wgpu prefers (or the first whose name
    /// contains `WGPU_ADAPTER_NAME`), software adapters included, with a warning.
    Wgpu,
    /// CUDA on the first NVIDIA GPU (kernels compiled with NVRTC, products on cuBLAS).
    Cuda,
    /// wgpu with only the kernels a browser gets: no matrix units, no subgroups (wgpu cannot
    /// ask for them on the web), f32 arithmetic on f16 weights unpacked from words (Chromium
    /// on NVIDIA, Firefox). For measuring the web package's speed natively.
    WgpuBrowser,
    /// wgpu-browser with f16 arithmetic where the adapter has `shader-f16` (Chromium on
    /// Apple, AMD and Intel GPUs).
    WgpuBrowserF16,
}

impl BackendChoice {
    /// The name `--backend` takes for this choice (clap's, from the variant's name).
    pub fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self).map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// The wgpu options of a wgpu choice.
    pub fn wgpu_options(self) -> Option<WgpuOptions> {
        let browser = WgpuOptions { allow_matrix_units: false, allow_subgroups: false, ..WgpuOptions::default() };
        match self {
            BackendChoice::Wgpu => Some(WgpuOptions::default()),
            BackendChoice::WgpuBrowser => Some(WgpuOptions { allow_f16: false, ..browser }),
            BackendChoice::WgpuBrowserF16 => Some(browser),
            BackendChoice::Auto | BackendChoice::Cpu | BackendChoice::Cuda => None,
        }
    }
}

/// Which model runs where, with how many threads, and at which temperatures: the flags
/// `transcribe` and `bench` share, declared once so that their ranges, defaults and help agree.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Model folder (CTranslate2 or Hugging Face layout), or a model's name as faster-whisper
    /// names it (tiny.en, base, small, medium, large-v3, large-v3-turbo ...: `susurrus models`
    /// lists them): found in the Hugging Face cache, else downloaded there from the hub once.
    /// Default: ~/.cache/susurrus/models/whisper-tiny.en-ct2, which
    /// ./scripts/models/fetch_model.sh prepares.
    #[arg(long, value_name = "DIR|NAME")]
    pub model: Option<PathBuf>,
    /// Never download a model by name: only the Hugging Face cache is read (as with
    /// HF_HUB_OFFLINE=1).
    #[arg(long)]
    pub offline: bool,
    /// Where the model runs.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Threads of the CPU backend. Default: one per core (more are lowered to the core count,
    /// with a warning).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Temperatures tried in order for a 30 s window until its text passes the fallback
    /// thresholds (repeat the flag or separate by commas). 0 decodes with beam search, higher
    /// ones sample. Default: 0,0.2,0.4,0.6,0.8,1.0.
    #[arg(
        long = "temperature",
        value_name = "T",
        value_delimiter = ',',
        allow_negative_numbers = true,
        value_parser = parse_temperature
    )]
    pub temperatures: Vec<f32>,
}

impl RunArgs {
    /// Opens the backend the flags name ([`open`]).
    pub fn open(&self) -> Result<Box<dyn Backend>> {
        open(self.backend, cpu_threads(self.threads))
    }

    /// The flags that ask a `susurrus` command for the same run (the model folder as given).
    pub fn to_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if let Some(model) = &self.model {
            flags.extend(["--model".to_string(), model.display().to_string()]);
        }
        if self.offline {
            flags.push("--offline".to_string());
        }
        flags.extend(["--backend".to_string(), self.backend.name()]);
        if let Some(threads) = self.threads {
            flags.extend(["--threads".to_string(), threads.to_string()]);
        }
        for t in &self.temperatures {
            flags.extend(["--temperature".to_string(), t.to_string()]);
        }
        flags
    }

    /// The temperatures asked for, or `defaults` when none were.
    pub fn temperatures_or(&self, defaults: &[f32]) -> Vec<f32> {
        if self.temperatures.is_empty() { defaults.to_vec() } else { self.temperatures.clone() }
    }
}

fn parse_temperature(s: &str) -> std::result::Result<f32, String> {
    use susurrus_whisper::decode::options::TEMPERATURES;
    match s.trim().parse::<f32>() {
        Ok(t) if t == 0.0 || TEMPERATURES.contains(&t) => Ok(t),
        _ => Err(format!(
            "a temperature is 0 (greedy decoding) or a number from {} to {}",
            TEMPERATURES.start(),
            TEMPERATURES.end()
        )),
    }
}

/// Readies the process environment for the GPU drivers; call it first thing in `main`.
///
/// Mesa's Vulkan device-selection layer, loaded implicitly into every Vulkan process, asks
/// Wayland for the display's GPU, and libwayland prints `error: XDG_RUNTIME_DIR is invalid or
/// not set in the environment.` where that variable is unset (containers, cron jobs, ssh
/// sessions), once per Vulkan instance, on runs that succeed. Without a runtime folder there is
/// no Wayland session to ask, so the layer is switched off by its documented variable
/// `NODEVICE_SELECT`; wgpu still ranks the adapters itself (discrete GPUs first).
///
/// # Safety
///
/// Sets an environment variable: no other thread may exist yet (the start of `main`).
pub unsafe fn prepare_environment() {
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").map(std::path::PathBuf::from);
    if !runtime_dir.is_some_and(|dir| dir.is_absolute() && dir.is_dir())
        && std::env::var_os("NODEVICE_SELECT").is_none()
    {
        // SAFETY: the caller guarantees that no other thread runs.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

/// The CPU backend's threads for `--threads N`: more threads than cores only contend for
/// them (1000 on 2 cores made a 2.3 s transcription take over 90 s), so a larger count is
/// lowered to the core count, with a warning on stderr. `None`: one per core.
pub fn cpu_threads(requested: Option<u16>) -> Option<usize> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let requested = usize::from(requested?);
    if requested > cores {
        eprintln!("susurrus: warning: --threads {requested} is more than this machine's {cores} cores; using {cores}");
        return Some(cores);
    }
    Some(requested)
}

/// Opens wgpu with `options` (a wgpu choice's), warning on stderr when the adapter is software.
pub fn open_wgpu(options: WgpuOptions) -> Result<WgpuBackend> {
    let gpu = pollster::block_on(WgpuBackend::with_options(&options))?;
    if gpu.is_software() {
        eprintln!(
            "susurrus: warning: the wgpu adapter {} is software, on the CPU: it runs tens of times slower than \
             --backend cpu (which --backend auto picks here)",
            gpu.adapter()
        );
    }
    Ok(gpu)
}

/// Opens the backend `choice` names. `threads` caps the CPU backend's threads (default: one
/// per core).
///
/// `Auto` first tries CUDA; then it opens the adapter the wgpu backend picks and keeps it when it is real hardware; a
/// software adapter (lavapipe, SwiftShader, WARP) runs the same work tens of times slower
/// than the CPU backend on the same cores, so then, or when no adapter opens, the CPU
/// backend runs.
pub fn open(choice: BackendChoice, threads: Option<usize>) -> Result<Box<dyn Backend>> {
    let cpu = || -> Result<Box<dyn Backend>> { Ok(Box::new(susurrus_cpu::FastCpuBackend::new(threads)?)) };
    match choice {
        BackendChoice::Cpu => cpu(),
        BackendChoice::Wgpu | BackendChoice::WgpuBrowser | BackendChoice::WgpuBrowserF16 => {
            Ok(Box::new(open_wgpu(choice.wgpu_options().unwrap_or_default())?))
        }
        BackendChoice::Cuda => Ok(Box::new(CudaBackend::new(&CudaOptions::default())?)),
        BackendChoice::Auto => {
            if let Ok(cuda) = CudaBackend::new(&CudaOptions::default()) {
                return Ok(Box::new(cuda));
            }
            match pollster::block_on(WgpuBackend::with_options(&WgpuOptions::default())) {
                Ok(gpu) if !gpu.cpu_kernels() => Ok(Box::new(gpu)),
                _ => cpu(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The browser choices ask wgpu for what a web page can have: neither matrix units nor
    /// subgroups, and f16 arithmetic only in the -f16 one; `wgpu` asks for everything.
    #[test]
    fn the_browser_choices_leave_out_what_the_web_cannot_ask_for() {
        let flags = |choice: BackendChoice| {
            choice.wgpu_options().map(|o| (o.allow_matrix_units, o.allow_subgroups, o.allow_f16))
        };
        assert_eq!(flags(BackendChoice::Wgpu), Some((true, true, true)));
        assert_eq!(flags(BackendChoice::WgpuBrowser), Some((false, false, false)));
        assert_eq!(flags(BackendChoice::WgpuBrowserF16), Some((false, false, true)));
        assert_eq!(flags(BackendChoice::Cuda), None);
        let parsed = <BackendChoice as clap::ValueEnum>::from_str("wgpu-browser-f16", false).unwrap();
        assert_eq!(parsed, BackendChoice::WgpuBrowserF16);
        assert_eq!(parsed.name(), "wgpu-browser-f16");
    }
}
