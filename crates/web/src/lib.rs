//! Susurrus in the browser: the wasm-bindgen API of the npm package "susurrus".
//!
//! [`Model`] loads a Whisper model (from a folder URL through the Cache API, or from picked
//! files) onto WebGPU or the CPU and transcribes audio with streamed segments,
//! progress and cancellation. The package's main-thread client and module worker
//! (`crates/web/js`) wrap this API so a page never blocks. Logic that needs no browser lives
//! in plain Rust functions (tested natively); the wrappers turn errors into JS `Error`s.

mod audio;
mod backend;
mod download;
pub mod error;
mod global;
mod live;
mod model;
mod options;
mod pace;
mod result;
pub mod stream;

pub use live::LiveStream;
pub use model::Model;
use susurrus_core::{passes, plan};
use susurrus_whisper::graphs::demo::{EncoderLayerShape, encoder_layer};
use wasm_bindgen::prelude::*;
/// `initThreadPool(n)`, in the threaded build only: starts `n` workers sharing the module's
/// memory for the CPU backend's pool (call it once, before loading a model).
#[cfg(target_feature = "atomics")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// TypeScript types of the options and results, which serde-wasm-bindgen passes as plain
/// objects (so wasm-bindgen cannot derive them). They mirror `options.rs` and `result.rs`.
#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
/** "auto": WebGPU when the browser has an adapter, else the CPU. */
export type BackendChoice = "auto" | "webgpu" | "cpu";
/** The URL of a model folder (model.bin or model.safetensors, config.json, vocabulary.txt or tokenizer.json), or those files. */
export type ModelSource = string | FileList | File[];
export interface LoadProgress { file: string; loaded: number; total: number | null; fromCache: boolean }
export interface LoadOptions {
  backend?: BackendChoice;
  /** Keep downloaded files in the Cache API, keyed by URL (default true). */
  cache?: boolean;
  onProgress?: (progress: LoadProgress) => void;
  /** The URL of the Silero VAD v6 network (silero_vad_v6.onnx, from faster-whisper's wheel), for `vad: true`. */
  vad?: string;
  /** Where a model given by name is fetched from: the Hugging Face hub (default
   *  "https://huggingface.co") or a mirror of it. */
  hub?: string;
}
export interface ModelInfo {
  backend: "webgpu" | "cpu";
  adapter: string;
  /** Why "auto" runs on the CPU, when it does. */
  fallbackReason: string | null;
  /** The CPU's threads: 1, or more where the page is cross-origin isolated and the package
   *  runs its threaded build; null on WebGPU. */
  threads: number | null;
  fromCache: boolean;
  loadMs: number;
  bytes: number;
  /** Whether the model detects languages and translates, or knows English only. */
  multilingual: boolean;
  /** The language codes it knows ("en", "zh", "de", ...; ["en"] when English-only). */
  languages: string[];
  /** Whether the VAD network is loaded (`vad: true` transcriptions). */
  vad: boolean;
}
export interface BenchOptions {
  /** Timed runs of each measure after one to warm up (default 5). */
  runs?: number;
  /** Decoder steps per decoding run, 1 to 200 (default 64). */
  tokens?: number;
}
/** Medians in milliseconds, as `susurrus bench` reports them. */
export interface BenchResult {
  /** The backend as the program names it ("wgpu", "wgpu-f16", ..., "cpu"). */
  backend: string;
  adapter: string;
  /** The encoder on one 30 s window. */
  encoderMs: number;
  /** Greedy decoder tokens as transcription runs them (chained on WebGPU). */
  msPerToken: number;
  /** One decoder step per submission, its token fed by the page. */
  msPerTokenSingle: number;
  /** A step replayed back to back on the device. */
  deviceMsPerStep: number;
  encoderKernels: number | null;
  stepKernels: number | null;
  /** One decoder step of `beams` beams (null without beam graphs). */
  beamMsPerStep: number | null;
  beams: number;
  /** A whole greedy transcription of the audio. */
  transcribeMs: number;
  audioDurationS: number;
  rtf: number;
  /** A whole transcription with the default beam search (5 beams). */
  transcribeBeamMs: number;
  beamRtf: number;
}
export interface Word { start: number; end: number; word: string; probability: number }
export interface Segment {
  start: number; end: number; text: string; tokens: number[];
  avgLogprob: number; noSpeechProb: number; temperature: number; compressionRatio: number;
  /** With `wordTimestamps: true`: each word with its time (seconds) and probability. */
  words?: Word[];
}
export interface TranscribeOptions {
  /** Language code; English-only models always use "en"; multilingual ones detect it when left out. */
  language?: string | null;
  task?: "transcribe" | "translate";
  timestamps?: boolean;
  /** Temperatures tried in order until a window passes the thresholds (default [0, 0.2, ..., 1]). */
  temperatures?: number[];
  compressionRatioThreshold?: number | null;
  logProbThreshold?: number | null;
  noSpeechThreshold?: number | null;
  conditionOnPreviousText?: boolean;
  promptResetOnTemperature?: number;
  initialPrompt?: string | null;
  /** Text the transcript starts with: the first window goes on from it. */
  prefix?: string | null;
  /** Words or phrases to expect, given to every window before the previous text (not with prefix). */
  hotwords?: string | null;
  suppressBlank?: boolean;
  /** Token ids never produced; -1 stands for the model's list of non-speech symbols (default [-1]). */
  suppressTokens?: number[] | null;
  maxInitialTimestamp?: number;
  /** Beams of the beam search at temperature 0 (default 5, as the reference; 1 is greedy). */
  beamSize?: number;
  /** Beam search waits for round(beamSize * patience) finished hypotheses (default 1). */
  patience?: number;
  /** Hypotheses rank by log-probability over length ** lengthPenalty (default 1). */
  lengthPenalty?: number;
  /** Divides the logit of every token already chosen in a window (multiplies it when negative); above 1 discourages repetition (default 1). */
  repetitionPenalty?: number;
  /** Never repeat a sequence of this many tokens within a window (default 0: no limit). */
  noRepeatNgramSize?: number;
  /** Samples drawn at each temperature above 0, 1 to 32 (default 5). */
  bestOf?: number;
  /** Time every word (segments' `words`), as the reference's word_timestamps. */
  wordTimestamps?: boolean;
  /** With wordTimestamps: skip silences longer than this (seconds) around segments that look hallucinated. */
  hallucinationSilenceThreshold?: number | null;
  seed?: number;
  /** Only these stretches, as [start, end, start, end, ...] seconds (a last start runs to the end). */
  clipTimestamps?: number[];
  /** Transcribe only speech (faster-whisper's vad_filter): silences are cut out, times stay the audio's. Needs load's `vad`. */
  vad?: boolean;
  vadOptions?: VadOptions;
  /** Each segment as soon as it is decoded. */
  onSegment?: (segment: Segment) => void;
  /** Seconds of audio done, after each 30 s window. */
  onProgress?: (progress: { done: number; total: number }) => void;
  /**
   * The GPU device was lost (driver reset, the browser reclaiming the GPU, out of memory): a
   * new device is opened and the transcription goes on from `resumeAt` seconds, the window in
   * work; the result is the one an undisturbed run gives. After 3 losses in one
   * transcription the next rejects it.
   */
  onDeviceLost?: (lost: { reason: string; resumeAt: number }) => void;
  /** Aborting rejects with an Error named "AbortError"; the model stays usable. */
  signal?: AbortSignal;
}
/** How the VAD tells speech from silence (faster-whisper's VadOptions and defaults). */
export interface VadOptions {
  /** A window with at least this speech probability is speech (default 0.5). */
  threshold?: number;
  /** Below this a window is silence; between the two it continues what came before (default threshold - 0.15). */
  negThreshold?: number | null;
  /** Shorter speech is dropped (default 0). */
  minSpeechDurationMs?: number;
  /** Longer speech is split, at a pause where there is one (default null: no limit). */
  maxSpeechDurationS?: number | null;
  /** Shorter silence does not end speech (default 2000). */
  minSilenceDurationMs?: number;
  /** Audio kept on each side of speech (default 400). */
  speechPadMs?: number;
}
/** Words of a live stream and their times (seconds from the stream's first sample). */
export interface LiveText { text: string; start: number; end: number; words: Word[] }
/**
 * `stream`'s options: `transcribe`'s decoding options (here greedy, `temperatures: [0]` and
 * `wordTimestamps: true` unless given; not `clipTimestamps`, `prefix`, `vad`'s transcribe
 * meaning or `hallucinationSilenceThreshold`), the stream's own, and its callbacks.
 */
export interface StreamOptions extends Omit<TranscribeOptions, "vad" | "onSegment" | "onProgress" | "onDeviceLost" | "signal"> {
  /** Seconds of new audio between looks at the buffer (default 1). */
  hop?: number;
  /** Skip what the VAD network hears no speech in and end utterances at pauses (default true; needs load's `vad`). */
  vad?: boolean;
  /** Seconds of silence after speech that end an utterance (default 0.5). */
  minSilence?: number;
  /** Seconds of audio kept around speech (default 0.2). */
  speechPad?: number;
  /** Seconds of buffer after which committed sentences are cut out of it (default 20). */
  trimAfter?: number;
  /** Seconds of buffer after which its words are committed without waiting (default 25). */
  maxBuffer?: number;
  /** The words after the committed ones as the last look heard them; each partial replaces the one before (an empty one clears it). */
  onPartial?: (partial: LiveText) => void;
  /** Final words, after those committed before; never taken back. */
  onCommitted?: (committed: LiveText) => void;
  /** What ended the stream early (a failed look, a lost device that could not be reopened, an abort); `finish` rejects with it too. */
  onError?: (error: Error) => void;
  /** Aborting ends the stream with an Error named "AbortError" and lets the model go. */
  signal?: AbortSignal;
}
/** What a finished stream heard, and the time the model spent on it (`realTimeFactor` below 1: it kept up). */
export interface LiveSummary { audioSeconds: number; busyMs: number; realTimeFactor: number }
export interface Timings { decodeMs: number; transcribeMs: number; audioDurationS: number; rtf: number | null }
export interface TranscribeResult {
  text: string; segments: Segment[]; language: string; languageProbability: number;
  backend: "webgpu" | "cpu"; adapter: string; timings: Timings;
  /** What was wrong with an audio file that still gave audio (where a cut file ends, where damage stopped decoding). */
  warnings: string[];
}
/** 16 kHz mono samples, an AudioBuffer, or an audio file's bytes or Blob (WAV, MP3, OGG, FLAC, MP4/M4A, WebM/MKV, decoded as they are read; whatever else the browser's WebAudio decodes). */
export type AudioInput = Float32Array | AudioBuffer | ArrayBuffer | Uint8Array | Blob;
export type TranscriptFormat = "txt" | "srt" | "vtt" | "json";
/** How "srt"/"vtt" cues are cut from words (results of `wordTimestamps: true`), as Whisper's CLI. */
export interface CueOptions {
  /** Characters a line. */
  maxLineWidth?: number;
  /** Lines a cue; with maxLineWidth, cues ignore segments and break at pauses over 3 s. */
  maxLineCount?: number;
  maxWordsPerLine?: number;
  /** A cue per word, the word underlined (<u>). */
  highlightWords?: boolean;
}
"#;

/// Shows Rust panics (bugs, never expected) on the console with their message.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// The package version, as built.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// 16 kHz mono samples of `input`, decoded and resampled with WebAudio (pages only: workers
/// have no WebAudio).
#[wasm_bindgen(js_name = decodeAudio)]
pub async fn decode_audio(
    #[wasm_bindgen(unchecked_param_type = "AudioInput")] input: JsValue,
) -> Result<js_sys::Float32Array, JsValue> {
    let samples = audio::to_samples(&input).await?;
    // A caller's own array comes back as a copy, as decoded audio is a new one.
    Ok(if input.is_instance_of::<js_sys::Float32Array>() { samples.slice(0, samples.length()) } else { samples })
}

/// A transcription result as a document: `txt` (one segment a line), `srt`, `vtt` or `json`;
/// `options` cut `srt`/`vtt` cues from words (results of `wordTimestamps: true`).
#[wasm_bindgen(js_name = formatTranscript)]
pub fn format_transcript(
    #[wasm_bindgen(unchecked_param_type = "TranscribeResult")] result: JsValue,
    #[wasm_bindgen(unchecked_param_type = "TranscriptFormat")] format: &str,
    #[wasm_bindgen(unchecked_optional_param_type = "CueOptions")] options: JsValue,
) -> Result<String, JsValue> {
    result::format(&result, format, &options)
}

/// Deletes every cached model file; resolves to whether there was a cache.
#[wasm_bindgen(js_name = clearModelCache)]
pub async fn clear_model_cache() -> Result<bool, JsValue> {
    download::clear_cache().await
}

/// The optimised IR and memory report of a Whisper-tiny-shaped encoder layer, as text.
#[wasm_bindgen(js_name = demoPlan)]
pub fn demo_plan() -> Result<String, JsError> {
    Ok(demo_plan_text()?)
}

/// What [`demo_plan`] returns: build the layer, run the default passes, plan it, render both.
pub fn demo_plan_text() -> susurrus_core::Result<String> {
    let mut graph = encoder_layer(&EncoderLayerShape::WHISPER_TINY)?;
    passes::optimize(&mut graph)?;
    let ir = graph.to_string();
    let plan = plan::plan(graph)?;
    Ok(format!("{ir}\n\n{}\n", plan.report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_plan_is_the_fused_layer_and_its_arena() {
        let text = demo_plan_text().unwrap();
        let (ir, report) = text.split_once("\n\n").unwrap();
        assert!(ir.starts_with("graph encoder_layer {\n  %0 = input \"x\" : f32[1500,384]\n"), "{ir}");
        assert!(ir.contains(" = attention(") && ir.contains(" = matmul_bias("), "{ir}");
        assert!(!ir.contains("softmax("), "attention fusion left a softmax:\n{ir}");
        // The MLP's hidden [1500,1536] f32 with the residual and the fc2 output, two
        // [1500,384] f32, live at once: 13 824 000 B = 13.2 MiB, which the arena reaches.
        assert!(report.starts_with("arena 13.2 MiB (peak live 13.2 MiB, 1.00x;"), "{report}");
        assert_eq!(report.lines().count(), 1, "{report}");
    }

    #[test]
    fn version_is_three_numbers() {
        let version = version();
        let parts: Vec<&str> = version.split('.').collect();
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{parts:?}");
    }
}
