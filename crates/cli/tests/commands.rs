//! `susurrus convert` and `susurrus info`, run as a user would: what they write and print, and
//! their error messages, word for word.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use susurrus_core::ir::DType;
use susurrus_cpu::FastCpuBackend;
use susurrus_testkit::golden::{self, Set};
use susurrus_whisper::Whisper;
use susurrus_whisper::load::ct2::load_ct2_dir;
use susurrus_whisper::load::hf::load_hf_dir;
use susurrus_whisper::text::tokenizer::{SpecialTokens, Tokenizer};

fn susurrus(args: &[&str]) -> Output {
    susurrus_with_home(args, None)
}

/// Runs the binary; `home` replaces `HOME` (where the default model is looked for).
fn susurrus_with_home(args: &[&str], home: Option<&Path>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_susurrus"));
    command.args(args);
    if let Some(home) = home {
        command.env("HOME", home);
    }
    command.output().expect("the susurrus binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

fn assert_success(out: &Output) {
    assert!(out.status.success(), "exit {:?}, stderr:\n{}", out.status, stderr(out));
}

/// The command failed with exactly `message`.
fn assert_error(out: &Output, message: &str) {
    assert_eq!(out.status.code(), Some(1), "stdout:\n{}", stdout(out));
    assert_eq!(stderr(out), format!("susurrus: error: {message}\n"));
    assert_eq!(stdout(out), "");
}

/// The Whisper tiny.en CTranslate2 folder (fetched by the project's script when missing).
fn tiny_en() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new(root.join("scripts/models/fetch_model.sh")).current_dir(&root).output().unwrap();
        assert!(out.status.success(), "fetch_model.sh failed:\n{}", stderr(&out));
        PathBuf::from(stdout(&out).lines().last().unwrap())
    })
}

/// A fresh, empty temporary folder named after the test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("susurrus-commands-{name}-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Whisper tiny.en's parameters, counted from the architecture by hand (d_model 384, 4 + 4
/// layers, feed-forward 1536, 80 mels, 1500 audio and 448 text positions, 51864 tokens; the
/// key projections have no bias; the output projection is the token embedding).
fn tiny_en_parameters() -> usize {
    let (d, ffn, mels, vocab) = (384, 1536, 80, 51864);
    let attention = 4 * d * d + 3 * d;
    let norm = 2 * d;
    let mlp = (ffn * d + ffn) + (d * ffn + d);
    let encoder = (d * mels * 3 + d) + (d * d * 3 + d) + 1500 * d + 4 * (attention + mlp + 2 * norm) + norm;
    let decoder = vocab * d + 448 * d + 4 * (2 * attention + mlp + 3 * norm) + norm;
    encoder + decoder
}

fn f16_round(v: f32) -> f32 {
    half::f16::from_f32(v).to_f32()
}

#[test]
fn convert_writes_a_hugging_face_folder_with_the_same_weights_in_f16() {
    let dst = temp_dir("convert").join("tiny.en-hf");
    let out = susurrus(&["convert", s(tiny_en()), s(&dst)]);
    assert_success(&out);

    let size = |name: &str| std::fs::metadata(dst.join(name)).unwrap().len();
    let mb = |bytes: u64| format!("{:.1} MB", bytes as f64 / 1e6);
    let kb = |bytes: u64| format!("{:.1} kB", bytes as f64 / 1e3);
    let path = |name: &str| format!("{}/{name}", dst.display());
    let width = path("generation_config.json").len();
    let expected = format!(
        "converted {} (CTranslate2) to {} (Hugging Face, f16)\n  {:<width$}  {:>8}\n  {:<width$}  {:>8}\n  \
         {:<width$}  {:>8}\n  {:<width$}  {:>8}\n167 tensors (f16), 37 760 256 parameters\n",
        tiny_en().display(),
        dst.display(),
        path("model.safetensors"),
        mb(size("model.safetensors")),
        path("config.json"),
        kb(size("config.json")),
        path("generation_config.json"),
        kb(size("generation_config.json")),
        path("tokenizer.json"),
        mb(size("tokenizer.json")),
    );
    assert_eq!(stdout(&out), expected);
    assert_eq!(tiny_en_parameters(), 37_760_256);
    let mut written: Vec<String> =
        std::fs::read_dir(&dst).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    written.sort();
    assert_eq!(written, ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json"]);

    // Same tensors under the same names, every one f16 and equal to the source rounded to f16.
    let original = load_ct2_dir(tiny_en()).unwrap();
    let converted = load_hf_dir(&dst).unwrap();
    assert_eq!(converted.config(), original.config());
    let names = |w: &susurrus_whisper::load::weights::WhisperWeights| w.tensors().keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&converted), names(&original));
    assert_eq!(converted.tensors().len(), 167);
    for (name, tensor) in original.tensors() {
        let half = converted.get(name).unwrap();
        assert_eq!(half.dtype(), DType::F16, "{name}");
        assert_eq!(half.shape(), tensor.shape(), "{name}");
        let rounded: Vec<f32> = tensor.to_f32().iter().map(|&v| f16_round(v)).collect();
        assert_eq!(half.to_f32(), rounded, "{name}");
    }
    assert_eq!(converted.get("proj_out.weight").unwrap(), converted.get("model.decoder.embed_tokens.weight").unwrap());

    // The tokenizer read from tokenizer.json alone decodes every id as the source folder's does.
    let theirs = Tokenizer::from_model_dir(tiny_en()).unwrap();
    let ours = Tokenizer::from_model_dir(&dst).unwrap();
    assert_eq!(ours.vocab_size(), theirs.vocab_size());
    assert_eq!(ours.special_ids(), theirs.special_ids());
    for id in 0..ours.vocab_size() as u32 {
        assert_eq!(
            ours.decode_bytes(&[id], SpecialTokens::Keep).unwrap(),
            theirs.decode_bytes(&[id], SpecialTokens::Keep).unwrap(),
            "token {id}"
        );
    }
    let sentence = "The morning train was late again, so Clara bought a warm pastry.";
    assert_eq!(ours.encode(sentence).unwrap(), theirs.encode(sentence).unwrap());

    // info describes the converted folder as the same model in the other format.
    let info = susurrus(&["info", "--json", "--model", s(&dst)]);
    assert_success(&info);
    let json: serde_json::Value = serde_json::from_str(&stdout(&info)).unwrap();
    let model = &json["model"];
    assert_eq!(model["format"], "Hugging Face");
    assert_eq!(model["weights_file"], "model.safetensors");
    assert_eq!(model["weights_file_bytes"], size("model.safetensors"));
    assert_eq!(model["parameters"], tiny_en_parameters());
    assert_eq!(model["dtypes"], serde_json::json!(["f16"]));
    std::fs::remove_dir_all(dst.parent().unwrap()).unwrap();
}

/// The multilingual base model converted to the Hugging Face form (no vocabulary.txt: the
/// tokenizer comes from tokenizer.json, whose id 50256 is the empty token) transcribes a
/// multilingual golden run of each kind (detected, translated, given) as the reference did with
/// the CTranslate2 original (every run of the original: the conformance suite, `crates/testkit/tests/conformance`).
#[test]
fn converted_multilingual_model_matches_the_reference() {
    let dst = temp_dir("convert-base").join("base-hf");
    assert_success(&susurrus(&["convert", s(&Set::Base.model_dir()), s(&dst)]));
    assert!(!dst.join("vocabulary.txt").exists());
    let backend = Box::new(FastCpuBackend::new(None).unwrap());
    let whisper = pollster::block_on(Whisper::load_dir(backend, &dst)).unwrap();
    assert_eq!(whisper.tokenizer().languages().len(), 99);
    golden::model_matches_reference(whisper, Set::Base, &golden::MULTILINGUAL_RUNS);
    std::fs::remove_dir_all(dst.parent().unwrap()).unwrap();
}

#[test]
fn convert_force_writes_into_a_folder_with_other_files_and_leaves_them() {
    let dst = temp_dir("convert-force");
    std::fs::write(dst.join("notes.txt"), "mine").unwrap();
    std::fs::write(dst.join("config.json"), "stale").unwrap();
    let refused = susurrus(&["convert", s(tiny_en()), s(&dst)]);
    assert_error(
        &refused,
        &format!("destination folder {} is not empty (--force writes into it anyway)", dst.display()),
    );
    assert_eq!(std::fs::read_to_string(dst.join("config.json")).unwrap(), "stale");

    // A reader of the file being replaced keeps the old one: the new file is written beside
    // it and renamed over it, never rewritten in place.
    let mut stale = std::fs::File::open(dst.join("config.json")).unwrap();
    assert_success(&susurrus(&["convert", "--force", s(tiny_en()), s(&dst)]));
    let mut old = String::new();
    std::io::Read::read_to_string(&mut stale, &mut old).unwrap();
    assert_eq!(old, "stale");
    let mut names: Vec<String> =
        std::fs::read_dir(&dst).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(
        names,
        ["config.json", "generation_config.json", "model.safetensors", "notes.txt", "tokenizer.json"],
        "no partial files are left"
    );
    assert_eq!(std::fs::read_to_string(dst.join("notes.txt")).unwrap(), "mine");
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(dst.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["d_model"], 384);
    assert_eq!(load_hf_dir(&dst).unwrap().config(), load_ct2_dir(tiny_en()).unwrap().config());
    std::fs::remove_dir_all(&dst).unwrap();
}

#[test]
fn convert_says_what_is_wrong_with_the_folders() {
    let tmp = temp_dir("convert-errors");
    let missing = tmp.join("missing");
    let out = tmp.join("out");
    assert_error(
        &susurrus(&["convert", s(&missing), s(&out)]),
        &format!("source folder {} does not exist", missing.display()),
    );

    let file = tmp.join("model.bin");
    std::fs::write(&file, b"not a folder").unwrap();
    assert_error(&susurrus(&["convert", s(&file), s(&out)]), &format!("source {} is not a folder", file.display()));

    let partial = tmp.join("partial");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::write(partial.join("config.json"), b"{}").unwrap();
    assert_error(
        &susurrus(&["convert", s(&partial), s(&out)]),
        &format!(
            "source folder {} is not a CTranslate2 Whisper folder: model.bin, tokenizer.json missing (it needs \
             model.bin, config.json, tokenizer.json)",
            partial.display()
        ),
    );

    let hf = tmp.join("hf");
    std::fs::create_dir_all(&hf).unwrap();
    std::fs::write(hf.join("model.safetensors"), b"").unwrap();
    std::fs::write(hf.join("config.json"), b"{}").unwrap();
    assert_error(
        &susurrus(&["convert", s(&hf), s(&out)]),
        &format!("source folder {} holds model.safetensors: it is a Hugging Face folder already", hf.display()),
    );

    // A broken model.bin is reported by the core's reader, and nothing is written.
    let broken = tmp.join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    for name in ["config.json", "tokenizer.json"] {
        std::fs::copy(tiny_en().join(name), broken.join(name)).unwrap();
    }
    std::fs::write(broken.join("model.bin"), b"\x01\x00").unwrap();
    let failed = susurrus(&["convert", s(&broken), s(&out)]);
    assert_eq!(failed.status.code(), Some(1));
    assert_eq!(
        stderr(&failed),
        format!(
            "susurrus: error: {}: the binary version at byte 0 needs 4 bytes but the file ends at byte 2 \
             (truncated?)\n",
            broken.join("model.bin").display()
        )
    );
    assert!(!out.exists(), "a failed conversion created {}", out.display());

    assert_error(
        &susurrus(&["convert", s(tiny_en()), s(&file)]),
        &format!("destination {} exists and is not a folder", file.display()),
    );
    assert_error(
        &susurrus(&["convert", "--force", s(tiny_en()), s(tiny_en())]),
        &format!(
            "destination {} is the source folder: its config.json would be replaced; choose another folder",
            tiny_en().display()
        ),
    );
    let shadowed = tmp.join("shadowed");
    std::fs::create_dir_all(&shadowed).unwrap();
    std::fs::write(shadowed.join("model.bin"), b"old").unwrap();
    assert_error(
        &susurrus(&["convert", "--force", s(tiny_en()), s(&shadowed)]),
        &format!(
            "destination folder {} holds model.bin, which loaders read instead of the converted files; remove it \
             or choose another folder",
            shadowed.display()
        ),
    );
    assert_eq!(std::fs::read(shadowed.join("model.bin")).unwrap(), b"old");
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn info_lists_the_software_adapter_and_describes_the_default_model() {
    let out = susurrus(&["info"]);
    assert_success(&out);
    let text = stdout(&out);
    let threads = std::thread::available_parallelism().unwrap().get();
    let adapter = text.lines().find(|l| l.starts_with("  [") && l.contains("llvmpipe")).unwrap_or_else(|| {
        panic!("no llvmpipe adapter in:\n{text}");
    });
    let index = &adapter[3..adapter.find(']').unwrap()];
    assert!(text.contains("backend vulkan, device type cpu (not real hardware)"), "{text}");
    assert!(text.contains("features: shader-f16 "), "{text}");
    assert!(text.contains(&format!("--backend wgpu opens: [{index}] llvmpipe")), "{text}");
    // No NVIDIA driver here: CUDA says so, and auto moves on.
    assert!(
        text.contains(
            "\n--backend cuda opens: nothing (backend error: cuda: no NVIDIA driver: the CUDA driver library"
        ),
        "{text}"
    );
    assert!(text.contains("--backend auto picks: cpu (the wgpu adapter llvmpipe"), "{text}");
    assert!(text.contains(&format!("\ncpu backend: {threads} threads\n")), "{text}");
    let model_at = text.find("\nmodel: ").unwrap_or_else(|| panic!("no model section in:\n{text}"));
    let buffers_at = text.find("\n  on wgpu").unwrap_or_else(|| panic!("no buffer section in:\n{text}"));
    // tiny.en's largest weight, the 40 MB embedding, fits every buffer.
    let buffers = &text[buffers_at + 1..];
    assert!(
        buffers.starts_with("  on wgpu (weights above a buffer's limit are read as blocks of rows):\n"),
        "{buffers}"
    );
    assert!(buffers.contains(&format!("\n    [{index}] llvmpipe")), "{buffers}");
    assert!(
        buffers.ends_with(
            "\n    WebGPU's default limits (any browser): buffers of at most 134217728 B, every weight whole\n"
        ),
        "{buffers}"
    );
    assert_eq!(buffers.lines().filter(|l| l.ends_with(", every weight whole")).count(), buffers.lines().count() - 1);
    let bytes = std::fs::metadata(tiny_en().join("model.bin")).unwrap().len();
    assert_eq!(
        &text[model_at + 1..buffers_at + 1],
        format!(
            "model: {}\n  format CTranslate2, model.bin {:.1} MB\n  d_model 384, English-only (.en), vocabulary \
             51864, 80 mel bins\n  encoder: 4 layers, 6 heads, feed-forward 1536, audio context 1500\n  decoder: 4 \
             layers, 6 heads, feed-forward 1536, text context 448\n  37 760 256 parameters in 167 tensors, f16\n",
            tiny_en().display(),
            bytes as f64 / 1e6
        )
    );
}

#[test]
fn info_json_has_the_adapter_limits_and_the_model() {
    let out = susurrus(&["info", "--json", "--model", s(tiny_en())]);
    assert_success(&out);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let adapters = json["adapters"].as_array().unwrap();
    let lavapipe = adapters
        .iter()
        .find(|a| a["name"].as_str().unwrap().starts_with("llvmpipe"))
        .unwrap_or_else(|| panic!("no llvmpipe adapter in {json:#}"));
    assert_eq!(lavapipe["backend"], "vulkan");
    assert_eq!(lavapipe["device_type"], "cpu");
    assert_eq!(lavapipe["driver"], "llvmpipe");
    assert_eq!(lavapipe["real_hardware"], false);
    // WebGPU's guaranteed minimums; every adapter that wgpu lists meets them.
    assert!(lavapipe["max_storage_buffer_binding_size"].as_u64().unwrap() >= 128 << 20, "{lavapipe}");
    assert!(lavapipe["max_buffer_size"].as_u64().unwrap() >= 256 << 20, "{lavapipe}");
    assert!(lavapipe["max_compute_workgroup_size_x"].as_u64().unwrap() >= 256, "{lavapipe}");
    assert!(lavapipe["max_compute_invocations_per_workgroup"].as_u64().unwrap() >= 256, "{lavapipe}");
    assert!(lavapipe["max_compute_workgroup_storage_size"].as_u64().unwrap() >= 16384, "{lavapipe}");
    for feature in ["shader_f16", "subgroups", "timestamp_queries", "cooperative_matrix"] {
        assert!(lavapipe[feature].is_boolean(), "{feature}: {lavapipe}");
    }
    // Debian's lavapipe lists no cooperative-matrix configuration, so the matrix kernels are
    // off there.
    assert_eq!(lavapipe["cooperative_matrix_configs"], serde_json::json!([]), "{lavapipe}");
    assert_eq!(lavapipe["matrix_units"], false, "{lavapipe}");
    let software_only = adapters.iter().all(|a| a["real_hardware"] == false);
    if software_only {
        assert_eq!(json["auto"]["backend"], "cpu");
        assert_eq!(json["auto"]["adapter"], serde_json::Value::Null);
    }
    assert_eq!(json["cpu_threads"], std::thread::available_parallelism().unwrap().get());

    let model = &json["model"];
    let expected = serde_json::json!({
        "path": s(tiny_en()),
        "format": "CTranslate2",
        "weights_file": "model.bin",
        "weights_file_bytes": std::fs::metadata(tiny_en().join("model.bin")).unwrap().len(),
        "d_model": 384,
        "encoder_layers": 4,
        "encoder_heads": 6,
        "encoder_ffn": 1536,
        "decoder_layers": 4,
        "decoder_heads": 6,
        "decoder_ffn": 1536,
        "n_vocab": 51864,
        "n_mels": 80,
        "n_audio_ctx": 1500,
        "n_text_ctx": 448,
        "multilingual": false,
        "tensors": 167,
        "parameters": tiny_en_parameters(),
        "dtypes": ["f16"],
    });
    assert_eq!(model, &expected);
    assert_eq!(json["model_missing"], serde_json::Value::Null);
    // One buffer plan per adapter and one for WebGPU's defaults; tiny.en is never split.
    let buffers = json["buffers"].as_array().unwrap();
    assert_eq!(buffers.len(), adapters.len() + 1);
    assert_eq!(buffers.last().unwrap(), &serde_json::json!({"adapter": null, "limit_bytes": 134217728, "split": []}));
}

#[test]
fn info_without_the_default_model_still_lists_adapters_but_a_named_model_must_exist() {
    let home = temp_dir("info-home");
    let out = susurrus_with_home(&["info"], Some(&home));
    assert_success(&out);
    let hint = "run ./scripts/models/fetch_model.sh to fetch whisper-tiny.en, or pass --model DIR with a CTranslate2 or \
                Hugging Face Whisper folder, or a model's name (tiny.en, tiny, base.en, base, small.en, small, medium.en, \
                medium, large-v1, large-v2, large-v3, large, distil-large-v2, distil-medium.en, distil-small.en, \
                distil-large-v3, distil-large-v3.5, large-v3-turbo, turbo)";
    let default = home.join(".cache/susurrus/models/whisper-tiny.en-ct2");
    let text = stdout(&out);
    assert!(text.contains("llvmpipe"), "{text}");
    assert!(
        text.ends_with(&format!("\nmodel: none (default model folder {} not found: {hint})\n", default.display())),
        "{text}"
    );

    let missing = home.join("no-model");
    assert_error(
        &susurrus(&["info", "--model", s(&missing)]),
        &format!("model folder {} not found: {hint}", missing.display()),
    );
    std::fs::remove_dir_all(&home).unwrap();
}

/// `convert --quantize int8` quantizes as CTranslate2 does: the folder it writes from the f16
/// tiny.en loads to exactly the weights of CTranslate2's own int8 quantization of it
/// (`scripts/models/fetch_model.sh tiny.en-int8`): the same int8 values and scales in every matrix,
/// the same f16 vectors.
#[test]
fn convert_quantize_int8_matches_ctranslate2s_quantization() {
    let dst = temp_dir("convert-int8").join("tiny.en-int8-hf");
    let out = susurrus(&["convert", "--quantize", "int8", s(tiny_en()), s(&dst)]);
    assert_success(&out);
    assert!(stdout(&out).contains("(Hugging Face, int8 matrices, f16 vectors)"), "{}", stdout(&out));
    let ours = load_hf_dir(&dst).unwrap();
    let theirs = load_ct2_dir(&Set::TinyEnInt8.model_dir()).unwrap();
    assert_eq!(ours.config(), theirs.config());
    let mut quantized = 0;
    for (name, t) in theirs.tensors() {
        let mine = ours.get(name).unwrap();
        assert_eq!(mine.dtype(), t.dtype(), "{name}");
        assert!(mine == t, "{name}: our int8 differs from CTranslate2's");
        quantized += usize::from(t.dtype() == DType::Q8);
    }
    // 4 encoder layers x 6 matrices, 4 decoder layers x 10, two convolutions, the embedding.
    assert_eq!(quantized, 4 * 6 + 4 * 10 + 2 + 1);
    assert_eq!(ours.tensors().len(), theirs.tensors().len());
    let size = std::fs::metadata(dst.join("model.safetensors")).unwrap().len();
    let f16_size = std::fs::metadata(tiny_en().join("model.bin")).unwrap().len();
    assert!(size * 100 < f16_size * 55, "{size} bytes of int8 against {f16_size} of f16");
    std::fs::remove_dir_all(dst.parent().unwrap()).unwrap();
}

/// Runs the binary with at most a minute to finish: a command that hangs is killed and fails
/// the test rather than the suite.
#[cfg(unix)]
fn susurrus_within_a_minute(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_susurrus"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("susurrus {args:?} still ran after a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A model folder whose config.json is a named pipe (which `transcribe`, `info` and `serve
/// --api` used to wait on forever) or a link to /dev/zero (which grew memory without bound) is
/// refused before any work by every command that reads it, naming the file and what it is.
#[cfg(unix)]
#[test]
fn model_files_that_are_not_regular_files_are_refused_at_once() {
    let dir = temp_dir("not-regular");
    let model = dir.join("model");
    std::fs::create_dir_all(&model).unwrap();
    for name in ["model.bin", "tokenizer.json", "vocabulary.txt"] {
        if tiny_en().join(name).exists() {
            std::os::unix::fs::symlink(tiny_en().join(name), model.join(name)).unwrap();
        }
    }
    let config = model.join("config.json");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/sample.wav");
    for (make, what) in [
        (
            Box::new(|| assert!(Command::new("mkfifo").arg(&config).status().unwrap().success())) as Box<dyn Fn()>,
            "a named pipe",
        ),
        (Box::new(|| std::os::unix::fs::symlink("/dev/zero", &config).unwrap()), "a character device"),
    ] {
        let _ = std::fs::remove_file(&config);
        make();
        let says = format!("{}: not a regular file: {what}", config.display());
        for args in [
            vec!["info", "--model", s(&model)],
            vec!["transcribe", "--backend", "cpu", "--model", s(&model), s(&sample)],
            vec!["convert", s(&model), s(&dir.join("converted"))],
            vec!["serve", "--api", "--backend", "cpu", "--port", "0", "--model", s(&model)],
        ] {
            let out = susurrus_within_a_minute(&args);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains(&says), "{args:?}: {}", stderr(&out));
        }
    }
}

/// A conversion whose write fails (a file size limit stands for a full disk: the weights cannot
/// be written) leaves no destination and nothing beside it, so the same command runs again;
/// it used to leave `.model.safetensors.partial` or a folder without `config.json`, and the
/// retry was refused as "not empty".
#[cfg(target_os = "linux")]
#[test]
fn a_conversion_that_cannot_write_leaves_nothing_behind_and_runs_again() {
    let dir = temp_dir("cannot-write");
    let dst = dir.join("converted");
    // SIGXFSZ ignored, a write past the limit fails with EFBIG instead of ending the process.
    let out = Command::new("sh")
        .args(["-c", "trap '' XFSZ; ulimit -f 2048; exec \"$0\" convert \"$1\" \"$2\"", env!("CARGO_BIN_EXE_susurrus")])
        .args([s(tiny_en()), s(&dst)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let says = format!("susurrus: error: {}: File too large", dst.join("model.safetensors").display());
    assert!(stderr(&out).starts_with(&says), "{}", stderr(&out));
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let out = susurrus(&["convert", s(tiny_en()), s(&dst)]);
    assert_success(&out);
    let mut names: Vec<_> = std::fs::read_dir(&dst).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json"]);
}

/// What `info`, `convert`, `demo` and `bench` print is their result: with standard output
/// closed (`>&-`) each refuses to start, and `convert` writes no folder. `> /dev/null` is a
/// choice and runs.
#[test]
fn a_closed_standard_output_is_refused_before_any_work() {
    let dir = temp_dir("closed-stdout");
    let dst = dir.join("hf");
    let runs: [&[&str]; 4] = [
        &["info", "--model", s(tiny_en())],
        &["convert", s(tiny_en()), s(&dst)],
        &["demo"],
        &["bench-ops", "--backend", "cpu"],
    ];
    for args in runs {
        let out = Command::new("sh")
            .args(["-c", "exec \"$0\" \"$@\" >&-", env!("CARGO_BIN_EXE_susurrus")])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            (out.status.code(), stderr(&out)),
            (
                Some(1),
                "susurrus: error: standard output is closed: redirect it to a file, or to /dev/null to discard what the \
                 command prints\n"
                    .to_string()
            ),
            "{args:?}"
        );
    }
    assert!(!dst.exists(), "convert wrote nothing");
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" info --model \"$1\" > /dev/null", env!("CARGO_BIN_EXE_susurrus")])
        .arg(s(tiny_en()))
        .output()
        .unwrap();
    assert_success(&out);
    std::fs::remove_dir_all(&dir).unwrap();
}
