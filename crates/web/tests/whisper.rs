//! The package's API in a real browser (headless Chromium; WebGPU is its SwiftShader
//! adapter here): a small random-weight Whisper gives the same tokens on WebGPU and on the
//! CPU backend, every misuse is a JS `Error` with a clear message, aborting keeps the model
//! usable, cached files load without the network. Run with `wasm-pack test --headless --chrome`.
#![cfg(target_arch = "wasm32")]

mod support;

use js_sys::{Array, Float32Array, Uint8Array};
use support::*;
use susurrus_core::ir::DType;
use susurrus_testkit::shapes;
use susurrus_testkit::whisper::Architecture;
use susurrus_testkit::whisper::{small_model_files, small_model_files_as, small_tokenizer_json, small_vocabulary};
use susurrus_web::{Model, clear_model_cache, decode_audio, format_transcript};
use susurrus_wgpu::{WgpuBackend, WgpuOptions};
use susurrus_whisper::load::config::WhisperConfig;
use susurrus_whisper::load::convert::WeightFormat;
use susurrus_whisper::text::tokenizer::Tokenizer;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

/// Greedy decoding with no fallback or skipping: random weights give low scores, and the
/// comparison is about the backends, not the thresholds. (`extra` may ask for beams.)
fn greedy(extra: &[(&str, JsValue)]) -> js_sys::Object {
    let mut pairs = vec![
        ("beamSize", 1.into()),
        ("temperatures", Array::of1(&0.0.into()).into()),
        ("noSpeechThreshold", JsValue::NULL),
        ("logProbThreshold", JsValue::NULL),
        ("compressionRatioThreshold", JsValue::NULL),
    ];
    pairs.extend(extra.iter().cloned());
    object(&pairs)
}

/// (start, end, tokens) of every segment of a result.
fn segments(result: &JsValue) -> Vec<(f64, f64, Vec<u32>)> {
    Array::from(&get(result, "segments"))
        .iter()
        .map(|s| {
            let tokens = Array::from(&get(&s, "tokens")).iter().map(|t| t.as_f64().unwrap() as u32).collect();
            (get(&s, "start").as_f64().unwrap(), get(&s, "end").as_f64().unwrap(), tokens)
        })
        .collect()
}

async fn transcribe(model: &Model, audio: &JsValue, options: js_sys::Object) -> Result<JsValue, JsValue> {
    settle(model.transcribe(audio.clone(), Some(options))).await
}

/// The segments of `audio` transcribed by `model` (picked files) with `beams` beams (1:
/// greedily) on WebGPU and on the CPU backend; checks that each backend reports itself and
/// that something was decoded.
async fn segments_on_webgpu_and_cpu(model: &JsValue, what: &str, beams: u32) -> [Vec<(f64, f64, Vec<u32>)>; 2] {
    let audio: JsValue = test_audio().into();
    let mut runs = Vec::new();
    for backend in ["webgpu", "cpu"] {
        let model = Model::load(model.clone(), Some(object(&[("backend", backend.into())])))
            .await
            .unwrap_or_else(|e| panic!("{what} on {backend}: {}", error_message(&e)));
        assert_eq!(get(&model.info().unwrap(), "backend"), backend);
        let options = greedy(&[("beamSize", beams.into())]);
        let result = transcribe(&model, &audio, options).await.unwrap_or_else(|e| panic!("{}", error_message(&e)));
        assert_eq!(get(&result, "backend"), backend);
        runs.push(segments(&result));
    }
    let tokens: usize = runs[0].iter().map(|s| s.2.len()).sum();
    assert!(tokens > 3, "the {what} decoded almost nothing: {:?}", runs[0]);
    [runs.remove(0), runs.remove(0)]
}

#[wasm_bindgen_test]
async fn small_model_gives_the_same_tokens_on_webgpu_and_cpu() {
    let [webgpu, cpu] = segments_on_webgpu_and_cpu(&small_model(), "small model", 1).await;
    assert_eq!(webgpu, cpu, "WebGPU and CPU differ");
    // Beam search: the beams' caches reordered on the device, candidates ranked there.
    let [webgpu, cpu] = segments_on_webgpu_and_cpu(&small_model(), "small model, 3 beams", 3).await;
    assert_eq!(webgpu, cpu, "WebGPU and CPU differ with 3 beams");
}

/// `bench` times the pieces on both backends and reports them consistently: positive
/// medians, kernel counts where WebGPU records them, the RTF of its transcriptions; bad
/// options are errors naming the range.
#[wasm_bindgen_test]
async fn bench_reports_the_pieces_on_webgpu_and_cpu() {
    let audio: JsValue = test_audio().into();
    for backend in ["webgpu", "cpu"] {
        let model = Model::load(small_model(), Some(object(&[("backend", backend.into())]))).await.unwrap();
        let options = object(&[("runs", 1.into()), ("tokens", 3.into())]);
        let r =
            settle(model.bench(audio.clone(), Some(options))).await.unwrap_or_else(|e| panic!("{}", error_message(&e)));
        let number = |k: &str| get(&r, k).as_f64().unwrap_or_else(|| panic!("{backend}: {k} is not a number"));
        for k in ["encoderMs", "msPerToken", "msPerTokenSingle", "deviceMsPerStep", "transcribeMs"] {
            assert!(number(k) > 0.0, "{backend}: {k} = {}", number(k));
        }
        let samples = Float32Array::from(audio.clone()).length() as f64;
        assert_eq!(number("audioDurationS"), samples / 16000.0);
        assert!((number("rtf") - number("transcribeMs") / 1e3 / number("audioDurationS")).abs() < 1e-9);
        let kernels = get(&r, "stepKernels");
        let name = get(&r, "backend").as_string().unwrap();
        if backend == "webgpu" {
            assert!(name.starts_with("wgpu"), "{name}");
            assert!(kernels.as_f64().is_some_and(|k| k > 10.0), "{backend}: stepKernels {kernels:?}");
        } else {
            assert_eq!(name, "cpu");
            assert!(kernels.is_null(), "{backend}: stepKernels {kernels:?}");
        }
        assert_eq!(get(&r, "adapter"), get(&model.info().unwrap(), "adapter"));
    }
    let model = Model::load(small_model(), Some(object(&[("backend", "cpu".into())]))).await.unwrap();
    for (options, message) in [
        (object(&[("tokens", 0.into())]), "tokens must be a whole number from 1 to 200"),
        (object(&[("runs", 1.5.into())]), "runs must be a whole number from 1 to 1000"),
        (object(&[("rounds", 1.into())]), "unknown bench option 'rounds'; the options are runs, tokens"),
    ] {
        let e = settle(model.bench(audio.clone(), Some(options))).await.unwrap_err();
        assert_eq!(error_message(&e), message);
    }
}

/// The small model with int8 matrices (as `susurrus convert --quantize int8` writes them):
/// it loads, and WebGPU (int8 dequantized in the kernels' loads) gives the CPU backend's
/// tokens.
#[wasm_bindgen_test]
async fn int8_model_gives_the_same_tokens_on_webgpu_and_cpu() {
    let files = small_model_files_as(5, WeightFormat::Int8).unwrap();
    let named: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    let [webgpu, cpu] = segments_on_webgpu_and_cpu(&as_files(&named), "int8 model", 1).await;
    assert_eq!(webgpu, cpu, "WebGPU and CPU differ");
}

/// A large-v3-shaped model (1280 wide, 20 heads, 128 mels, 51866 tokens; one layer each side
/// and 16 audio positions, so SwiftShader runs it in seconds) with f32 weights, on a WebGPU
/// device that holds WebGPU's default buffer limits: its 266 MB token embedding is above the
/// 128 MiB binding limit, so it is read as two blocks of rows, and the encoder output and the
/// decoder's choices are the CPU backend's.
#[wasm_bindgen_test]
async fn large_v3_shapes_run_within_the_default_buffer_limits() {
    let options = WgpuOptions { default_buffer_limits: true, ..WgpuOptions::default() };
    let backend = WgpuBackend::with_options(&options).await.unwrap();
    let config = WhisperConfig { n_audio_ctx: 16, ..shapes::config(Architecture::LargeV3, 1) };
    let name = "large-v3 shapes (1 + 1 layers, 16 audio positions, f32 weights)";
    if let Err(e) = shapes::model_matches_reference(&backend, config, DType::F32, name).await {
        panic!("{e}");
    }
}

/// `tokenizers` (fancy-regex, one thread) encodes in wasm as natively.
#[wasm_bindgen_test]
fn tokenizer_json_encodes_in_the_browser() {
    let (vocabulary, json) = (small_vocabulary(), small_tokenizer_json());
    let vocabulary = Some((vocabulary.as_bytes(), "vocabulary.txt"));
    let tokenizer =
        Tokenizer::from_files(vocabulary, Some((json.as_bytes(), "tokenizer.json")), "the small model").unwrap();
    assert_eq!(tokenizer.encode(" hello<|endoftext|>").unwrap(), [32, 104, 101, 108, 108, 111, 260]);
}

#[wasm_bindgen_test]
async fn auto_passes_over_a_software_adapter() {
    let model = load_small("auto").await.unwrap_or_else(|e| panic!("{}", error_message(&e)));
    let info = model.info().unwrap();
    assert_eq!(get(&info, "backend"), "cpu");
    let reason = get(&info, "fallbackReason").as_string().unwrap_or_default();
    assert!(reason.contains("emulates a GPU in software"), "{reason}");
    assert!(get(&info, "adapter").as_string().unwrap().starts_with("CPU"), "{info:?}");
}

#[wasm_bindgen_test]
async fn load_failures_are_errors_that_say_what_was_wrong() {
    let err = Model::load("/no-such-model".into(), None).await.err().expect("a missing folder fails");
    let message = error_message(&err);
    assert!(message.contains("/no-such-model/config.json: HTTP 404"), "{message}");

    let mut files = small_model_files(5).unwrap();
    files.insert("model.safetensors".into(), b"not a safetensors file".to_vec());
    let named: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    let err = Model::load(as_files(&named), None).await.err().expect("corrupt weights fail");
    assert!(error_message(&err).starts_with("model.safetensors: "), "{}", error_message(&err));

    let err = Model::load(as_files(&[("config.json", b"{}")]), None).await.err().expect("no weights file");
    assert_eq!(
        error_message(&err),
        "model files: no model.bin (CTranslate2) or model.safetensors (Hugging Face) among config.json"
    );

    let cases: [(JsValue, Option<js_sys::Object>, &str); 4] = [
        (
            small_model(),
            Some(object(&[("backend", "tpu".into())])),
            "backend 'tpu' is not one of \"auto\", \"webgpu\", \"cpu\"",
        ),
        (
            small_model(),
            Some(object(&[("backnd", "cpu".into())])),
            "unknown load option 'backnd'; the options are backend, cache, onProgress, vad, hub",
        ),
        (small_model(), Some(object(&[("vad", true.into())])), "vad must be the URL of silero_vad_v6.onnx"),
        (42.into(), None, "a model is a name or a folder URL (a string) or its files (a FileList or an array of File)"),
    ];
    for (source, options, want) in cases {
        let err = Model::load(source, options).await.err().expect("fails");
        assert_eq!(error_message(&err), want);
    }
}

#[wasm_bindgen_test]
async fn bad_audio_and_options_are_errors_and_the_model_stays_usable() {
    let model = load_small("cpu").await.unwrap();
    let fails = async |audio: JsValue, options: js_sys::Object| {
        let err = transcribe(&model, &audio, options).await.expect_err("fails");
        error_message(&err)
    };
    assert_eq!(fails(Uint8Array::new_with_length(0).into(), greedy(&[])).await, "the audio is empty (0 bytes)");
    let garbage = Uint8Array::from(&b"this is not audio at all, just text bytes"[..]);
    let message = fails(garbage.into(), greedy(&[])).await;
    assert!(message.starts_with("cannot decode the audio (41 bytes): EncodingError"), "{message}");
    let nan = Float32Array::from(&[0.0, 0.1, 0.2, f32::NAN, 0.0][..]);
    assert_eq!(
        fails(nan.into(), greedy(&[])).await,
        "bad audio: sample 3 (0.000 s) is NaN; audio must be finite numbers"
    );
    let message = fails(test_audio().into(), object(&[("langauge", "en".into())])).await;
    assert!(message.starts_with("invalid option: unknown field `langauge`, expected one of `language`"), "{message}");
    assert_eq!(
        fails(test_audio().into(), object(&[("bestOf", 0.into())])).await,
        "invalid option: best_of: 0 is not 1 to 32"
    );
    assert_eq!(fails(test_audio().into(), object(&[("onSegment", 3.into())])).await, "onSegment must be a function");
    // Loaded without `vad`: asking for it names what is missing.
    assert_eq!(get(&model.info().unwrap(), "vad"), false);
    assert_eq!(
        fails(test_audio().into(), greedy(&[("vad", true.into())])).await,
        "invalid option: vad: the Silero VAD network is not loaded (load it before transcribing with vad)"
    );
    assert!(fails(7.into(), greedy(&[])).await.starts_with("audio must be a Float32Array of 16 kHz mono samples"));

    let empty = transcribe(&model, &Float32Array::new_with_length(0).into(), greedy(&[])).await.unwrap();
    assert_eq!(get(&empty, "text"), "");
    assert_eq!(Array::from(&get(&empty, "segments")).length(), 0);

    // One transcription at a time: the second call while the first runs is refused. The first
    // gets a minute of audio (60 one-second windows of the small model), so it runs long enough
    // on the CPU backend to give the event loop a turn, whatever the build's speed.
    let audio: JsValue = test_audio().into();
    let clip = test_audio().to_vec();
    let minute: Vec<f32> = clip.iter().copied().cycle().take(clip.len() * 20).collect();
    let first = model.transcribe(Float32Array::from(minute.as_slice()).into(), Some(greedy(&[])));
    let second = settle(model.transcribe(audio.clone(), Some(greedy(&[])))).await;
    assert_eq!(
        error_message(&second.expect_err("busy")),
        "this model is already transcribing; wait for that to finish"
    );
    settle(first).await.unwrap();
}

#[wasm_bindgen_test]
async fn abort_rejects_with_an_abort_error_and_keeps_the_model() {
    let model = load_small("cpu").await.unwrap();
    let audio: JsValue = test_audio().into();
    let reference = segments(&transcribe(&model, &audio, greedy(&[])).await.unwrap());
    assert!(reference.len() >= 2, "three 1 s windows give several segments: {reference:?}");

    let controller = web_sys::AbortController::new().unwrap();
    let abort = controller.clone();
    let progress = Closure::<dyn FnMut(JsValue)>::new(move |_| abort.abort());
    let options = greedy(&[("signal", controller.signal().into()), ("onProgress", progress.as_ref().clone())]);
    let err = transcribe(&model, &audio, options).await.expect_err("aborted");
    let error = err.dyn_ref::<js_sys::Error>().expect("an Error");
    assert_eq!(
        (String::from(error.name()), String::from(error.message())),
        ("AbortError".into(), "the transcription was aborted".into())
    );

    let already = web_sys::AbortController::new().unwrap();
    already.abort();
    let err = transcribe(&model, &audio, greedy(&[("signal", already.signal().into())])).await.expect_err("aborted");
    assert_eq!(err.dyn_ref::<js_sys::Error>().unwrap().name(), "AbortError");

    let again = segments(&transcribe(&model, &audio, greedy(&[])).await.unwrap());
    assert_eq!(again, reference, "the model changed after an abort");
}

#[wasm_bindgen_test]
async fn a_throwing_callback_is_the_error() {
    let model = load_small("cpu").await.unwrap();
    let throw = js_sys::Function::new_no_args("throw new TypeError('the page broke')");
    let err = transcribe(&model, &test_audio().into(), greedy(&[("onProgress", throw.into())])).await.err().unwrap();
    assert_eq!(error_message(&err), "the page broke");
}

#[wasm_bindgen_test]
async fn cached_files_load_without_the_network_until_the_cache_is_cleared() {
    // The test server has no such folder: only the cache can answer.
    let page =
        js_sys::Reflect::get(&js_sys::Reflect::get(&js_sys::global(), &"location".into()).unwrap(), &"href".into());
    let base = web_sys::Url::new_with_base("/cached-small-model/", &page.unwrap().as_string().unwrap()).unwrap().href();
    let caches: web_sys::CacheStorage =
        js_sys::Reflect::get(&js_sys::global(), &"caches".into()).unwrap().unchecked_into();
    let cache: web_sys::Cache = JsFuture::from(caches.open("susurrus-models-v1")).await.unwrap().unchecked_into();
    for (name, bytes) in small_model_files(5).unwrap() {
        let mut bytes = bytes;
        let response = web_sys::Response::new_with_opt_u8_array(Some(&mut bytes)).unwrap();
        JsFuture::from(cache.put_with_str(&format!("{base}{name}"), &response)).await.unwrap();
    }
    let reports = Array::new();
    let sink = reports.clone();
    let on_progress = Closure::<dyn FnMut(JsValue)>::new(move |p| {
        sink.push(&p);
    });
    let options = object(&[("backend", "cpu".into()), ("onProgress", on_progress.as_ref().clone())]);
    let model = Model::load("/cached-small-model/".into(), Some(options))
        .await
        .unwrap_or_else(|e| panic!("{}", error_message(&e)));
    let info = model.info().unwrap();
    assert_eq!(get(&info, "fromCache"), true);
    assert!(reports.iter().all(|p| get(&p, "fromCache") == true), "a file came from the network");
    let files: Vec<String> = reports.iter().map(|p| get(&p, "file").as_string().unwrap()).collect();
    assert!(files.contains(&"model.safetensors".to_string()), "{files:?}");

    assert!(clear_model_cache().await.unwrap(), "there was a cache to clear");
    let err = Model::load("/cached-small-model/".into(), None).await.err().expect("gone with the cache");
    assert!(error_message(&err).contains("cached-small-model/config.json: HTTP 404"), "{}", error_message(&err));
}

#[wasm_bindgen_test]
fn results_format_as_documents() {
    let segment = object(&[("start", 0.0.into()), ("end", 1.5.into()), ("text", " Hi & bye.".into())]);
    let result: JsValue = object(&[("segments", Array::of1(&segment).into())]).into();
    assert_eq!(
        format_transcript(result.clone(), "srt", JsValue::UNDEFINED).unwrap(),
        "1\n00:00:00,000 --> 00:00:01,500\nHi & bye.\n"
    );
    assert_eq!(
        format_transcript(result.clone(), "vtt", JsValue::UNDEFINED).unwrap(),
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHi &amp; bye.\n"
    );
    assert_eq!(format_transcript(result.clone(), "txt", JsValue::UNDEFINED).unwrap(), "Hi & bye.\n");
    let json = format_transcript(result.clone(), "json", JsValue::UNDEFINED).unwrap();
    assert!(json.starts_with("{\n  \"segments\": [\n    {\n      \"start\": 0,"), "{json}");
    assert_eq!(
        error_message(&format_transcript(result.clone(), "doc", JsValue::UNDEFINED).unwrap_err()),
        "format 'doc' is not one of \"txt\", \"srt\", \"vtt\", \"json\""
    );
    assert!(
        error_message(&format_transcript(JsValue::from(3), "srt", JsValue::UNDEFINED).unwrap_err())
            .starts_with("not a transcription result")
    );
    // Cues from words, two lines of at most 6 characters: "Hi &" and "bye.".
    let word = |start: f64, end: f64, text: &str| {
        object(&[("start", start.into()), ("end", end.into()), ("word", text.into()), ("probability", 0.9.into())])
    };
    let words = Array::of3(&word(0.0, 0.5, " Hi"), &word(0.5, 0.7, " &"), &word(0.7, 1.5, " bye."));
    let segment =
        object(&[("start", 0.0.into()), ("end", 1.5.into()), ("text", " Hi & bye.".into()), ("words", words.into())]);
    let result: JsValue = object(&[("segments", Array::of1(&segment).into())]).into();
    let lines = object(&[("maxLineWidth", 6.into()), ("maxLineCount", 2.into())]);
    assert_eq!(
        format_transcript(result.clone(), "vtt", lines.into()).unwrap(),
        "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHi &amp;\nbye.\n"
    );
    let bad = object(&[("maxLineWidht", 6.into())]);
    assert!(
        error_message(&format_transcript(result, "srt", bad.into()).unwrap_err())
            .contains("unknown field `maxLineWidht`")
    );
}

/// A 16-bit PCM WAV file of `channels` interleaved channels.
fn wav(rate: u32, channels: u16, frames: &[Vec<i16>]) -> Vec<u8> {
    let data: Vec<u8> = frames.iter().flatten().flat_map(|s| s.to_le_bytes()).collect();
    let mut out = Vec::new();
    out.extend(b"RIFF");
    out.extend((36 + data.len() as u32).to_le_bytes());
    out.extend(b"WAVEfmt ");
    out.extend(16u32.to_le_bytes());
    out.extend(1u16.to_le_bytes());
    out.extend(channels.to_le_bytes());
    out.extend(rate.to_le_bytes());
    out.extend((rate * u32::from(channels) * 2).to_le_bytes());
    out.extend((channels * 2).to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend(b"data");
    out.extend((data.len() as u32).to_le_bytes());
    out.extend(data);
    out
}

#[wasm_bindgen_test]
async fn encoded_audio_is_decoded_resampled_and_mixed_down() {
    // One second at 8 kHz: left a 440 Hz sine, right silent; mono is half the sine.
    let sine = |t: f64| (2.0 * std::f64::consts::PI * 440.0 * t).sin() * 0.5;
    let frames: Vec<Vec<i16>> = (0..8000).map(|i| vec![(sine(i as f64 / 8000.0) * 32767.0) as i16, 0]).collect();
    let bytes = Uint8Array::from(wav(8000, 2, &frames).as_slice());
    let buffer = bytes.buffer();
    let samples =
        decode_audio(buffer.clone().into()).await.unwrap_or_else(|e| panic!("{}", error_message(&e))).to_vec();
    assert_eq!(buffer.byte_length(), bytes.length(), "the caller's buffer was detached");
    assert!((15990..=16010).contains(&samples.len()), "{} samples", samples.len());
    // Away from the edges (the resampler's filter needs context) it is the sine at 16 kHz.
    let worst =
        (400..15600).map(|i| (f64::from(samples[i]) - sine(i as f64 / 16000.0) / 2.0).abs()).fold(0.0, f64::max);
    assert!(worst < 0.01, "largest error {worst}");

    let blob = web_sys::Blob::new_with_u8_array_sequence(&Array::of1(&bytes)).unwrap();
    let from_blob = decode_audio(blob.into()).await.unwrap().to_vec();
    assert_eq!(from_blob, samples);
}

/// On a page (no synchronous file handles) a long recording's decoded samples go to
/// JavaScript memory past two minutes, not into the module's, and read back exactly.
#[wasm_bindgen_test]
async fn on_a_page_long_audio_goes_to_javascript_memory() {
    use susurrus_web::stream::JsSamples;
    use susurrus_whisper::Audio;
    use susurrus_whisper::audio::{IN_MEMORY, SampleSink};
    let total = IN_MEMORY + (1 << 20) + 77;
    let want: Vec<f32> = test_audio().to_vec().into_iter().cycle().take(total).collect();
    let mut samples = JsSamples::new().await;
    for piece in want.chunks(99_991) {
        samples.push(piece).unwrap();
    }
    let samples = samples.finish().unwrap();
    assert_eq!(samples.place(), "javascript");
    for (start, len) in [(0, 10), (IN_MEMORY - 3, 7), ((1 << 20) - 5, 10), (total - 20, 30)] {
        let got = samples.read_range(start, start + len).unwrap();
        let expected: Vec<f32> = (start..start + len).map(|i| want.get(i).copied().unwrap_or(0.0)).collect();
        assert_eq!(got, expected, "{start}+{len}");
    }
}

#[wasm_bindgen_test]
async fn audio_buffers_at_other_rates_are_rendered_to_16_khz_mono() {
    // 0.5 s at 44.1 kHz, three channels: a 300 Hz sine, its negative, and the sine again;
    // the average is a third of the sine.
    let (rate, frames) = (44100.0f32, 22050usize);
    let sine = |t: f64| (2.0 * std::f64::consts::PI * 300.0 * t).sin() * 0.6;
    let options = web_sys::AudioBufferOptions::new(frames as u32, rate);
    options.set_number_of_channels(3);
    let buffer = web_sys::AudioBuffer::new(&options).unwrap();
    let channel: Vec<f32> = (0..frames).map(|i| sine(i as f64 / f64::from(rate)) as f32).collect();
    let negative: Vec<f32> = channel.iter().map(|s| -s).collect();
    for (c, data) in [&channel, &negative, &channel].into_iter().enumerate() {
        buffer.copy_to_channel(data, c as i32).unwrap();
    }
    let samples = decode_audio(buffer.into()).await.unwrap_or_else(|e| panic!("{}", error_message(&e))).to_vec();
    assert_eq!(samples.len(), 8000, "0.5 s at 16 kHz");
    let worst = (200..7800).map(|i| (f64::from(samples[i]) - sine(i as f64 / 16000.0) / 3.0).abs()).fold(0.0, f64::max);
    assert!(worst < 0.01, "largest error {worst}");
}

#[wasm_bindgen(inline_js = "
export function recordDevices() {
  if (globalThis.susurrusTestDevices) return;
  globalThis.susurrusTestDevices = [];
  const request = GPUAdapter.prototype.requestDevice;
  GPUAdapter.prototype.requestDevice = async function (...args) {
    const device = await request.apply(this, args);
    globalThis.susurrusTestDevices.push(device);
    return device;
  };
}
export function destroyLastDevice() {
  globalThis.susurrusTestDevices.at(-1).destroy();
}
export function devicesOpened() {
  return globalThis.susurrusTestDevices.length;
}
export function recordBuffers() {
  if (globalThis.susurrusTestBuffers) return;
  const bytes = (globalThis.susurrusTestBuffers = { live: 0, peak: 0 });
  const create = GPUDevice.prototype.createBuffer;
  GPUDevice.prototype.createBuffer = function (descriptor) {
    const buffer = create.call(this, descriptor);
    bytes.live += descriptor.size;
    bytes.peak = Math.max(bytes.peak, bytes.live);
    const destroy = buffer.destroy;
    let destroyed = false;
    buffer.destroy = function () {
      if (!destroyed) {
        destroyed = true;
        bytes.live -= descriptor.size;
      }
      return destroy.call(this);
    };
    return buffer;
  };
}
export function gpuBufferPeak() {
  const bytes = globalThis.susurrusTestBuffers;
  const peak = bytes.peak;
  bytes.peak = bytes.live;
  return peak;
}
")]
extern "C" {
    /// Keeps every `GPUDevice` the page opens from here on (the browser's own method, wrapped).
    #[wasm_bindgen(js_name = recordDevices)]
    fn record_devices();
    /// `GPUDevice.destroy()` on the device opened last: what a browser does to a lost one.
    #[wasm_bindgen(js_name = destroyLastDevice)]
    fn destroy_last_device();
    #[wasm_bindgen(js_name = devicesOpened)]
    fn devices_opened() -> u32;
    /// Counts the bytes of the GPU buffers the page creates from here on, less those destroyed
    /// (the browser's own methods, wrapped): the GPU memory the page holds.
    #[wasm_bindgen(js_name = recordBuffers)]
    fn record_buffers();
    /// The most bytes of GPU buffers held at once since the last call (or since recording began).
    #[wasm_bindgen(js_name = gpuBufferPeak)]
    fn gpu_buffer_peak() -> f64;
}

/// The model's WebGPU device destroyed after the first window: the transcription opens
/// another, says so once through `onDeviceLost` (where it goes on) and resolves to the
/// segments an undisturbed run gives; the model keeps the new device.
#[wasm_bindgen_test]
async fn a_destroyed_webgpu_device_is_replaced_and_reported() {
    record_devices();
    let model = load_small("webgpu").await.unwrap();
    let opened = devices_opened();
    let audio: JsValue = test_audio().into();
    // Text only: the random model's timestamps jump to the end, this way each of the three
    // one-second windows is decoded in turn.
    let vocabulary = Some((small_vocabulary(), "vocabulary.txt"));
    let tokenizer = Tokenizer::from_files(vocabulary.as_ref().map(|(v, n)| (v.as_bytes(), *n)), None, "small").unwrap();
    let timestamps = tokenizer.special_ids().timestamp_begin..tokenizer.vocab_size() as u32;
    let suppress: Array = std::iter::once(JsValue::from(-1)).chain(timestamps.map(JsValue::from)).collect();
    let text_only = |extra: &[(&str, JsValue)]| {
        let mut pairs = vec![("suppressTokens", suppress.clone().into())];
        pairs.extend(extra.iter().cloned());
        greedy(&pairs)
    };
    let reference = segments(&transcribe(&model, &audio, text_only(&[])).await.unwrap());
    assert_eq!(reference.len(), 3, "a segment a window: {reference:?}");

    let destroyed_at = std::rc::Rc::new(std::cell::Cell::new(None));
    let at = destroyed_at.clone();
    let progress = Closure::<dyn FnMut(JsValue)>::new(move |p: JsValue| {
        if at.get().is_none() {
            destroy_last_device();
            at.set(get(&p, "done").as_f64());
        }
    });
    let lost = Array::new();
    let record = lost.clone();
    let on_lost = Closure::<dyn FnMut(JsValue)>::new(move |l: JsValue| {
        record.push(&l);
    });
    let options = text_only(&[("onProgress", progress.as_ref().clone()), ("onDeviceLost", on_lost.as_ref().clone())]);
    let result = transcribe(&model, &audio, options).await.unwrap();
    assert_eq!(segments(&result), reference, "the transcript after the loss");
    assert_eq!(lost.length(), 1, "onDeviceLost called once");
    let reason = get(&lost.get(0), "reason").as_string().unwrap();
    assert!(!reason.is_empty());
    assert_eq!(get(&lost.get(0), "resumeAt").as_f64(), destroyed_at.get(), "resumed where the first window ended");
    assert_eq!(devices_opened(), opened + 1, "one new device ({reason})");
    assert_eq!(segments(&transcribe(&model, &audio, text_only(&[])).await.unwrap()), reference, "on the new device");
}

/// The WebAssembly memory's size in MB (it only grows: its size after a transcription is the
/// most the transcription needed).
fn wasm_memory_mb() -> f64 {
    let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().dyn_into().unwrap();
    f64::from(memory.buffer().dyn_into::<js_sys::ArrayBuffer>().unwrap().byte_length()) / 1e6
}

/// Memory in the page is flat in the recording's length: a random model with the real 30 s
/// windows (one encoder layer) transcribes a short and then a long generated recording, and
/// the module's memory must not grow by 8 MB in between; on WebGPU, the most GPU buffer bytes
/// held at once during the long one must be those of the short one (every buffer of the
/// browser's `createBuffer` counted until its `destroy`). The samples stay in JavaScript memory
/// (the caller's array) and only a window's stretch is copied in; keeping them in the module
/// adds 3.84 MB a minute (measured: 30 to 107 MB from 2 to 20 minutes on the CPU). On the CPU 2
/// and 20 minutes (77 MB of samples, more than earlier tests can leave free in the module);
/// on WebGPU, whose SwiftShader adapter takes 6 s a window here, 1 and 5 minutes.
#[wasm_bindgen_test]
async fn module_memory_is_flat_in_the_recordings_length() {
    use susurrus_testkit::whisper::{model_files, small_config};
    let mut config = small_config();
    (config.n_audio_ctx, config.encoder_layers, config.encoder_heads) = (1500, 1, 1);
    let files = model_files(config, 11, WeightFormat::F16).unwrap();
    let named: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    // Made in JavaScript memory a second at a time, not in the module's.
    let minutes = |m: u32| -> JsValue {
        let second: Vec<f32> = (0..16000).map(|i| 0.1 * ((i % 400) as f32 / 200.0 - 1.0)).collect();
        let samples = Float32Array::new_with_length(m * 60 * 16000);
        for s in 0..m * 60 {
            samples.subarray(s * 16000, (s + 1) * 16000).copy_from(&second);
        }
        samples.into()
    };
    record_buffers();
    for (backend, short, long) in [("cpu", 2, 20), ("webgpu", 1, 5)] {
        let model = Model::load(as_files(&named), Some(object(&[("backend", backend.into())]))).await.unwrap();
        let options = || object(&[("beamSize", 1.into()), ("temperatures", Array::of1(&0.0.into()).into())]);
        gpu_buffer_peak();
        transcribe(&model, &minutes(short), options()).await.unwrap();
        let after_short = wasm_memory_mb();
        let gpu_short = gpu_buffer_peak() / 1e6;
        let result = transcribe(&model, &minutes(long), options()).await.unwrap();
        assert_eq!(get(&get(&result, "timings"), "audioDurationS").as_f64(), Some(f64::from(long * 60)));
        let after_long = wasm_memory_mb();
        let gpu_long = gpu_buffer_peak() / 1e6;
        if backend == "webgpu" {
            web_sys::console::log_1(
                &format!(
                    "webgpu: GPU buffers at most {gpu_short:.2} MB in {short} min, {gpu_long:.2} MB in {long} min"
                )
                .into(),
            );
            assert!(gpu_short > 1.0, "the model's buffers were counted: {gpu_short:.2} MB");
            assert!(
                gpu_long <= gpu_short,
                "webgpu: GPU buffers grew from {gpu_short:.2} MB ({short} min) to {gpu_long:.2} MB ({long} min)"
            );
        }
        web_sys::console::log_1(
            &format!(
                "{backend}: module memory after {short} min {after_short:.1} MB, after {long} min {after_long:.1} MB"
            )
            .into(),
        );
        assert!(
            after_long - after_short < 8.0,
            "{backend}: the module's memory grew from {after_short:.1} MB to {after_long:.1} MB"
        );
    }
}
