//! `susurrus convert`: a CTranslate2 Whisper folder to a Hugging Face one (f16 safetensors).
//!
//! The conversion itself is the core's ([`susurrus_whisper::load::convert`]); this module
//! checks both folders before anything is written, converts in memory (so a bad source never
//! leaves a half-written destination), writes the files and says what it wrote.

use std::path::{Path, PathBuf};

use susurrus_whisper::Error as WhisperError;
use susurrus_whisper::load::convert::{WeightFormat, convert_ct2_to_hf};
use susurrus_whisper::load::hf::parse_safetensors;

use crate::error::{Error, Result};
use crate::output::{format_bytes, format_count};

const AFTER_HELP: &str = "\
Writes model.safetensors (every tensor f16), config.json, generation_config.json and
tokenizer.json: the folder loads with --model DST like the source does, to the same weights
(f32 sources are rounded to f16).

Example:
  susurrus convert ~/.cache/susurrus/models/whisper-tiny.en-ct2 whisper-tiny.en-hf";

/// The files of a CTranslate2 Whisper folder that the conversion reads.
const SOURCE_FILES: [&str; 3] = ["model.bin", "config.json", "tokenizer.json"];

/// Files in a destination that loaders read before the converted ones: a CTranslate2
/// `model.bin` wins over `model.safetensors`, a `vocabulary.txt` over `tokenizer.json`'s ids.
const SHADOWING_FILES: [&str; 2] = ["model.bin", "vocabulary.txt"];

/// Arguments of `susurrus convert`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct ConvertArgs {
    /// CTranslate2 Whisper folder: model.bin, config.json and tokenizer.json (what
    /// ./scripts/models/fetch_model.sh prepares).
    #[arg(value_name = "SRC_DIR")]
    pub src: PathBuf,
    /// Folder to write the Hugging Face model to; created when missing, and it must be empty
    /// unless --force is given.
    #[arg(value_name = "DST_DIR")]
    pub dst: PathBuf,
    /// Write into DST_DIR even when it is not empty, replacing the files convert writes and
    /// leaving the others.
    #[arg(long)]
    pub force: bool,
    /// Store the matrices (linear, convolution and token embedding weights) as int8 with one
    /// f32 scale per row (CTranslate2's int8 rule): about a quarter of f16's bytes for them.
    /// Vectors and position tables stay f16.
    #[arg(long, value_name = "TYPE")]
    pub quantize: Option<Quantize>,
}

/// The weight types `--quantize` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Quantize {
    Int8,
}

/// One file the conversion wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    pub path: PathBuf,
    pub bytes: u64,
}

/// What [`convert`] did: the files written, and the tensors and parameters of the
/// safetensors file.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub files: Vec<Written>,
    pub tensors: usize,
    pub parameters: usize,
}

pub fn run(args: &ConvertArgs) -> Result<()> {
    let format = match args.quantize {
        None => WeightFormat::F16,
        Some(Quantize::Int8) => WeightFormat::Int8,
    };
    let report = convert(&args.src, &args.dst, args.force, format)?;
    crate::output::print(&render(&args.src, &args.dst, &report, format))
}

/// What [`run`] prints: the files written with their sizes, then the tensors.
pub fn render(src: &Path, dst: &Path, report: &Report, format: WeightFormat) -> String {
    let types = match format {
        WeightFormat::F16 => "f16",
        WeightFormat::Int8 => "int8 matrices, f16 vectors",
    };
    let mut out = format!("converted {} (CTranslate2) to {} (Hugging Face, {types})\n", src.display(), dst.display());
    let paths: Vec<String> = report.files.iter().map(|f| f.path.display().to_string()).collect();
    let width = paths.iter().map(String::len).max().unwrap_or(0);
    for (path, file) in paths.iter().zip(&report.files) {
        out += &format!("  {path:<width$}  {:>8}\n", format_bytes(file.bytes));
    }
    out += &format!("{} tensors ({types}), {} parameters\n", report.tensors, format_count(report.parameters));
    out
}

/// Converts the CTranslate2 folder `src` into the Hugging Face folder `dst`. `dst` must be
/// missing or empty unless `force`; it may never be `src` itself, whose `config.json` the
/// conversion would replace.
pub fn convert(src: &Path, dst: &Path, force: bool, format: WeightFormat) -> Result<Report> {
    check_source(src)?;
    check_destination(src, dst, force)?;
    // Regular files only (a named pipe would hang the conversion); the small ones bounded.
    let read = |name: &str| -> Result<Vec<u8>> {
        let path = src.join(name);
        let shown = path.display().to_string();
        if name != "model.bin" {
            return Ok(susurrus_whisper::files::read_small(&path, &shown)?);
        }
        susurrus_whisper::files::regular_file(&path, &shown)?;
        std::fs::read(&path).map_err(|e| Error::io(&path, e))
    };
    let tokenizer = read("tokenizer.json")?;
    let hf = convert_ct2_to_hf(&read("model.bin")?, &read("config.json")?, &tokenizer, format)
        .map_err(|e| in_folder(src, e))?;
    let tensors = parse_safetensors(&hf.safetensors, "model.safetensors")?;
    let parameters = tensors.iter().map(|t| t.dims.iter().product::<usize>()).sum();
    let tensor_count = tensors.len();

    let outputs: [(&str, &[u8]); 4] = [
        ("model.safetensors", &hf.safetensors),
        ("config.json", hf.config_json.as_bytes()),
        ("generation_config.json", hf.generation_config_json.as_bytes()),
        ("tokenizer.json", &tokenizer),
    ];
    let files = place(dst, &outputs)?;
    Ok(Report { files, tensors: tensor_count, parameters })
}

/// Writes `outputs` into a new folder beside `dst` and only then moves them into place: the
/// whole folder renamed onto a missing or empty `dst`; with `--force`, each file renamed over
/// its namesake (a file being replaced is never seen half written, and a process that has the
/// old one open or mapped keeps reading it). A write that fails (a full disk) leaves `dst` as
/// it was, and nothing beside it, so the same command can simply run again.
fn place(dst: &Path, outputs: &[(&str, &[u8])]) -> Result<Vec<Written>> {
    let parent = dst.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let name = dst.file_name().map_or_else(|| "converted".into(), |n| n.to_string_lossy().into_owned());
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{name}.partial-"))
        .tempdir_in(parent)
        .map_err(|e| Error::io(parent, e))?;
    let mut files = Vec::with_capacity(outputs.len());
    for (name, bytes) in outputs {
        std::fs::write(staging.path().join(name), bytes).map_err(|e| Error::io(&dst.join(name), e))?;
        files.push(Written { path: dst.join(name), bytes: bytes.len() as u64 });
    }
    let empty = match std::fs::read_dir(dst) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(Error::io(dst, e)),
        Ok(mut entries) => entries.next().is_none(),
    };
    if empty {
        // An empty folder gives way to the new one (rename does not replace a folder everywhere).
        if dst.exists() {
            std::fs::remove_dir(dst).map_err(|e| Error::io(dst, e))?;
        }
        let staged = staging.keep();
        return match std::fs::rename(&staged, dst) {
            Ok(()) => Ok(files),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&staged);
                Err(Error::io(dst, e))
            }
        };
    }
    for (name, _) in outputs {
        std::fs::rename(staging.path().join(name), dst.join(name)).map_err(|e| Error::io(&dst.join(name), e))?;
    }
    Ok(files)
}

/// The model loaders name model files without their folder (it converts bytes); the user named a
/// folder, so errors about its files carry the whole path.
fn in_folder(src: &Path, e: WhisperError) -> Error {
    match e {
        WhisperError::Model { file, msg } => {
            WhisperError::Model { file: src.join(file).display().to_string(), msg }.into()
        }
        other => other.into(),
    }
}

/// `src` must be a folder holding every file of [`SOURCE_FILES`].
fn check_source(src: &Path) -> Result<()> {
    let shown = src.display();
    match std::fs::metadata(src) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Usage(format!("source folder {shown} does not exist")));
        }
        Err(e) => return Err(Error::io(src, e)),
        Ok(meta) if !meta.is_dir() => return Err(Error::Usage(format!("source {shown} is not a folder"))),
        Ok(_) => {}
    }
    // A file that is there but not a regular one (a named pipe, a link to a device) is named
    // as what it is, not as missing.
    for name in SOURCE_FILES {
        let path = src.join(name);
        if path.exists() {
            susurrus_whisper::files::regular_file(&path, &path.display().to_string())?;
        }
    }
    let missing: Vec<&str> = SOURCE_FILES.iter().copied().filter(|f| !src.join(f).is_file()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    if missing.contains(&"model.bin") && src.join("model.safetensors").is_file() {
        return Err(Error::Usage(format!(
            "source folder {shown} holds model.safetensors: it is a Hugging Face folder already"
        )));
    }
    Err(Error::Usage(format!(
        "source folder {shown} is not a CTranslate2 Whisper folder: {} missing (it needs {})",
        missing.join(", "),
        SOURCE_FILES.join(", ")
    )))
}

/// `dst` is missing, or an empty folder, or (with `force`) a folder that is not `src` and
/// holds nothing loaders would read instead of the converted files.
fn check_destination(src: &Path, dst: &Path, force: bool) -> Result<()> {
    let shown = dst.display();
    let mut entries = match std::fs::read_dir(dst) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(_) if !dst.is_dir() && dst.exists() => {
            return Err(Error::Usage(format!("destination {shown} exists and is not a folder")));
        }
        Err(e) => return Err(Error::io(dst, e)),
        Ok(entries) => entries,
    };
    if entries.next().is_none() {
        return Ok(());
    }
    if !force {
        return Err(Error::Usage(format!("destination folder {shown} is not empty (--force writes into it anyway)")));
    }
    let same = match (src.canonicalize(), dst.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same {
        return Err(Error::Usage(format!(
            "destination {shown} is the source folder: its config.json would be replaced; choose another folder"
        )));
    }
    if let Some(name) = SHADOWING_FILES.iter().find(|f| dst.join(f).exists()) {
        return Err(Error::Usage(format!(
            "destination folder {shown} holds {name}, which loaders read instead of the converted files; \
             remove it or choose another folder"
        )));
    }
    Ok(())
}
