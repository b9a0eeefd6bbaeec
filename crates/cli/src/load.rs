//! Finding and loading the model, for every subcommand that transcribes: which folder
//! (`--model DIR` or a model's name, found in the Hugging Face cache by [`hub`], else the folder
//! `./scripts/models/fetch_model.sh` prepares; a missing one is an error that names the fetch
//! script, before any work), and [`load_model`], which opens the
//! backend while the folder is read and planned.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use susurrus_whisper::Whisper;
use susurrus_whisper::vad::{VadPlan, VadWeights};

use crate::backend::RunArgs;
use crate::error::{Error, Result};
use crate::hub;
use crate::output::Load;

/// The default model's folder below the home directory (what `scripts/models/fetch_model.sh` prints).
pub const DEFAULT_RELATIVE: &str = ".cache/susurrus/models/whisper-tiny.en-ct2";

/// The files that make a folder a model: CTranslate2 or Hugging Face weights.
const WEIGHT_FILES: [&str; 2] = ["model.bin", "model.safetensors"];

/// `~/.cache/susurrus/models/whisper-tiny.en-ct2`, or `None` without a home directory.
pub fn default_dir() -> Option<PathBuf> {
    std::env::home_dir().map(|home| home.join(DEFAULT_RELATIVE))
}

/// `model` as a model's name and its repository: a name faster-whisper knows, when no folder
/// has that name.
pub fn model_name(model: Option<&Path>) -> Option<(&str, &'static str)> {
    let name = model.filter(|m| !m.exists()).and_then(Path::to_str)?;
    Some((name, hub::repository(name)?))
}

/// The folder to load: `model` when given (a folder, or a name faster-whisper knows, found in
/// the Hugging Face cache or downloaded there from `hub`; a folder of that name wins), else
/// [`default_dir`]. Errors when it holds no weights file, saying how to fetch the default model
/// or name another.
pub fn resolve(model: Option<&Path>, hub: &hub::Hub) -> Result<PathBuf> {
    let hint = "run ./scripts/models/fetch_model.sh to fetch whisper-tiny.en, or pass --model DIR with a \
                CTranslate2 or Hugging Face Whisper folder";
    if let Some((name, repo)) = model_name(model) {
        return hub::model(name, repo, hub);
    }
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
            return Err(Error::Usage(format!(
                "{what} {} not found: {hint}, or a model's name ({})",
                dir.display(),
                hub::names()
            )));
        }
        Err(e) => return Err(Error::Usage(format!("{what} {} cannot be opened: {e}", dir.display()))),
    }
    if !WEIGHT_FILES.iter().any(|f| dir.join(f).is_file()) {
        return Err(Error::Usage(format!("{what} {} has no model.bin or model.safetensors: {hint}", dir.display())));
    }
    Ok(dir)
}

/// The folder of the run's model: `--model`'s (a folder, or a name from the Hugging Face cache
/// or hub, unless `--offline`), else the default one ([`resolve`]).
pub fn model_dir(run: &RunArgs) -> Result<PathBuf> {
    resolve(run.model.as_deref(), &hub::Hub::from_env(run.offline))
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

/// The files `scripts/models/fetch_model.sh` fetches, with their SHA-256 and size.
const KNOWN: &str = include_str!("../../../scripts/models/known_models.sha256");

/// When `dir` is one of the folders `fetch_model.sh` makes below `models` (the cache's
/// `models/` folder), checks its files against their known SHA-256: a download damaged on the
/// way or a file damaged since would otherwise load and give wrong text (the weights' own
/// checks catch non-finite and far-out values, not every flipped bit). Other folders are not
/// touched: a fine-tuned model of the same shapes has the same sizes and other contents.
pub fn check_known(dir: &Path, models: &Path) -> Result<()> {
    let (Ok(dir), Ok(models)) = (std::fs::canonicalize(dir), std::fs::canonicalize(models)) else { return Ok(()) };
    let Ok(folder) = dir.strip_prefix(&models) else { return Ok(()) };
    for line in KNOWN.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [want, _, path] = fields[..] else { continue };
        let Some((name, file)) = path.split_once('/') else { continue };
        if Path::new(name) != folder {
            continue;
        }
        let file = dir.join(file);
        let got = sha256(&file)?;
        if got != want {
            let model = name.trim_start_matches("whisper-").trim_end_matches("-ct2");
            return Err(Error::Usage(format!(
                "{}: its SHA-256 is {got}, not {want} as fetched: the file is damaged; remove {} and run \
                 ./scripts/models/fetch_model.sh {model} to fetch it again",
                file.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

fn sha256(path: &Path) -> Result<String> {
    use sha2::Digest;
    // A regular file: a FIFO or device put in its place would be read without end.
    susurrus_whisper::files::regular_file(path, &path.display().to_string())?;
    let mut hasher = sha2::Sha256::new();
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    std::io::copy(&mut file, &mut hasher).map_err(|e| Error::io(path, e))?;
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The cache's `models/` folder, where [`check_known`] looks.
fn models_cache() -> Option<PathBuf> {
    std::env::home_dir().map(|home| home.join(".cache/susurrus/models"))
}

/// Opens the backend and, on threads beside it, reads the model folder (weights and
/// tokenizer side by side) and plans its graphs: each takes a good part of start-up and none
/// needs another's result until the plans are compiled on the opened backend.
pub fn load_model(run: &RunArgs, dir: &Path, vad: Option<&Path>) -> Result<(Whisper, Load)> {
    let started = Instant::now();
    let (backend, known, prepared, open, read) = std::thread::scope(|scope| {
        let vad = scope.spawn(move || vad.map(|path| VadWeights::load(path).and_then(VadPlan::new)).transpose());
        let checking = scope.spawn(|| models_cache().map_or(Ok(()), |models| check_known(dir, &models)));
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
        let known = checking.join().unwrap_or_else(|_| Err(panicked("checking the model's files").into()));
        (backend, known, prepared.and_then(|p| Ok((p, vad?))), open, read)
    });
    // A backend that cannot open is the first thing to report, as before any model is read;
    // then a known model's damaged file, the cause of any error its reading gave.
    let backend = backend?;
    known?;
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
        let err = resolve(Some(&missing), &hub::Hub::from_env(true)).unwrap_err().to_string();
        let names = "tiny.en, tiny, base.en, base, small.en, small, medium.en, medium, large-v1, large-v2, large-v3, \
                     large, distil-large-v2, distil-medium.en, distil-small.en, distil-large-v3, distil-large-v3.5, \
                     large-v3-turbo, turbo";
        assert_eq!(
            err,
            format!("model folder {} not found: {}, or a model's name ({names})", missing.display(), hint())
        );
        let err = resolve(Some(&dir), &hub::Hub::from_env(true)).unwrap_err().to_string();
        assert_eq!(err, format!("model folder {} has no model.bin or model.safetensors: {}", dir.display(), hint()));
        std::fs::write(dir.join("model.safetensors"), b"").unwrap();
        assert_eq!(resolve(Some(&dir), &hub::Hub::from_env(true)).unwrap(), dir);
        // A file given as the folder, and a symbolic link loop, are told as what they are.
        let file = dir.join("model.safetensors");
        let err = resolve(Some(&file), &hub::Hub::from_env(true)).unwrap_err().to_string();
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
        let err = resolve(Some(&a), &hub::Hub::from_env(true)).unwrap_err().to_string();
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

    /// A copy of a known folder checks out; one flipped bit in its model.bin (which still
    /// loads: a mantissa bit of the last weight) is named with both digests; the same folder
    /// elsewhere (a user's own) is not checked.
    #[test]
    fn a_known_models_files_are_checked_against_their_sha256() {
        let real = default_dir().unwrap();
        let models = std::env::temp_dir().join(format!("susurrus-known-{}", std::process::id()));
        let copy = models.join("whisper-tiny.en-ct2");
        std::fs::create_dir_all(&copy).unwrap();
        for f in ["model.bin", "config.json", "tokenizer.json", "vocabulary.txt"] {
            std::fs::copy(real.join(f), copy.join(f)).unwrap();
        }
        check_known(&copy, &models).unwrap();
        let mut bin = std::fs::read(copy.join("model.bin")).unwrap();
        let last = bin.len() - 1;
        bin[last] ^= 1;
        std::fs::write(copy.join("model.bin"), &bin).unwrap();
        let err = check_known(&copy, &models).unwrap_err().to_string();
        let canonical = std::fs::canonicalize(&copy).unwrap();
        let want = format!(
            "{}: its SHA-256 is {}, not 1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a as fetched: the \
             file is damaged; remove {} and run ./scripts/models/fetch_model.sh tiny.en to fetch it again",
            canonical.join("model.bin").display(),
            sha256(&copy.join("model.bin")).unwrap(),
            canonical.display()
        );
        assert_eq!(err, want);
        check_known(&copy, &std::env::temp_dir()).unwrap();
        std::fs::remove_dir_all(&models).unwrap();
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
