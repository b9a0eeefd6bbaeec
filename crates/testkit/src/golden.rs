//! Shared by the Whisper golden tests: the real models (fetched once by
//! scripts/models/fetch_model.sh), the committed fixtures of tests/fixtures/golden (made by
//! tests/golden/make_golden.sh) and the backends the tests run on.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use serde_json::Value;
use susurrus_core::exec::Backend;
pub use susurrus_whisper::text::wer::word_error_rate;
use susurrus_whisper::vad::{Vad, VadOptions, VadPlan, VadWeights, speech_chunks};
use susurrus_whisper::{Event, Task, TranscribeOptions, Whisper};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A set of golden fixtures and the real model its reference outputs came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    /// English-only tiny.en: `tests/fixtures/golden/`.
    TinyEn,
    /// Multilingual base: `tests/fixtures/golden/base/` (every language given, detected and
    /// translated).
    Base,
    /// tiny.en quantized to int8 by CTranslate2, on tiny.en's clips: its transcripts are
    /// compared with the reference executor's on the same model and, by word error rate,
    /// with tiny.en's fixtures ([`int8_transcripts_match`]).
    TinyEnInt8,
}

impl Set {
    /// The model's name for scripts/models/fetch_model.sh.
    pub fn model_name(self) -> &'static str {
        match self {
            Set::TinyEn => "tiny.en",
            Set::Base => "base",
            Set::TinyEnInt8 => "tiny.en-int8",
        }
    }

    /// The model's CTranslate2 folder, fetched on first use (cached under ~/.cache/susurrus).
    pub fn model_dir(self) -> PathBuf {
        static DIRS: [OnceLock<PathBuf>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        DIRS[self as usize].get_or_init(|| fetch(self.model_name())).clone()
    }

    /// The folder of the set's fixtures.
    pub fn dir(self) -> PathBuf {
        let golden = root().join("tests/fixtures/golden");
        match self {
            Set::TinyEn | Set::TinyEnInt8 => golden,
            Set::Base => golden.join("base"),
        }
    }

    /// The reference record of `clip` (`<clip>.json`).
    pub fn fixture(self, clip: &str) -> Value {
        let path = self.dir().join(format!("{clip}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The samples of the set's 16 kHz mono 16-bit PCM WAV `file`, scaled to [-1, 1) as the
    /// reference reads them (`int16 / 32768`).
    pub fn read_wav(self, file: &str) -> Vec<f32> {
        let path = self.dir().join(file);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        pcm16_wav(&bytes, file)
    }
}

/// The Silero VAD v6 network (`scripts/models/fetch_model.sh silero-vad`, fetched on first use).
pub fn vad_model() -> PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| fetch("silero-vad")).clone()
}

/// `scripts/models/fetch_model.sh NAME` (fetched once, then cached under ~/.cache/susurrus): the
/// path it prints.
fn fetch(name: &str) -> PathBuf {
    let out = std::process::Command::new(root().join("scripts/models/fetch_model.sh"))
        .arg(name)
        .current_dir(root())
        .output()
        .expect("scripts/models/fetch_model.sh runs");
    assert!(out.status.success(), "fetch_model.sh {name} failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("the printed path is UTF-8");
    PathBuf::from(stdout.lines().last().expect("fetch_model.sh prints the path").trim())
}

/// The VAD network planned (read from [`vad_model`]).
pub fn vad_plan() -> VadPlan {
    VadPlan::new(VadWeights::load(&vad_model()).unwrap()).unwrap()
}

/// The `vad` clip's speech probabilities and speech stretches on `backend` against
/// onnxruntime's and faster-whisper's (`get_speech_timestamps` with the default options):
/// every probability within 1e-4, the stretches identical.
pub fn vad_matches_reference(backend: &dyn Backend) {
    let record = fixture("vad");
    let pcm = read_wav(record["audio"]["file"].as_str().unwrap());
    let reference = &record["vad"];
    let want: Vec<f32> =
        reference["probabilities"].as_array().unwrap().iter().map(|p| p.as_f64().unwrap() as f32).collect();
    let mut vad = pollster::block_on(Vad::compile(backend, &vad_plan())).unwrap();
    let started = Instant::now();
    let got = pollster::block_on(vad.probabilities(&pcm, &mut |_| ControlFlow::Continue(()))).unwrap();
    let (diff, at) = max_abs_diff(&got, &want);
    println!(
        "{}: {} VAD windows in {:.2} s, probabilities within {diff:.2e} of onnxruntime's",
        backend.name(),
        got.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(got.len(), want.len(), "VAD windows");
    assert!(diff <= 1e-4, "VAD probability of window {at}: {}, onnxruntime {}", got[at], want[at]);
    let chunks: Vec<(u64, u64)> =
        speech_chunks(&got, pcm.len(), &VadOptions::default()).iter().map(|c| (c.start as u64, c.end as u64)).collect();
    let reference_chunks: Vec<(u64, u64)> = reference["speech_timestamps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["start"].as_u64().unwrap(), c["end"].as_u64().unwrap()))
        .collect();
    assert_eq!(chunks, reference_chunks, "speech stretches in samples");
}

/// The tiny.en CTranslate2 folder.
pub fn model_dir() -> PathBuf {
    Set::TinyEn.model_dir()
}

pub fn fixture_dir() -> PathBuf {
    Set::TinyEn.dir()
}

/// The tiny.en reference record of `clip` (`<clip>.json`).
pub fn fixture(clip: &str) -> Value {
    Set::TinyEn.fixture(clip)
}

/// A little-endian f32 fixture file.
pub fn read_f32(file: &str) -> Vec<f32> {
    let path = fixture_dir().join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// A tiny.en WAV fixture's samples (see [`Set::read_wav`]).
pub fn read_wav(file: &str) -> Vec<f32> {
    Set::TinyEn.read_wav(file)
}

fn pcm16_wav(bytes: &[u8], file: &str) -> Vec<f32> {
    assert_eq!(&bytes[0..4], b"RIFF", "{file}");
    assert_eq!(&bytes[8..12], b"WAVE", "{file}");
    let mut at = 12;
    let mut format = None;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        let body = &bytes[at + 8..at + 8 + len];
        if id == b"fmt " {
            let channels = u16::from_le_bytes([body[2], body[3]]);
            let rate = u32::from_le_bytes(body[4..8].try_into().unwrap());
            let bits = u16::from_le_bytes([body[14], body[15]]);
            format = Some((channels, rate, bits));
        } else if id == b"data" {
            assert_eq!(format, Some((1, 16000, 16)), "{file}: fixtures are 16 kHz mono 16-bit");
            return body.chunks_exact(2).map(|c| i16::from_le_bytes([c[0], c[1]]) as f32 / 32768.0).collect();
        }
        at += 8 + len + (len & 1);
    }
    panic!("{file}: no data chunk");
}

/// Largest absolute difference, and the index where it is.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> (f32, usize) {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(i, (x, y))| ((x - y).abs(), i))
        .fold((0.0, 0), |m, d| if d.0 > m.0 { d } else { m })
}

/// The backends the golden tests run on, by name.
pub fn backend(name: &str) -> Box<dyn Backend> {
    match name {
        "cpu" => crate::backends::reference(),
        "wgpu" => crate::backends::wgpu(),
        other => panic!("unknown backend {other}"),
    }
}

/// Every golden clip: what the CPU backends (the reference executor, the fast CPU backend)
/// and CUDA transcribe.
pub const CLIPS: [&str; 7] = ["short_1", "short_2", "short_3", "noisy", "silence", "long", "vad"];

/// The clips of at most 8 s, every decoding path but the seek over several windows: what the
/// int8 checks run, where the fast CPU backend runs every clip.
pub const SHORT_CLIPS: [&str; 5] = ["short_1", "short_2", "short_3", "noisy", "silence"];

/// What the reference executor runs (the plain oracle: a short clip's run takes it about 5 s
/// here, every run of the short clips 168 s): wgpu's runs on lavapipe (each decoding path that
/// compiles graphs of its own) and the silent clip's no-speech skip. What the other runs add
/// is host logic every backend shares, and the fast CPU backend runs every run of every clip.
pub const REFERENCE_RUNS: [&str; 5] =
    ["short_1/default", "short_1/beam_5", "short_1/word_timestamps", "short_1/repetition_penalty", "silence/default"];

/// What wgpu runs on lavapipe, a software GPU: one clip's decoding paths that run graphs of
/// their own (greedy chains, beam search, the alignment graph of word timestamps, the
/// selection with per-token penalties). Its other runs (without timestamps, suppressed
/// tokens) differ only in the prompt and the ids a compiled list bans, and the other options
/// (no-speech skips, the hallucination guard, the VAD filter) are host logic that every
/// backend shares: the fast CPU backend runs them all.
pub const LAVAPIPE_RUNS: [&str; 4] =
    ["short_1/default", "short_1/beam_5", "short_1/word_timestamps", "short_1/repetition_penalty"];

/// Every multilingual clip (German, Spanish, French, Japanese, English).
pub const MULTILINGUAL_CLIPS: [&str; 5] = ["de", "es", "fr", "ja", "en"];

/// One run of each kind (detected, translated, given), for the reference executor and the
/// converted model, where the fast CPU backend runs every clip.
pub const MULTILINGUAL_RUNS: [&str; 3] = ["de/detect", "fr/translate", "ja/language"];

/// The reference run's options as ours (the beam size, language, task, temperature, prompt
/// and timestamps it names; the reference defaults otherwise).
pub fn options(run: &Value) -> TranscribeOptions {
    let o = &run["options"];
    let defaults = TranscribeOptions::default();
    TranscribeOptions {
        beam_size: o["beam_size"].as_u64().expect("every fixture names its beam size") as usize,
        word_timestamps: o["word_timestamps"].as_bool().unwrap_or(false),
        language: o["language"].as_str().map(str::to_string),
        task: match o["task"].as_str() {
            None | Some("transcribe") => Task::Transcribe,
            Some("translate") => Task::Translate,
            Some(other) => panic!("unknown task {other}"),
        },
        temperatures: o["temperature"].as_f64().map_or(defaults.temperatures.clone(), |t| vec![t as f32]),
        timestamps: !o["without_timestamps"].as_bool().unwrap_or(false),
        initial_prompt: o["initial_prompt"].as_str().map(str::to_string),
        vad: o["vad_filter"].as_bool().unwrap_or(false),
        prefix: o["prefix"].as_str().map(str::to_string),
        hotwords: o["hotwords"].as_str().map(str::to_string),
        suppress_tokens: o["suppress_tokens"].as_array().map(|ids| ids.iter().map(|t| t.as_i64().unwrap()).collect()),
        hallucination_silence_threshold: o["hallucination_silence_threshold"].as_f64(),
        // A null threshold turns the no-speech skip off.
        no_speech_threshold: match o.get("no_speech_threshold") {
            Some(t) => t.as_f64().map(|t| t as f32),
            None => defaults.no_speech_threshold,
        },
        repetition_penalty: o["repetition_penalty"].as_f64().map_or(defaults.repetition_penalty, |p| p as f32),
        no_repeat_ngram_size: o["no_repeat_ngram_size"].as_u64().map_or(defaults.no_repeat_ngram_size, |n| n as usize),
        clip_timestamps: match &o["clip_timestamps"] {
            Value::Null => Vec::new(),
            Value::String(s) => s.split(',').map(|t| t.trim().parse().unwrap()).collect(),
            other => other.as_array().unwrap().iter().map(|t| t.as_f64().unwrap()).collect(),
        },
        ..defaults
    }
}

/// Compares one run; returns the differences found.
pub fn check_run(whisper: &mut Whisper, clip: &str, run: &Value, pcm: &[f32]) -> Vec<String> {
    let name = format!("{clip}/{}", run["name"].as_str().unwrap());
    if options(run).vad && !whisper.has_vad() {
        pollster::block_on(whisper.load_vad(&vad_plan())).unwrap();
    }
    let started = Instant::now();
    let mut streamed = 0;
    let mut on_event = |e: Event| {
        if let Event::Segment(_) = e {
            streamed += 1;
        }
        ControlFlow::Continue(())
    };
    let transcript = match pollster::block_on(whisper.transcribe(pcm, &options(run), &mut on_event)) {
        Ok(t) => t,
        Err(e) => return vec![format!("{name}: {e}")],
    };
    println!(
        "{} {name}: {:.1} s for {:.1} s of audio, {} segments",
        whisper.backend_name(),
        started.elapsed().as_secs_f64(),
        transcript.duration,
        transcript.segments.len()
    );
    let mut problems = Vec::new();
    let info = &run["info"];
    if transcript.language != info["language"].as_str().unwrap() {
        problems.push(format!("{name}: language {}, reference {}", transcript.language, info["language"]));
    }
    let reference_probability = info["language_probability"].as_f64().unwrap();
    if (transcript.language_probability as f64 - reference_probability).abs() > 1e-3 {
        problems.push(format!(
            "{name}: language probability {}, reference {reference_probability}",
            transcript.language_probability
        ));
    }
    let want = run["segments"].as_array().unwrap();
    if transcript.segments.len() != want.len() || streamed != want.len() {
        problems.push(format!(
            "{name}: {} segments ({streamed} streamed), reference has {}",
            transcript.segments.len(),
            want.len()
        ));
    }
    for (i, (got, want)) in transcript.segments.iter().zip(want).enumerate() {
        let tokens: Vec<u32> = want["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
        if got.tokens != tokens {
            problems.push(format!("{name} segment {i}: tokens {:?}\n  reference {:?}", got.tokens, tokens));
        }
        if got.text != want["text"].as_str().unwrap() {
            problems.push(format!("{name} segment {i}: text {:?}, reference {:?}", got.text, want["text"]));
        }
        for (what, value) in [("start", got.start), ("end", got.end)] {
            let reference = want[what].as_f64().unwrap();
            if (value - reference).abs() > 0.02 {
                problems.push(format!("{name} segment {i}: {what} {value}, reference {reference}"));
            }
        }
        let reference_nsp = want["no_speech_prob"].as_f64().unwrap();
        if (got.no_speech_prob as f64 - reference_nsp).abs() > 2e-3 {
            problems
                .push(format!("{name} segment {i}: no_speech_prob {}, reference {reference_nsp}", got.no_speech_prob));
        }
        let reference_lp = want["avg_logprob"].as_f64().unwrap();
        if (got.avg_logprob - reference_lp).abs() > 2e-3 {
            problems.push(format!("{name} segment {i}: avg_logprob {}, reference {reference_lp}", got.avg_logprob));
        }
        match (want["words"].as_array(), &got.words) {
            (Some(want), Some(words)) => problems.extend(word_differences(&format!("{name} segment {i}"), words, want)),
            (None, None) => {}
            (want, _) => {
                problems.push(format!("{name} segment {i}: words {:?}, reference has {}", got.words, want.is_some()))
            }
        }
        if got.temperature as f64 != want["temperature"].as_f64().unwrap() {
            problems.push(format!(
                "{name} segment {i}: temperature {}, reference {}",
                got.temperature, want["temperature"]
            ));
        }
    }
    if transcript.text != run["text"].as_str().unwrap() {
        problems.push(format!("{name}: text {:?}\n  reference {:?}", transcript.text, run["text"]));
    }
    problems
}

/// Differences between a segment's words and the reference's: the same words, start and end
/// within 0.02 s (one alignment frame), probability within 0.01.
fn word_differences(label: &str, got: &[susurrus_whisper::decode::words::Word], want: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    if got.len() != want.len() {
        let words = |w: Vec<&str>| w.join("|");
        problems.push(format!(
            "{label}: {} words, reference {}:\n  {}\n  reference {}",
            got.len(),
            want.len(),
            words(got.iter().map(|w| w.word.as_str()).collect()),
            words(want.iter().map(|w| w["word"].as_str().unwrap_or("")).collect())
        ));
        return problems;
    }
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if g.word != w["word"].as_str().unwrap_or("") {
            problems.push(format!("{label} word {k}: {:?}, reference {}", g.word, w["word"]));
        }
        for (what, value) in [("start", g.start), ("end", g.end)] {
            let reference = w[what].as_f64().unwrap();
            if (value - reference).abs() > 0.02 + 1e-9 {
                problems.push(format!("{label} word {k} {:?}: {what} {value}, reference {reference}", g.word));
            }
        }
        let reference = w["probability"].as_f64().unwrap();
        if (g.probability - reference).abs() > 0.01 {
            problems
                .push(format!("{label} word {k} {:?}: probability {}, reference {reference}", g.word, g.probability));
        }
    }
    problems
}

/// Every run of the fixtures of `clips` of `set` on `backend`, with the set's model:
/// panics listing every difference. `"clip"` names all of a clip's runs, `"clip/run"` one.
pub fn transcripts_match_reference(backend: Box<dyn Backend>, set: Set, clips: &[&str]) {
    let whisper = pollster::block_on(Whisper::load_dir(backend, &set.model_dir())).unwrap();
    model_matches_reference(whisper, set, clips);
}

/// Every run of the fixtures of `clips` of `set` on a model already loaded (the set's model
/// in any form: a converted copy, say): panics listing every difference.
pub fn model_matches_reference(mut whisper: Whisper, set: Set, clips: &[&str]) {
    let mut problems = Vec::new();
    for &entry in clips {
        let (clip, only) = entry.split_once('/').map_or((entry, None), |(c, r)| (c, Some(r)));
        let record = set.fixture(clip);
        let pcm = set.read_wav(record["audio"]["file"].as_str().unwrap());
        let runs: Vec<&Value> =
            record["runs"].as_array().unwrap().iter().filter(|r| only.is_none_or(|name| r["name"] == name)).collect();
        assert!(!runs.is_empty(), "{entry}: no such run in the fixtures");
        for run in runs {
            problems.extend(check_run(&mut whisper, clip, run, &pcm));
        }
    }
    assert!(problems.is_empty(), "{} differences from the reference:\n{}", problems.len(), problems.join("\n"));
}

/// Every tiny.en run but the long clip's beam search: what the GPU suites check token for
/// token. There the beams meet a pruning decision whose candidates differ by 5e-4 in summed
/// log-probability (measured on the reference executor), closer than the rounding of f16
/// products on matrix units (CUDA's tensor cores, wgpu's cooperative matrices flip it on an
/// H200; f32 products do not); the CPU backends check it token for token, and the GPU suites
/// with [`beam_run_matches_up_to_a_near_tie`].
pub const GPU_RUNS: [&str; 13] = [
    "vad/default",
    "vad/vad",
    "vad/vad_beam_5",
    "vad/vad_word_timestamps",
    "vad/hallucination_silence_threshold",
    "short_1",
    "short_2",
    "short_3",
    "noisy",
    "silence",
    "long/default",
    "long/clip_timestamps",
    "long/word_timestamps",
];

/// The word-timestamp run whose words' times f16 products on matrix units move: in the VAD
/// clip without the VAD filter, " Tonight" after a sentence's pause starts at 6.62 s with
/// wgpu's cooperative-matrix kernels against the reference's 6.76 s (measured on an H100; the
/// DTW path through the pause is nearly flat). Those kernels run every other run here.
pub const F16_MATRIX_WORD_FLIP: &str = "vad/hallucination_silence_threshold";

/// The long clip's beam run on a backend whose rounding may flip a near-tie between beams:
/// every window's tokens are the reference's up to the first window that differs, and that
/// window's result is at least as likely as the reference's, less `tolerance` in average
/// log-probability (a beam search that lost a better hypothesis, or ranked badly, fails).
/// Later windows are not compared: their prompts and seek follow from that window.
pub fn beam_run_matches_up_to_a_near_tie(backend: Box<dyn Backend>, tolerance: f64) {
    let set = Set::TinyEn;
    let record = set.fixture("long");
    let pcm = set.read_wav(record["audio"]["file"].as_str().unwrap());
    let run = record["runs"].as_array().unwrap().iter().find(|r| r["name"] == "beam_5").expect("long/beam_5");
    let mut whisper = pollster::block_on(Whisper::load_dir(backend, &set.model_dir())).unwrap();
    let ours = pollster::block_on(whisper.transcribe(&pcm, &options(run), &mut |_| ControlFlow::Continue(()))).unwrap();
    // The reference's windows by seek; ours by the window values every segment of a window
    // shares.
    let mut reference: Vec<(u64, Vec<u32>, f64)> = Vec::new();
    for s in run["segments"].as_array().unwrap() {
        let seek = s["seek"].as_u64().unwrap();
        let tokens = s["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32);
        match reference.last_mut() {
            Some(w) if w.0 == seek => w.1.extend(tokens),
            _ => reference.push((seek, tokens.collect(), s["avg_logprob"].as_f64().unwrap())),
        }
    }
    let mut windows: Vec<(Vec<u32>, f64)> = Vec::new();
    let mut last = None;
    for s in &ours.segments {
        let key = (s.avg_logprob.to_bits(), s.no_speech_prob.to_bits(), s.temperature.to_bits());
        match windows.last_mut() {
            Some(w) if last == Some(key) => w.0.extend(&s.tokens),
            _ => windows.push((s.tokens.clone(), s.avg_logprob)),
        }
        last = Some(key);
    }
    let name = whisper.backend_name().to_string();
    for (i, ((seek, want, want_logprob), (got, logprob))) in reference.iter().zip(&windows).enumerate() {
        if got == want {
            continue;
        }
        println!(
            "{name} long/beam_5: window {i} (seek {seek}) differs: average log-probability {logprob}, reference {want_logprob}"
        );
        assert!(
            *logprob >= want_logprob - tolerance,
            "{name} long/beam_5 window {i} (seek {seek}): average log-probability {logprob}, below the reference's \
             {want_logprob} by more than {tolerance}:\n  tokens {got:?}\n  reference {want:?}"
        );
        return;
    }
    assert_eq!(windows.len(), reference.len(), "{name} long/beam_5: windows with text");
    println!("{name} long/beam_5: every window's tokens are the reference's");
}

/// The int8 model's transcript of the first run of each of `clips` on `backend`: (clip, token
/// ids of every segment, text).
fn int8_runs(backend: Box<dyn Backend>, clips: &[&str]) -> Vec<(String, Vec<u32>, String)> {
    let mut whisper = pollster::block_on(Whisper::load_dir(backend, &Set::TinyEnInt8.model_dir())).unwrap();
    let mut out = Vec::new();
    for &clip in clips {
        let record = Set::TinyEnInt8.fixture(clip);
        let pcm = Set::TinyEnInt8.read_wav(record["audio"]["file"].as_str().unwrap());
        let run = &record["runs"][0];
        let started = Instant::now();
        let mut ignore = |_: Event| ControlFlow::Continue(());
        let transcript = pollster::block_on(whisper.transcribe(&pcm, &options(run), &mut ignore))
            .unwrap_or_else(|e| panic!("{clip} (int8): {e}"));
        println!(
            "{} int8 {clip}: {:.1} s, {:?}",
            whisper.backend_name(),
            started.elapsed().as_secs_f64(),
            transcript.text
        );
        let tokens = transcript.segments.iter().flat_map(|s| s.tokens.iter().copied()).collect();
        out.push((clip.to_string(), tokens, transcript.text));
    }
    out
}

/// The int8 tiny.en (CTranslate2's quantization) on `clips`, each clip's first reference
/// run: on the reference executor its words stay within `max_wer` of the f16 reference's
/// (faster-whisper on tiny.en), and on `backend`, when given, its token ids are the
/// reference executor's (every backend dequantizes the same int8 values and scales).
pub fn int8_transcripts_match(backend: Option<Box<dyn Backend>>, clips: &[&str], max_wer: f64) {
    let reference = int8_runs(crate::backends::reference(), clips);
    let mut problems = Vec::new();
    for (clip, _, text) in &reference {
        let f16_text = Set::TinyEn.fixture(clip)["runs"][0]["text"].as_str().unwrap().to_string();
        let wer = word_error_rate(&f16_text, text);
        println!("int8 {clip}: word error rate {wer:.3} against the f16 reference");
        if wer > max_wer {
            problems.push(format!("{clip}: int8 text {text:?} is {wer:.3} words off the f16 reference {f16_text:?}"));
        }
    }
    if let Some(backend) = backend {
        for ((clip, want, _), (_, got, text)) in reference.iter().zip(int8_runs(backend, clips)) {
            if &got != want {
                problems.push(format!("{clip}: int8 tokens {got:?} ({text:?})\n  reference executor {want:?}"));
            }
        }
    }
    assert!(problems.is_empty(), "{} differences:\n{}", problems.len(), problems.join("\n"));
}
