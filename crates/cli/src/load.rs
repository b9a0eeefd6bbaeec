//! Finding and loading the model, for every subcommand that transcribes: which folder
//! (`--model DIR`, else the folder `./scripts/models/fetch_model.sh` prepares; a missing one is an
//! error that names the fetch script, before any work), and [`load_model`], which opens the
//! backend while the folder is read and planned.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use susurrus_whisper::Whisper;
use susurrus_whisper::vad::{VadPlan, VadWeights};

use crate::backend::RunArgs;
use crate::error::{Error, Result};
use crate::output::Load;

/// The default model's folder below the home directory (what `scripts/models/fetch_model.sh` prints).
pub const DEFAULT_RELATIVE: &str = ".cache/susurrus/models/whisper-tiny.en-ct2";

/// The files that make a folder a model: CTranslate2 or Hugging Face weights.
const WEIGHT_FILES: [&str; 2] = ["model.bin", "model.safetensors"];

/// `~/.cache/susurrus/models/whisper-tiny.en-ct2`, or `None` without a home directory.
pub fn default_dir() -> Option<PathBuf> {
    std::env::home_dir().map(|home| home.join(DEFAULT_RELATIVE))
}

/// The folder to load: `model` when given, else [`default_dir`]. Errors when it holds no
/// weights file, saying how to fetch the default model or name another.
pub fn resolve(model: Option<&Path>) -> Result<PathBuf> {
    let hint = "run ./scripts/models/fetch_model.sh to fetch whisper-tiny.en, or pass --model DIR with a \
                CTranslate2 or Hugging Face Whisper folder";
    let (dir, what) = match model {
        Some(dir) => (dir.to_path_buf(), "model folder"),
        None => match default_dir() {
            Some(dir) => (dir, "default model folder"),
            None => return Err(Error::Usage(format!("no home directory to find the default model in: {hint}"))),
        },
    };
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(Error::Usage(format!(
                "{what} {} is a file, not a folder: pass --model the folder that holds the model's files",
                dir.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Usage(format!("{what} {} not found: {hint}", dir.display())));
        }
        Err(e) => return Err(Error::Usage(format!("{what} {} cannot be opened: {e}", dir.display()))),
    }
    if !WEIGHT_FILES.iter().any(|f| dir.join(f).is_file()) {
        return Err(Error::Usage(format!("{what} {} has no model.bin or model.safetensors: {hint}", dir.display())));
    }
    Ok(dir)
}

/// The Silero VAD network's file below the home directory (what
/// `./scripts/models/fetch_model.sh silero-vad` prints).
pub const VAD_RELATIVE: &str = ".cache/susurrus/models/silero-vad-v6/silero_vad_v6.onnx";

/// The VAD network to load for `--vad`: `file` when given, else [`VAD_RELATIVE`] in the home
/// directory. Errors when it is not a file, saying how to fetch it.
pub fn resolve_vad(file: Option<&Path>) -> Result<PathBuf> {
    let hint = "run ./scripts/models/fetch_model.sh silero-vad to fetch it, or pass --vad-model FILE";
    let (path, what) = match file {
        Some(path) => (path.to_path_buf(), "VAD network"),
        None => match std::env::home_dir() {
            Some(home) => (home.join(VAD_RELATIVE), "default VAD network"),
            None => return Err(Error::Usage(format!("no home directory to find the VAD network in: {hint}"))),
        },
    };
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(path),
        Ok(_) => Err(Error::Usage(format!(
            "{what} {} is not a file: pass --vad-model the silero_vad_v6.onnx file itself",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::Usage(format!("{what} {} not found: {hint}", path.display())))
        }
        Err(e) => Err(Error::Usage(format!("{what} {} cannot be opened: {e}", path.display()))),
    }
}

/// Opens the backend and, on threads beside it, reads the model folder (weights and
/// tokenizer side by side) and plans its graphs: each takes a good part of start-up and none
/// needs another's result until the plans are compiled on the opened backend.
pub fn load_model(run: &RunArgs, dir: &Path, vad: Option<&Path>) -> Result<(Whisper, Load)> {
    let started = Instant::now();
    let (backend, prepared, open, read) = std::thread::scope(|scope| {
        let vad = scope.spawn(move || vad.map(|path| VadWeights::load(path).and_then(VadPlan::new)).transpose());
        let tokenizing = scope.spawn(|| susurrus_whisper::text::tokenizer::Tokenizer::from_model_dir(dir));
        let preparing = scope.spawn(move || {
            let weights = susurrus_whisper::load::load_dir(dir);
            let tokenizer = tokenizing.join().unwrap_or_else(|_| Err(panicked("reading the tokenizer")));
            let prepared = weights.and_then(|w| Whisper::prepare(&w, tokenizer?));
            (prepared, started.elapsed())
        });
        let backend = run.open();
        let open = started.elapsed();
        let (prepared, read) =
            preparing.join().unwrap_or_else(|_| (Err(panicked("reading the model")), Duration::ZERO));
        let vad = vad.join().unwrap_or_else(|_| Err(panicked("reading the VAD network")));
        (backend, prepared.and_then(|p| Ok((p, vad?))), open, read)
    });
    // A backend that cannot open is the first thing to report, as before any model is read.
    let backend = backend?;
    let (prepared, vad) = prepared?;
    let compiling = Instant::now();
    let mut whisper = pollster::block_on(Whisper::compile(backend, prepared))?;
    if let Some(vad) = &vad {
        pollster::block_on(whisper.load_vad(vad))?;
    }
    let load = Load { open, read, compile: compiling.elapsed(), total: started.elapsed() };
    Ok((whisper, load))
}

fn panicked(what: &str) -> susurrus_whisper::Error {
    susurrus_whisper::Error::backend(format!("{what} panicked"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint() -> &'static str {
        "run ./scripts/models/fetch_model.sh to fetch whisper-tiny.en, or pass --model DIR with a CTranslate2 or \
         Hugging Face Whisper folder"
    }

    #[test]
    fn a_given_folder_needs_a_weights_file() {
        let dir = std::env::temp_dir().join(format!("susurrus-model-dir-{}", std::process::id()));
        let missing = dir.join("missing");
        std::fs::create_dir_all(&dir).unwrap();
        let err = resolve(Some(&missing)).unwrap_err().to_string();
        assert_eq!(err, format!("model folder {} not found: {}", missing.display(), hint()));
        let err = resolve(Some(&dir)).unwrap_err().to_string();
        assert_eq!(err, format!("model folder {} has no model.bin or model.safetensors: {}", dir.display(), hint()));
        std::fs::write(dir.join("model.safetensors"), b"").unwrap();
        assert_eq!(resolve(Some(&dir)).unwrap(), dir);
        // A file given as the folder, and a symbolic link loop, are told as what they are.
        let file = dir.join("model.safetensors");
        let err = resolve(Some(&file)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "model folder {} is a file, not a folder: pass --model the folder that holds the model's files",
                file.display()
            )
        );
        let (a, b) = (dir.join("loop-a"), dir.join("loop-b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        let err = resolve(Some(&a)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("model folder {} cannot be opened: Too many levels of symbolic links (os error 40)", a.display())
        );
        let err = resolve_vad(Some(&dir)).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("VAD network {} is not a file: pass --vad-model the silero_vad_v6.onnx file itself", dir.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_default_is_the_fetch_scripts_folder() {
        let script = include_str!("../../../scripts/models/fetch_model.sh");
        assert!(script.contains("name=${1:-tiny.en}"), "{script}");
        assert!(script.contains("model=\"${cache}/models/whisper-${name}-ct2\""), "{script}");
        assert!(script.contains("cache=\"${HOME}/.cache/susurrus\""), "{script}");
        let home = std::env::home_dir().unwrap();
        assert_eq!(default_dir(), Some(home.join(".cache/susurrus/models/whisper-tiny.en-ct2")));
    }
}
